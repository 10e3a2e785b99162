"""Live output: what a test writes reaches the server while the test runs.

pytest's fd capture sends fds 1 and 2 of the whole process (print, C code, subprocesses) to
temporary files and reads them only when a phase ends. A background thread reads the same files
every `TICK` seconds with ``pread`` (which does not move pytest's file position) and sends what
is new as numbered lines; the rest is taken at the end of each phase, where pytest reads and
empties the files (its ``snap``, which we wrap): a quiet test costs no read of its own. Which test
and phase are running is told by the reporter's hooks and three one-line phase hooks. Log records
come from a handler on the root logger and warnings from ``pytest_warning_recorded``.

Output belongs to a *unit*: the test whose phase is running, or the process's own output outside
tests ("" — collection, session-scoped fixtures being set up, records logged between tests). Lines
are numbered per unit, in the unit's combined output and within their stream, so the server can
file each line without depending on arrival order.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, Final

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.output.lines import Stream, Unit, cut_long_lines
from pytest_mcpdebug.output.records import RecordHandler, WarningWatch, pytest_log_level, warning_line
from pytest_mcpdebug.output.sources import source

# Timeouts
TICK: Final = 0.1
"""How often the sender thread looks for new output (`Sender.on_tick`) and sends or spools it in the
same wake-up: lines reach the kernel (socket or spool) within this, so a process killed mid-test
loses at most that much."""
# Limits
READ_BYTES: Final = 1024 * 1024
"""Largest read, and so the largest event's text (plus one held-back line)."""
RECENT_BLOCKS: Final = 20
RECENT_BYTES: Final = 4096
"""What is kept of the last blocks sent, for a hang report's output tail."""
TICK_BYTES: Final = 16 * READ_BYTES
"""Most a tick reads per stream; a test writing faster is caught up at the next ticks (the data waits
in pytest's file on disk, not in memory)."""

Emit = Callable[..., None]
"""``emit(event_type, **fields)``: numbers and queues one event (`Reporter.emit`)."""
WaitForRoom = Callable[[], None]
"""Blocks while the sender holds too much unsent output (`Sender.wait_for_room`)."""


