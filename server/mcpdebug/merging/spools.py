"""A source's spool files into the merged store: through the one writer, `Store.apply`.

Each file is read twice: first only its tests' ends and its runs' starts (the rest of each line is
not decoded), to find what the store already holds otherwise (`conflicts`); then every event, less
those of a conflicting test (or of a conflicting shard's run records), in batches. Events already
stored (the same run, process and number) change nothing: a spool merged twice is merged once.
"""

from __future__ import annotations

from typing import Final

from mcpdebug.ingest.spool import decode_line, read_decoded, read_events
from mcpdebug.merging.conflicts import (
    Conflict,
    Ended,
    RunMerge,
    compare,
    shard_conflict,
    stored_ends,
    taken_label,
    within,
)
from mcpdebug.merging.sources import Source
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

_FIRST_LOOK: Final = (b'{"type":"test_finished"', b'{"type":"run_started"', b"[")
"""The lines the first look decodes: tests' ends (a quiet pass's is a short record, an array) and runs'
starts (the shard each process ran)."""


def merge_spools(store: Store, source: Source, conflicts: list[Conflict]) -> tuple[dict[str, RunMerge], int]:
    """Merge the source's spool files; returns what each run got, and the damaged lines skipped."""
    name = str(source.path)
    ends, starts, later = _first_look(source, conflicts)
    runs: dict[str, RunMerge] = {}
    for run_id in sorted({*ends, *(r for r, _ in starts)}):
        incoming = ends.get(run_id, {})
        runs[run_id] = compare(
            run_id, stored_ends(store.db, run_id, among=incoming), incoming, name, conflicts
        )
        runs[run_id].left_out.update(later.get(run_id, {}))
    for (run_id, label), processes in sorted(starts.items()):
        if shard_conflict(store.db, run_id, label, processes[0], name, conflicts):
            runs[run_id].processes_left_out.update(processes)
            continue
        for process in processes[1:]:
            taken_label(run_id, label, processes[0], process, name, conflicts)
            runs[run_id].processes_left_out.add(process)
    damaged = 0
    leaving = {run_id for run_id, merge in runs.items() if merge.left_out or merge.processes_left_out}
    for path in source.spools:
        bad = 0
        for batch, bad in read_events(path):  # noqa: B007 (the last count is the file's)
            kept = batch
            if leaving:
                kept = [
                    e
                    for e in batch
                    if e.run_id not in leaving or not runs[e.run_id].leaves_out(_test(e), e.process)
                ]
            if kept:
                store.apply(kept)
        damaged += bad
    return runs, damaged


def _first_look(
    source: Source, conflicts: list[Conflict]
) -> tuple[dict[str, dict[str, Ended]], dict[tuple[str, str], list[str]], dict[str, dict[str, str]]]:
    """Each run's tests' ends, the processes of each shard, and the later of two processes of the
    source that ended a test differently (by run: node id -> process)."""
    ends: dict[str, dict[str, Ended]] = {}
    starts: dict[tuple[str, str], list[str]] = {}
    later: dict[str, dict[str, str]] = {}
    for path in source.spools:
        for batch, _ in read_decoded(path, _end_or_start, lambda line: line.startswith(_FIRST_LOOK)):
            for e in batch:
                if type(e) is protocol.RunStarted:
                    processes = starts.setdefault((e.run_id, e.shard), [])
                    if e.process not in processes:
                        processes.append(e.process)
                    continue
                if type(e) is protocol.QuickPass:
                    end = Ended("passed", e.ts, e.worker, e.process)
                elif type(e) is protocol.TestFinished and e.outcome != "rerun":
                    end = Ended(e.outcome, e.ts, e.worker, e.process)
                else:
                    continue
                run = ends.setdefault(e.run_id, {})
                first = run.get(e.nodeid)
                if first is not None and within(e.run_id, e.nodeid, first, end, str(source.path), conflicts):
                    later.setdefault(e.run_id, {})[e.nodeid] = e.process
                    continue
                run[e.nodeid] = end
    return ends, starts, later


def _end_or_start(line: bytes) -> protocol.Event | protocol.QuickPass | protocol.Hello:
    """A first look's line: a quiet pass stays its short record (made an event, it would cost twice)."""
    if line.startswith(b"["):
        return protocol.decode_quick(line)
    return decode_line(line)


def _test(e: protocol.Event) -> str:
    return str(getattr(e, "nodeid", "") or "")
