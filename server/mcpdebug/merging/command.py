"""`mcpdebug merge SRC... [--dir DEST]`: what it merges, in which order, and what it says.

Each source's store first (its rows), then its spool files (what its store had not taken in yet):
both ways an event already in the merged store changes nothing. What each source added is said per
run, every conflict once, and at the end each merged run's tests and shards with the command that
shows it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mcpdebug.merging.conflicts import Conflict, RunMerge
from mcpdebug.merging.sources import Source, SourceError, find
from mcpdebug.merging.spools import merge_spools
from mcpdebug.merging.stores import merge_store
from mcpdebug.names import StoreError
from mcpdebug.store import Store
from mcpdebug.store_dir import find_dir
from pytest_mcpdebug.folder import dir_args, store_in

EXIT_USAGE = 2
MAX_CONFLICTS_SHOWN = 50


def destination(given: str | None) -> Path:
    """The store to merge into: --dir as a store (a new or empty folder becomes one; a project folder
    gets its .mcpdebug), else the current project's."""
    if given is None:
        return find_dir(None, create=True)
    path = Path(given).expanduser().resolve()
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return path
    if not path.is_dir():
        raise StoreError(f"--dir {given}: a file, not a folder to keep the merged store in")
    return store_in(path)


def main(args: argparse.Namespace) -> int:
    from mcpdebug.views.calls import command, for_terminal
    from pytest_mcpdebug.commands import program

    started = time.monotonic()
    try:
        target = destination(args.dir)
        store = Store(target)
        sources = find([Path(p) for p in args.sources], target)
    except SourceError as exc:
        print(f"mcpdebug merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for_terminal(program("mcpdebug"), dir_args(target, Path.cwd()))
    conflicts: list[Conflict] = []
    touched: set[str] = set()
    for source in sources:
        try:
            merged = _merge_source(store, source, conflicts)
        except SourceError as exc:
            print(f"mcpdebug merge: {exc}", file=sys.stderr)
            return EXIT_USAGE
        touched |= set(merged)
    for conflict in conflicts[:MAX_CONFLICTS_SHOWN]:
        print(f"mcpdebug merge: conflict: {conflict.text()}", file=sys.stderr)
    if len(conflicts) > MAX_CONFLICTS_SHOWN:
        print(
            f"mcpdebug merge: ... and {len(conflicts) - MAX_CONFLICTS_SHOWN} more conflicts", file=sys.stderr
        )
    print(f"Merged {len(sources)} source(s) into {target} in {time.monotonic() - started:.1f} s.")
    for run_id in sorted(touched):
        print(_run_line(store, run_id))
        print(f"  inspect it: {command('show', run_id)}")
    if conflicts:
        print(
            f"{len(conflicts)} conflict(s): the merged store kept what it held first and left the "
            "contradicting records out (listed above on stderr)."
        )
    store.close()
    return 0


def _merge_source(store: Store, source: Source, conflicts: list[Conflict]) -> dict[str, RunMerge]:
    merged: dict[str, RunMerge] = {}
    damaged = 0
    if source.database is not None:
        merged.update(merge_store(store, source, conflicts))
    if source.spools:
        runs, damaged = merge_spools(store, source, conflicts)
        for run_id, merge in runs.items():
            mine = merged.setdefault(run_id, RunMerge())
            mine.new_tests += merge.new_tests
            mine.known_tests = max(mine.known_tests, merge.known_tests)
    what = f"{source.kind} {source.path}" + (f" ({len(source.spools)} spool files)" if source.spools else "")
    parts = [
        f"{run_id}: {m.new_tests} new test(s)" + (f", {m.known_tests} already here" if m.known_tests else "")
        for run_id, m in sorted(merged.items())
    ]
    print(f"{what}: " + ("; ".join(parts) if parts else "no runs"))
    if damaged:
        print(f"  {damaged} damaged line(s) of its spool files skipped", file=sys.stderr)
    return merged


def _run_line(store: Store, run_id: str) -> str:
    from mcpdebug.views.runs import counts_text, status_text

    run = store.run(run_id)
    if run is None:
        return f"Run {run_id}: nothing stored"
    labels = [s["label"] or "(no label)" for s in store.shards(run_id)]
    shards = f"; {len(labels)} shards: {', '.join(labels)}" if len(labels) > 1 else ""
    total = sum(run["counts"].values())
    return f"Run {run_id}: {status_text(run)}; {total} tests: {counts_text(run['counts'])}{shards}"
