"""Reading pytest's capture files into numbered lines of output, for `tail.OutputTail`.

What a unit (a test, or the process outside tests) wrote is read from where the last read stopped
(``pread``: pytest's file position stays where it was), cut into whole lines (`lines`), numbered per
unit, in its combined output and within its stream, and sent as `protocol.Output` events. Log records
are queued by the handler and sent in their place among the lines. `tail.OutputTail` decides *when*
(pytest's phases, the sender thread's tick); this decides *what*.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.output.lines import Stream, Unit, cut_long_lines

# Limits
READ_BYTES: Final = 1024 * 1024
"""Largest read, and so the largest event's text (plus one held-back line)."""
TICK_BYTES: Final = 16 * READ_BYTES
"""Most a tick reads per stream; a test writing faster is caught up at the next ticks (the data waits
in pytest's file on disk, not in memory)."""
RECENT_BLOCKS: Final = 20
RECENT_BYTES: Final = 4096
"""What is kept of the last blocks sent, for a hang report's output tail."""

Emit = Callable[..., None]
"""``emit(event_type, **fields)``: numbers and queues one event (`Reporter.emit`)."""
WaitForRoom = Callable[[], None]
"""Blocks while the sender holds too much unsent output (`Sender.wait_for_room`)."""


class OutputReader:
    def __init__(self, *, emit: Emit, wait_for_room: WaitForRoom, worker: str, max_line: int) -> None:
        self.emit = emit
        self.wait_for_room = wait_for_room
        self.worker = worker
        self.max_line = max_line
        self._lock = threading.RLock()  # re-entrant: a warning can be issued while we hold it
        self._units: dict[str, Unit] = {"": Unit("")}
        """The units that have lines (numbered on from there if a test runs again), and the process's."""
        self._unit = self._units[""]
        self._blank = Unit("")
        """The unit of the running test while it has no lines (a quiet test's, then the next one's): kept
        in `_units`, and replaced by a new blank one, once it has."""
        self._phase = ""
        self._streams = (Stream("stdout", max_line), Stream("stderr", max_line))
        self._tailing = False
        """A unit's output is being written to pytest's files now (the tick may read them)."""
        self._partial = False
        """Some of the running unit's output was read already (the files' offsets are not 0)."""
        self._records: collections.deque[tuple[Unit, str, float, str]] = collections.deque()
        self._recent: collections.deque[tuple[Unit, str, bytes]] = collections.deque(maxlen=RECENT_BLOCKS)
        self.emptied = 0
        """Times another reader than pytest's own read emptied its capture file (e.g. --pdb): what it
        held past what was already read is not recorded."""

    def recent(self, count: int = 20) -> list[str]:
        """The last lines the running test wrote (read now), for a hang report."""
        with self._lock:
            if self._tailing:
                self._read(READ_BYTES)
            unit = self._unit
            lines: list[str] = []
            for owner, stream, block in reversed(self._recent):
                if owner is not unit:
                    break
                tag = "" if stream == "stdout" else f"[{stream}] "
                text = block.decode("utf-8", "replace").split("\n")
                lines[:0] = [tag + line[:500] for line in text[-count:]]
                if len(lines) >= count:
                    break
            return lines[-count:]

    # Reading --------------------------------------------------------------------------------------

    def _read(self, budget: int | None, *, wait: bool = True) -> None:
        """Send what is new in pytest's files (everything, if ``budget`` is None). Lock held."""
        if self._records:
            self._send_records()
        for stream in self._streams:
            self._read_stream(stream, budget, wait=wait)

    def _read_stream(self, stream: Stream, budget: int | None, *, wait: bool = True) -> None:
        """A stream that wrote nothing costs one empty ``pread``: no ``fstat``, no clock."""
        source = stream.source
        if source is None:
            return
        try:
            left = -1 if budget is None else budget  # -1: up to where the file ends now
            while left:
                want = READ_BYTES if left < 0 else min(left, READ_BYTES)
                data = source.read(stream.offset, want)
                if not data:
                    size = source.size() if stream.offset else 0
                    if size < stream.offset:  # emptied by someone else than pytest's snap
                        self.emptied += 1
                        stream.offset = 0
                        continue
                    break
                if left < 0 and len(data) == want:  # a lot waits: stop where it ends now
                    left = max(source.size() - stream.offset, len(data))
                if wait:
                    self.wait_for_room()
                stream.offset += len(data)
                self._partial = True
                if left > 0:
                    left -= len(data)
                block, count = stream.splitter.feed(data)
                if count:
                    self._send(self._unit, self._phase, stream.name, block, time.time(), count)
                if len(data) < want:
                    break
        except (OSError, ValueError):
            stream.source = None  # pytest closed its file (session over): nothing more to read

    def _flush_lines(self) -> None:
        """The unfinished last line of each stream ends with its phase."""
        for stream in self._streams:
            self._flush_stream(stream)

    def _flush_stream(self, stream: Stream) -> None:
        if stream.splitter.holding:
            line, count = stream.splitter.flush()
            if count:
                self._send(self._unit, self._phase, stream.name, line, time.time(), count)

    def _send_records(self) -> None:
        """Queued log records, as runs of consecutive records of one unit and phase."""
        records = self._records
        while records:
            unit, phase, _, _ = records[0]
            texts: list[str] = []
            times: list[float] = []
            while records and records[0][0] is unit and records[0][1] == phase:
                _, _, ts, text = records.popleft()
                for line in text.split("\n"):
                    texts.append(line)
                    times.append(ts)
            block = cut_long_lines("\n".join(texts).encode("utf-8", "replace"), self.max_line)
            self._send(unit, phase, "log", block, times[0], len(texts), times)

    def _send(
        self,
        unit: Unit,
        phase: str,
        stream: str,
        block: bytes,
        ts: float,
        count: int | None = None,
        times: list[float] | None = None,
    ) -> None:
        if count is None:
            count = block.count(b"\n") + 1
        if not unit.lines:  # its first lines: numbered from here on, a rerun's continue after them
            self._units.setdefault(unit.nodeid, unit)
            if unit is self._blank:
                self._blank = Unit("")
        stream_lines = unit.streams.get(stream, 0)
        self.emit(
            protocol.Output,
            ts=ts,
            nodeid=unit.nodeid,
            worker=self.worker,
            phase=phase,
            stream=stream,
            first=unit.lines + 1,
            stream_first=stream_lines + 1,
            count=count,
            data=block,  # bytes as read: decoded (for JSON) only if it is spooled
            times=times if times and times[0] != times[-1] else None,
        )
        unit.lines += count
        unit.streams[stream] = stream_lines + count
        self._recent.append((unit, stream, block[-RECENT_BYTES:]))

    def record(self, record: logging.LogRecord) -> None:
        """From the log handler, in whichever thread logged: queue it for the next read.

        If the test printed since the last read, that is read first, so a record is numbered after
        the lines written before it: the combined output keeps execution order. (Between stdout and
        stderr the order within one read is unknown: they are separate files.)
        """
        text = f"{record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[0] is not None:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + record.exc_text
        if self._tailing and self._fd_output_waiting():
            with self._lock:
                if self._tailing:
                    self._read(TICK_BYTES)
        self._records.append((self._unit, self._phase, record.created, text))

    def _fd_output_waiting(self) -> bool:
        for stream in self._streams:
            source = stream.source
            if source is not None:
                try:
                    if source.size() != stream.offset:
                        return True
                except (OSError, ValueError):
                    return False
        return False
