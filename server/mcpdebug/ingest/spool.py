"""One ingestion path for both transports: lines of frames → validated events → `Store.apply`.

Spool files are read from the offset already ingested up to the last complete line (a writer may
still be appending), and deleted once their process will write nothing more. A streaming process's
write-ahead copy (``*.wal``) is read only once that process is gone without deleting it: while it
lives, the same events arrive on its connection.

Damage costs little and is said once: a line that does not decode is skipped, bytes that cannot be
a line (a run of NULs, megabytes without a newline) are stepped over without being held in memory,
and a file that held such garbage is moved to ``spool/damaged/`` once read, with one warning per
file that says what was kept. One bad line never costs the rest of the file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import SPOOL_SUFFIX, WAL_SUFFIX, spool_dir

log = logging.getLogger("mcpdebug.ingest")

BATCH_EVENTS: Final = 5_000
BATCH_BYTES: Final = 32 * 1024 * 1024
READ_BYTES: Final = 1024 * 1024
MAX_LINE: Final = protocol.MAX_MESSAGE_BYTES
"""No event is longer than the largest message: a longer "line" is garbage."""
DAMAGED_DIR: Final = "damaged"

Decoded = TypeVar("Decoded")


@dataclass
class SpoolReport:
    files: int = 0
    events: int = 0
    new: int = 0
    bad_lines: int = 0
    runs: set[str] = field(default_factory=set)
    damaged: list[str] = field(default_factory=list)
    """One message per damaged file: what was skipped, what was kept, where the file went."""


def decode_events(lines: list[bytes]) -> list[protocol.Event]:
    """Decode frames that must all be events, or quiet passes' short records (`protocol.quick`, sent
    as they are since protocol 3); raises ProtocolError naming the first bad one."""
    events: list[protocol.Event] = []
    for number, line in enumerate(lines, 1):
        try:
            frame = protocol.decode_spooled_line(line)
        except protocol.ProtocolError as exc:
            raise protocol.ProtocolError(f"line {number}: {exc}") from None
        if isinstance(frame, protocol.Hello):
            raise protocol.ProtocolError(f"line {number}: unexpected hello after the handshake")
        events.append(frame)
    return events


def ingest_spool(store: Store, only: str | None = None, *, live_wal: bool = False) -> SpoolReport:
    """Ingest what is new in every spool file (or just the file named ``only``); ``live_wal``: the
    write-ahead copies of live processes too (a rebuilt store lacks what they streamed before)."""
    report = SpoolReport()
    folder = spool_dir(store.dir)
    try:
        suffixes = (SPOOL_SUFFIX, WAL_SUFFIX)
        names = [only] if only else sorted(n for n in os.listdir(folder) if n.endswith(suffixes))
    except (FileNotFoundError, NotADirectoryError):
        return report
    for name in names:
        if os.sep in name or name.startswith("."):
            log.warning("ignoring spool name %r: not a plain file name", name)
            continue
        path = folder / name
        if name.endswith(WAL_SUFFIX) and not live_wal and _writer_lives(store, path):
            continue
        _ingest_file(store, path, report)
    return report


def _writer_lives(store: Store, wal: Path) -> bool:
    """A write-ahead copy's process is known and still running: its events come on its connection."""
    run_id, _, process = wal.name.removesuffix(WAL_SUFFIX).rpartition(".")
    return bool(run_id) and store.process_known(run_id, process) and not store.process_done(run_id, process)


@dataclass
class _Scan:
    """Where reading a file got to: the offset after the last whole line, and what was skipped."""

    offset: int
    end: int | None = None
    """Where a write-ahead copy's written part ends (its first NUL byte), once found."""
    bad_lines: int = 0
    bad_bytes: int = 0
    first_bad: str = ""

    def skip(self, size: int, why: str) -> None:
        self.bad_lines += 1
        self.bad_bytes += size
        self.first_bad = self.first_bad or f"at byte {self.offset}: {why}"
        self.offset += size


