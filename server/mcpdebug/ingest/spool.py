"""One ingestion path for both transports: lines of frames → validated events → `Store.apply`.

Spool files are read from the offset already ingested up to the last complete line (a writer may
still be appending), and deleted once their process will write nothing more. A line that does not
decode is logged and skipped: one bad line never costs the rest of the file.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import SPOOL_SUFFIX, spool_dir

log = logging.getLogger("mcpdebug.ingest")

BATCH_EVENTS = 5_000
BATCH_BYTES = 32 * 1024 * 1024


@dataclass
class SpoolReport:
    files: int = 0
    events: int = 0
    new: int = 0
    bad_lines: int = 0
    runs: set[str] = field(default_factory=set)


def decode_events(lines: list[bytes]) -> list[protocol.Event]:
    """Decode frames that must all be events; raises ProtocolError naming the first bad one."""
    events: list[protocol.Event] = []
    for number, line in enumerate(lines, 1):
        try:
            frame = protocol.decode_client_frame(line)
        except protocol.ProtocolError as exc:
            raise protocol.ProtocolError(f"line {number}: {exc}") from None
        if isinstance(frame, protocol.Hello):
            raise protocol.ProtocolError(f"line {number}: unexpected hello after the handshake")
        events.append(frame)
    return events


def ingest_spool(store: Store, only: str | None = None) -> SpoolReport:
    """Ingest what is new in every spool file (or just the file named ``only``)."""
    report = SpoolReport()
    folder = spool_dir(store.dir)
    try:
        names = [only] if only else sorted(n for n in os.listdir(folder) if n.endswith(SPOOL_SUFFIX))
    except FileNotFoundError:
        return report
    for name in names:
        if os.sep in name or name.startswith("."):
            log.warning("ignoring spool name %r: not a plain file name", name)
            continue
        _ingest_file(store, folder / name, report)
    return report


def _ingest_file(store: Store, path: Path, report: SpoolReport) -> None:
    name = path.name
    offset = store.spool_offset(name)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        store.set_spool_offset(name, None)
        return
    if size < offset:  # replaced by a different file of the same name: read it all again
        offset = 0
    report.files += 1
    last: protocol.Event | None = None
    batch: list[protocol.Event] = []
    batch_bytes = 0

    def commit() -> None:
        nonlocal batch, batch_bytes
        if batch:
            report.new += store.apply(batch)
            report.events += len(batch)
            report.runs.update(e.run_id for e in batch)
        store.set_spool_offset(name, offset)
        batch, batch_bytes = [], 0

    with open(path, "rb") as fh:
        fh.seek(offset)
        for line in fh:
            if not line.endswith(b"\n"):
                break  # a partial last line: its writer is still appending
            try:
                frame = protocol.decode_client_frame(line) if line.strip() else None
            except protocol.ProtocolError as exc:
                report.bad_lines += 1
                log.warning("%s: skipped a bad line at byte %d: %s", path, offset, exc)
                frame = None
            offset += len(line)
            if frame is not None and not isinstance(frame, protocol.Hello):
                batch.append(frame)
                batch_bytes += len(line)
                last = frame
                if len(batch) >= BATCH_EVENTS or batch_bytes >= BATCH_BYTES:
                    commit()
        commit()
    writer = (last.run_id, last.process) if last is not None else _writer(path)
    if writer is not None and store.process_done(*writer):
        if offset < size:
            log.warning(
                "%s: dropped %d bytes of an unfinished last line (its process has ended)", path, size - offset
            )
        path.unlink(missing_ok=True)
        store.set_spool_offset(name, None)


def _writer(path: Path) -> tuple[str, str] | None:
    """The (run, process) that wrote a spool file, from its first line."""
    try:
        with open(path, "rb") as fh:
            frame = protocol.decode_client_frame(fh.readline())
    except (OSError, protocol.ProtocolError):
        return None
    return None if isinstance(frame, protocol.Hello) else (frame.run_id, frame.process)
