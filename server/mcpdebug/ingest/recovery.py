"""Rebuilding a store that had to start afresh (its file corrupted, or deleted under the server).

What still exists is taken in: every spool file and write-ahead copy (those of live processes too),
then the output files of runs nothing else describes (their tests' output survives; their outcomes
were only in the database). One warning says what happened, what was recovered and where the old
files went.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import Store
from mcpdebug.store.output_files import OUTPUT_DIR, UNITS_FILE, is_run_unit
from pytest_mcpdebug import protocol

log = logging.getLogger("mcpdebug.ingest")

CHUNK_BYTES: Final = 512 * 1024
"""Output re-read a chunk of whole lines at a time (each becomes one event)."""


def rebuild(store: Store) -> str | None:
    """If the store was started afresh, rebuild it; returns the warning that says how (or None)."""
    if store.rebuild is None:
        return None
    what, aside = store.rebuild
    store.rebuild = None
    spool = ingest_spool(store, live_wal=True)
    runs, tests = 0, 0
    old_outputs = aside / OUTPUT_DIR if aside is not None else None
    if old_outputs is not None and old_outputs.is_dir():
        for folder in sorted(p for p in old_outputs.iterdir() if p.is_dir()):
            if not store.db.execute("SELECT 1 FROM runs WHERE run_id=?", (folder.name,)).fetchone():
                found = _recover_run(store, folder)
                runs, tests = runs + bool(found), tests + found
        shutil.rmtree(old_outputs, ignore_errors=True)  # copied into the new store
    parts = []
    if spool.runs:
        parts.append(f"{len(spool.runs)} run(s) from spool files ({spool.new:,} events)")
    if runs:
        parts.append(
            f"the output of {tests} test(s) of {runs} other run(s) from output files "
            "(their outcomes were lost)"
        )
    message = (
        f"mcpdebug: warning: the store {store.path} {what}: a new one was started and rebuilt from what "
        f"remained: {'; '.join(parts) or 'nothing (no spool or output files were left)'}."
        + (f" The old files are in {aside}; delete that folder once you no longer need it." if aside else "")
    )
    log.warning("%s", message)
    return message


def _recover_run(store: Store, folder: Path) -> int:
    """Re-ingest one run's output files as the output of its tests; returns how many units had output."""
    run_id = folder.name
    units: dict[int, tuple[str, str]] = {}
    try:
        for line in (folder / UNITS_FILE).read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                uid, worker, unit = json.loads(line)
                units[int(uid)] = (str(worker), str(unit))
            except (ValueError, TypeError):
                continue  # a line torn by the crash that damaged the store
    except OSError:
        return 0
    seq = 0
    nodeids: list[tuple[str, str]] = []
    for uid, (worker, unit) in sorted(units.items()):
        files = sorted(folder.glob(f"{uid}.tail*.log"), key=lambda p: int(p.stem.partition("tail")[2] or 0))
        files.insert(0, folder / f"{uid}.log")
        nodeid = "" if is_run_unit(unit) else unit
        first, batch = 1, []
        for ts, text, count in _chunks([f for f in files if f.exists()]):
            seq += 1
            batch.append(
                protocol.Output(
                    run_id=run_id,
                    process="recovered",
                    seq=seq,
                    ts=ts,
                    nodeid=nodeid,
                    worker=worker,
                    phase="",
                    stream="stdout",
                    first=first,
                    stream_first=first,
                    count=count,
                    text=text,
                )
            )
            first += count
            if len(batch) >= 100:
                store.apply(batch)
                batch = []
        store.apply(batch)
        if first > 1 and nodeid:
            nodeids.append((nodeid, worker))
    store.mark_recovered(run_id, nodeids)
    return len(nodeids)


def _chunks(files: list[Path]) -> Iterator[tuple[float, str, int]]:
    """(mtime, text of whole lines, line count) of the files, in order, a bounded chunk at a time."""
    for path in files:
        ts = os.path.getmtime(path)
        with open(path, "rb") as fh:
            rest = b""
            while data := fh.read(CHUNK_BYTES):
                data = rest + data
                end = data.rfind(b"\n")
                if end < 0:
                    rest = data
                    continue
                block, rest = data[:end], data[end + 1 :]
                yield ts, block.decode("utf-8", "replace"), block.count(b"\n") + 1
            if rest:
                yield ts, rest.decode("utf-8", "replace"), rest.count(b"\n") + 1