def _lines(fh: object, scan: _Scan, size: int, *, write_ahead: bool = False) -> Iterator[bytes]:
    """Whole lines from ``scan.offset`` on, read a chunk at a time; garbage is counted, not kept.

    The unfinished last line is left for the next look (its writer may be appending) unless it is
    already longer than any event can be. A write-ahead copy (``write_ahead``) ends at its first NUL
    byte: the file grows a chunk at a time and what was not copied in yet reads as NULs.
    """
    read = fh.read  # type: ignore[attr-defined]
    buffer = bytearray()
    overlong = 0  # bytes of a line too long to be an event, being stepped over
    at = scan.offset
    while chunk := read(READ_BYTES):
        if write_ahead and (cut := chunk.find(b"\0")) >= 0:
            chunk, scan.end = chunk[:cut], at + cut
        at += len(chunk)
        if overlong:
            end = chunk.find(b"\n")
            if end < 0:
                overlong += len(chunk)
                if scan.end is not None:
                    break
                continue
            scan.skip(overlong + end + 1, f"{overlong + end + 1:,} bytes without a line break")
            overlong, chunk = 0, chunk[end + 1 :]
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start : end + 1])
            start = end + 1
        del buffer[:start]
        if len(buffer) > MAX_LINE:
            overlong = len(buffer)
            buffer.clear()
        if scan.end is not None:
            return  # the rest of a write-ahead copy was never written
    if overlong:  # garbage up to the end of the file: no writer appends a line that long
        scan.skip(overlong, f"{overlong:,} bytes without a line break")
    elif buffer and not buffer.strip(b"\0"):  # encoded events never hold a NUL: not a line being written
        scan.skip(len(buffer), "NUL bytes")


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
    scan = _Scan(offset)
    last: protocol.Event | None = None
    batch: list[protocol.Event] = []
    batch_bytes = 0
    kept = 0

    def commit() -> None:
        nonlocal batch, batch_bytes
        if batch:
            report.new += store.apply(batch)
            report.events += len(batch)
            report.runs.update(e.run_id for e in batch)
        store.set_spool_offset(name, scan.offset)
        batch, batch_bytes = [], 0

    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            for line in _lines(fh, scan, size, write_ahead=name.endswith(WAL_SUFFIX)):
                frame: protocol.Hello | protocol.Event | None = None
                if line.strip(b" \t\r\n"):
                    try:
                        frame = decode_line(line)
                    except protocol.ProtocolError as exc:
                        scan.skip(len(line), "NUL bytes" if not line.strip(b"\0\n") else str(exc)[:200])
                        continue
                scan.offset += len(line)
                if frame is not None and not isinstance(frame, protocol.Hello):
                    batch.append(frame)
                    batch_bytes += len(line)
                    last = frame
                    kept += 1
                    if len(batch) >= BATCH_EVENTS or batch_bytes >= BATCH_BYTES:
                        commit()
            commit()
    except OSError as exc:
        log.warning("mcpdebug: warning: cannot read the spool file %s (%s); it is left as it is", path, exc)
        return
    report.bad_lines += scan.bad_lines
    writer = (last.run_id, last.process) if last is not None else _writer(path)
    done = writer is None or store.process_done(*writer)
    if scan.end is not None:
        size = scan.end  # NULs after it: room the write-ahead copy had not used
    if scan.bad_bytes and (done or writer is None):
        _set_aside(store, path, scan, kept, report)
    elif done and writer is not None:
        if scan.offset < size:
            log.warning(
                "mcpdebug: warning: %s ended with an unfinished line (%d bytes: its process died while "
                "writing it); the events before it were kept",
                path,
                size - scan.offset,
            )
        path.unlink(missing_ok=True)
        store.set_spool_offset(name, None)
    elif scan.bad_bytes:
        log.warning(
            "mcpdebug: warning: %s: skipped %d damaged line(s) (%d bytes, first %s); the events around "
            "them were kept",
            path,
            scan.bad_lines,
            scan.bad_bytes,
            scan.first_bad,
        )


def read_events(
    path: Path, wanted: Callable[[bytes], bool] | None = None
) -> Iterator[tuple[list[protocol.Event], int]]:
    """Every event of a spool file of another store (an artifact, a shard's spool folder), in batches,
    each with the count of lines skipped as damaged so far; the file is only read (`mcpdebug merge`).
    ``wanted``: only the lines it takes are decoded (a first look for a few kinds of event)."""
    return read_decoded(path, decode_line, wanted)


def read_decoded(
    path: Path,
    decode: Callable[[bytes], Decoded | protocol.Hello],
    wanted: Callable[[bytes], bool] | None = None,
) -> Iterator[tuple[list[Decoded], int]]:
    """`read_events`, each line made what ``decode`` makes of it (it raises ProtocolError on a bad one):
    a first look may need less than whole events."""
    scan = _Scan(0)
    batch: list[Decoded] = []
    with open(path, "rb") as fh:
        for line in _lines(fh, scan, 0, write_ahead=path.name.endswith(WAL_SUFFIX)):
            scan.offset += len(line)
            if not line.strip(b" \t\r\n\0") or (wanted is not None and not wanted(line)):
                continue
            try:
                frame = decode(line)
            except protocol.ProtocolError:
                scan.bad_lines += 1
                continue
            if not isinstance(frame, protocol.Hello):
                batch.append(frame)
                if len(batch) >= BATCH_EVENTS:
                    yield batch, scan.bad_lines
                    batch = []
    yield batch, scan.bad_lines


def _set_aside(store: Store, path: Path, scan: _Scan, kept: int, report: SpoolReport) -> None:
    """Move a damaged file to ``spool/damaged/`` (it is read once, not at every look), and say so."""
    target = path.parent / DAMAGED_DIR / path.name
    try:
        target.parent.mkdir(exist_ok=True)
        os.replace(path, target)
        where = f"moved it to {target}; delete that file once you no longer need it"
    except OSError as exc:
        where = f"could not move it aside ({exc.strerror}), so it is read again at each look: delete it"
    else:
        store.set_spool_offset(path.name, None)
    message = (
        f"mcpdebug: warning: spool file {path.name} is damaged: skipped {scan.bad_lines} bad line(s), "
        f"{scan.bad_bytes:,} bytes (first {scan.first_bad}); kept its {kept:,} good event(s); {where}"
    )
    report.damaged.append(message)
    log.warning("%s", message)


def decode_line(line: bytes) -> protocol.Hello | protocol.Event:
    """A frame, or a quiet pass's short record (`protocol.quick`); a line whose start was overwritten
    with NULs (a crash on some file systems) may still hold a whole frame after them."""
    try:
        return protocol.decode_spooled_line(line)
    except protocol.ProtocolError:
        if not line.startswith(b"\0"):
            raise
    return protocol.decode_spooled_line(line.lstrip(b"\0"))


def _writer(path: Path) -> tuple[str, str] | None:
    """The (run, process) that wrote a spool file, from its first line."""
    if path.name.endswith(WAL_SUFFIX):  # named for its writer (an empty one has no first line)
        run_id, _, process = path.name.removesuffix(WAL_SUFFIX).rpartition(".")
        return (run_id, process) if run_id else None
    try:
        with open(path, "rb") as fh:
            frame = protocol.decode_spooled_line(fh.readline(READ_BYTES))
    except (OSError, protocol.ProtocolError):
        return None
    return None if isinstance(frame, protocol.Hello) else (frame.run_id, frame.process)