class OutputTail:
    """Registered as a plugin in every process that runs tests (not the xdist controller)."""

    def __init__(
        self, config: pytest.Config, *, emit: Emit, wait_for_room: WaitForRoom, worker: str, max_line: int
    ) -> None:
        self.config = config
        self.emit = emit
        self.wait_for_room = wait_for_room
        self.worker = worker
        self.max_line = max_line
        self._lock = threading.RLock()  # re-entrant: a warning can be issued while we hold it
        self._units: dict[str, Unit] = {"": Unit("")}
        self._unit = self._units[""]
        self._phase = ""
        self._streams = (Stream("stdout", max_line), Stream("stderr", max_line))
        self._tailing = False
        self._stopped = False
        self._warnings = WarningWatch(self._live_warning)
        self._watching = False
        self._pytest_capture: tuple[Callable[..., Any], Callable[[], Any]] | None = None
        """pytest's own ``item_capture`` and ``read_global_capture``, while ours stand in front of them."""
        self._partial = False
        """Some of the running unit's output was read already (the files' offsets are not 0)."""
        self._records: collections.deque[tuple[Unit, str, float, str]] = collections.deque()
        self._handler = RecordHandler(self)
        self._warnings_sent: set[int] = set()
        self._capman = config.pluginmanager.getplugin("capturemanager")
        self._attached_to: Any = None
        self._session_fixtures_unmarked = False
        self._recent: collections.deque[tuple[Unit, str, bytes]] = collections.deque(maxlen=RECENT_BLOCKS)
        self.lost_bytes = 0

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

    # Life cycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        level = pytest_log_level(self.config)
        if level is not None:
            self._handler.setLevel(level)
        logging.getLogger().addHandler(self._handler)
        capman = self._capman
        if hasattr(capman, "item_capture") and hasattr(capman, "read_global_capture"):
            # Stand in front of pytest's per-phase capture calls: no hook of our own runs per phase.
            self._pytest_capture = (capman.item_capture, capman.read_global_capture)
            capman.item_capture, capman.read_global_capture = self._item_capture, self._read_capture
        else:  # -p no:capture: nothing to read, but records and warnings still need their phase
            self.config.pluginmanager.register(PhaseHooks(self), PhaseHooks.NAME)

    def stop(self) -> None:
        logging.getLogger().removeHandler(self._handler)
        with self._lock:
            self._stopped = True
            self._send_records()
            if self._pytest_capture is not None:
                for name in ("item_capture", "read_global_capture"):
                    with contextlib.suppress(AttributeError):
                        delattr(self._capman, name)
                self._pytest_capture = None
        phases = self.config.pluginmanager.get_plugin(PhaseHooks.NAME)
        if phases is not None:
            self.config.pluginmanager.unregister(phases, PhaseHooks.NAME)

    def tick(self) -> None:
        """From the sender thread every `TICK` (`Sender.on_tick`), just before it sends: what the
        running test wrote since the last look. It never waits: not for room (its own batch makes
        it), nor for the lock (the test thread, reading itself, may be waiting for that batch)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._stopped:
                return
            if self._tailing:
                self._read(TICK_BYTES, wait=False)
            elif self._records:
                self._send_records()
        finally:
            self._lock.release()

    # Tests: pytest's capture of each phase, wrapped --------------------------------------------------

    def begin_test(self, nodeid: str) -> None:
        """What is written from now on is ``nodeid``'s set-up."""
        with self._lock:
            self._attach()
            unit = self._units.get(nodeid)
            if unit is None:
                unit = self._units[nodeid] = Unit(nodeid)
            self._unit, self._phase, self._tailing = unit, "setup", True
        self._watching = self._warnings.start()

    def end_test(self) -> None:
        """From `pytest_runtest_logfinish`: the test's output was taken when pytest read its files."""
        if self._watching:
            self._warnings.stop()
            self._watching = False
        with self._lock:
            self._unit, self._phase, self._tailing = self._units[""], "", False
            if self._records:
                self._send_records()

    def phase(self, item: pytest.Item, when: str) -> None:
        """``item``'s phase ``when`` starts."""
        if when == "setup":
            self.begin_test(item.nodeid)
        else:
            self._phase = when
        if when == "teardown" and self._session_fixtures_unmarked:
            # Runs first when the session is torn down (finalizers run last-in, first-out), i.e.
            # after this test's own fixtures and before every session fixture set up so far.
            with contextlib.suppress(Exception):  # the session not being set up is no reason to fail
                item.session.addfinalizer(self._session_teardown_begins)
                self._session_fixtures_unmarked = False

    def _item_capture(self, when: str, item: pytest.Item) -> Any:
        """pytest's ``item_capture(when, item)``, which runs each phase of each test."""
        self.phase(item, when)
        assert self._pytest_capture is not None
        return self._pytest_capture[0](when, item)

    def _attach(self) -> None:
        """Find pytest's capture files (once per capture object: pytest keeps one per session)."""
        capturing = getattr(self._capman, "_global_capturing", None)
        if capturing is self._attached_to:
            return
        self._attached_to = capturing
        for stream in self._streams:
            stream.source = source(getattr(capturing, "out" if stream.name == "stdout" else "err", None))

    def _read_capture(self) -> Any:
        """pytest's ``read_global_capture``: pytest reads and empties its files there (at the end of
        each phase, or when --pdb shows the output), so that is where the rest of the running unit's
        output is taken. A phase of which nothing was read yet (the usual short test) costs no read
        of its own: its text is the one pytest just read."""
        assert self._pytest_capture is not None
        read = self._pytest_capture[1]
        with self._lock:
            if self._partial or self._records:
                self._read(None)
                self._flush_lines()
                result = read()
                for stream in self._streams:
                    stream.offset = 0
                self._partial = False
                return result
            result = read()
            if result[0] or result[1]:
                now = time.time()
                for stream, text in zip(self._streams, (result[0], result[1]), strict=True):
                    if text:
                        block, count = stream.splitter.feed(str(text).encode("utf-8", "replace"))
                        if count:
                            self._send(self._unit, self._phase, stream.name, block, now, count)
                        self._flush_stream(stream)
            return result

    # Collection and session fixtures: wrappers around what they run --------------------------------

    def _begin(self, nodeid: str, phase: str) -> tuple[Unit, str, bool]:
        """Start reading pytest's capture for ``nodeid``'s phase; returns what to restore after."""
        with self._lock:
            previous = (self._unit, self._phase, self._tailing)
            if self._tailing:
                self._read(None)
                self._flush_lines()
            else:
                self._attach()
            unit = self._units.get(nodeid)
            if unit is None:
                unit = self._units[nodeid] = Unit(nodeid)
            self._unit, self._phase, self._tailing = unit, phase, True
            return previous

    def _end(self, previous: tuple[Unit, str, bool]) -> None:
        """Read the rest of what ran (pytest's ``snap``, if it comes next, finds it read)."""
        with self._lock:
            self._read(None)
            self._flush_lines()
            self._unit, self._phase, self._tailing = previous

    def _tail_phase(self, nodeid: str, phase: str) -> Generator[None, Any, Any]:
        """The body of a wrapper hook: tail the output of what runs at the ``yield``."""
        previous = self._begin(nodeid, phase)
        watching = self._warnings.start()
        try:
            return (yield)
        finally:
            self._warnings.stop(watching)
            self._end(previous)

    def _session_teardown_begins(self) -> None:
        """From here on, the last test's teardown phase runs the session's fixtures' teardown."""
        with self._lock:
            if self._tailing and self._unit.nodeid:
                self._read(None)
                self._flush_lines()
                self._unit, self._phase = self._units[""], "fixture"

    def _live_warning(self, message: Any) -> None:
        """A warning as it is issued (pytest reports it only after the test), in its place in the output."""
        with self._lock:
            if self._tailing:
                self._read(TICK_BYTES)
            self._send(self._unit, self._phase, "warnings", warning_line(message), time.time())
            self._warnings_sent.add(id(message))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        if not isinstance(collector, pytest.File):
            return (yield)
        return (yield from self._tail_phase("", "collect"))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, Any]:
        """A session-scoped fixture's set-up output is the run's, not the first test's that needs it."""
        if fixturedef.scope != "session":
            return (yield)
        self._session_fixtures_unmarked = True
        if not self._tailing:
            return (yield)
        return (yield from self._tail_phase("", "fixture"))

    def pytest_warning_recorded(self, warning_message: Any, when: str, nodeid: str, location: Any) -> None:
        """Warnings not seen as they were issued (at collection, or with no phase running)."""
        with self._lock:
            if id(warning_message) in self._warnings_sent:
                self._warnings_sent.discard(id(warning_message))
                return
            unit = self._units.get(nodeid) or self._units.setdefault(nodeid, Unit(nodeid))
            self._send_records()
            self._send(unit, when, "warnings", warning_line(warning_message), time.time())

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
                        self.lost_bytes += stream.offset - size
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


class PhaseHooks:
    """Without pytest's capture plugin (``-p no:capture``) there is no capture call to stand in front
    of: the phases are seen through hooks instead."""

    NAME = "mcpdebug-output-phases"

    def __init__(self, tail: OutputTail) -> None:
        self.tail = tail

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.tail.phase(item, "setup")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.tail.phase(item, "call")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self.tail.phase(item, "teardown")
