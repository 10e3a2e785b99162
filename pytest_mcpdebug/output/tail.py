"""Live output: what a test writes reaches the server while the test runs.

pytest's fd capture sends fds 1 and 2 of the whole process (print, C code, subprocesses) to
temporary files and reads them only when a phase ends. A background thread reads the same files
every `TICK` seconds with ``pread`` (which does not move pytest's file position) and sends what
is new as numbered lines; the rest is taken at the end of each phase, where pytest reads and
empties the files: a quiet test costs no read of its own. The tail does pytest's capture call of each
phase itself (``item_capture``: a phase starts, and its end reads the files) and stands in front of
pytest's read (``read_global_capture``, which --pdb calls too), so it has no hook of its own per phase:
it tells the reporter when a test starts, and teardown's read ends the test (with ``-p no:capture``,
hooks tell it of phases and the reporter of a test's end). Log records come from a handler on the root
logger and warnings from ``pytest_warning_recorded``.

Output belongs to a *unit*: the test whose phase is running, or the process's own output outside
tests ("" — collection, session-scoped fixtures being set up, records logged between tests). Lines
are numbered per unit, in the unit's combined output and within their stream, so the server can
file each line without depending on arrival order.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_mcpdebug import forks
from pytest_mcpdebug.output.lines import Unit
from pytest_mcpdebug.output.reading import TICK_BYTES, Emit, OutputReader, WaitForRoom
from pytest_mcpdebug.output.records import RecordHandler, WarningWatch, pytest_log_level, warning_line
from pytest_mcpdebug.output.sources import FileSource, source
from pytest_mcpdebug.plugin_object import PluginObject, register

if TYPE_CHECKING:
    from pytest_mcpdebug.output.written import WriteWatch

# Timeouts
TICK: Final = 0.1
"""How often the sender thread looks for new output (`Sender.on_tick`) and sends or spools it in the
same wake-up: lines reach the kernel (socket or spool) within this, so a process killed mid-test
loses at most that much. A test is first looked at once it is a tick old (`Recorder._tick`): what a
younger one wrote is all within its last tick, and pytest's read takes it if the test ends first. A
remote worker reads as output is written instead (`written`), a test a quarter tick old or more."""


_CAPTURE_CALLS: Final = (
    "resume_global_capture",
    "activate_fixture",
    "deactivate_fixture",
    "suspend_global_capture",
    "read_global_capture",
)
"""What pytest's ``CaptureManager.item_capture`` calls, which `OutputTail.phase_starts` calls instead."""
_LAST_READS: Final = ("teardown", "fixture")
"""The phases whose read of pytest's files is the test's last: its teardown's, or the session fixtures'
teardown that the last test's teardown ran (`_session_teardown_begins`)."""


class OutputTail(OutputReader, PluginObject):
    """Registered as a plugin in every process that runs tests (not the xdist controller)."""

    def __init__(
        self, config: pytest.Config, *, emit: Emit, wait_for_room: WaitForRoom, worker: str, max_line: int
    ) -> None:
        super().__init__(emit=emit, wait_for_room=wait_for_room, worker=worker, max_line=max_line)
        self.config = config
        self._stopped = False
        self._warnings = WarningWatch(self._live_warning)
        self._pytest_read_capture: Callable[[], Any] | None = None
        """pytest's own ``read_global_capture``, while ours stands in front of it (and `phase_starts` does
        pytest's ``item_capture``)."""
        self._capturing: Any = None
        """pytest's capture manager while the tail does its ``item_capture`` (None: ``-p no:capture``)."""
        self._phase_item: tuple[str, pytest.Item, Any] | None = None
        """(when, item, capture manager) of the phase running now, for its end (`__exit__`)."""
        self._handler = RecordHandler(self)
        self._warnings_sent: set[int] = set()
        self._capman = config.pluginmanager.getplugin("capturemanager")
        self._attached_to: Any = None
        self._session_fixtures_unmarked = False
        self.on_begin: Callable[[str, tuple[str, int | None, str]], None] | None = None
        """Told when a test's set-up starts (the reporter's start of a test: no hook of its own)."""
        self.written: WriteWatch | None = None
        """Watches pytest's capture files for writes, where output is pushed at once (`written`)."""

    # Life cycle -----------------------------------------------------------------------------------

    @property
    def ends_tests(self) -> bool:
        """Whether the tail sees each test's end itself (it does pytest's capture of each phase): if not,
        the reporter tells it (`end_test`)."""
        return self._pytest_read_capture is not None

    def start(self) -> None:
        level = pytest_log_level(self.config)
        if level is not None:
            self._handler.setLevel(level)
        logging.getLogger().addHandler(self._handler)
        self._warnings.start()
        capman = self._capman
        if all(hasattr(capman, name) for name in _CAPTURE_CALLS):
            # Do pytest's per-phase capture and stand in front of its reads: no hook of our own per phase.
            self._capturing, self._pytest_read_capture = capman, capman.read_global_capture
            capman.item_capture, capman.read_global_capture = self.phase_starts, self._read_capture
        else:  # -p no:capture: nothing to read, but records and warnings still need their phase
            register(self.config, PhaseHooks(self), PhaseHooks.NAME)
        forks.in_child(self, self._forget_in_child)

    def _forget_in_child(self) -> None:
        """In a child a test forked: logging, warnings and pytest's capture as they were (`forks`).
        What the child logs or warns must not come here: it would wait for a lock that the parent's
        sender thread may have held at the fork, for ever."""
        logging.getLogger().removeHandler(self._handler)
        self._warnings.stop()
        if self._pytest_read_capture is not None:
            for name in ("item_capture", "read_global_capture"):
                with contextlib.suppress(AttributeError):
                    delattr(self._capman, name)

    def stop(self) -> None:
        forks.forget(self)
        logging.getLogger().removeHandler(self._handler)
        self._warnings.stop()
        with self._lock:
            self._stopped = True
            self._send_records()
            if self._pytest_read_capture is not None:
                for name in ("item_capture", "read_global_capture"):
                    with contextlib.suppress(AttributeError):
                        delattr(self._capman, name)
                self._capturing = self._pytest_read_capture = None
        phases = self.config.pluginmanager.get_plugin(PhaseHooks.NAME)
        if phases is not None:
            self.config.pluginmanager.unregister(name=PhaseHooks.NAME)

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

    def end_test(self) -> None:
        """From the reporter, at the test's last report, where pytest's capture plugin is off (``-p
        no:capture``; else teardown's read of pytest's files ends it, `_read_capture`)."""
        with self._lock:
            self._unit, self._phase, self._tailing = self._units[""], "", False
            if self._records:
                self._send_records()

    def phase_starts(self, when: str, item: pytest.Item) -> OutputTail:
        """``item``'s phase ``when`` starts: pytest's ``item_capture(when, item)`` done here (its capture
        resumed; the tail is the context whose end, `__exit__`, ends it), or told by `PhaseHooks`. At
        set-up, what is written from now on is ``item``'s (`on_begin` is told first). Three times a
        test, so in as few frames as can be: pytest's own ``item_capture`` (a generator's context
        manager) and a stand-in in front of it cost a test ~9 calls more."""
        if when == "setup":
            nodeid = item.nodeid  # built anew at each read (pytest 9): read once a test
            if self.on_begin is not None:
                self.on_begin(nodeid, item.location)
            with self._lock:
                if getattr(self._capman, "_global_capturing", None) is not self._attached_to:
                    self._attach()
                if self._records:  # filed under the unit they were logged in, before it is reused
                    self._send_records()
                unit = self._units.get(nodeid)
                if unit is None:  # numbered and kept (`_send`) once it has lines: a quiet test leaves none
                    unit = self._blank
                    unit.nodeid = nodeid
                self._unit, self._phase, self._tailing = unit, "setup", True
        else:
            self._phase = when
            if when == "teardown" and self._session_fixtures_unmarked:
                self._mark_session_teardown(item)
        capman = self._capturing
        if capman is not None:
            self._phase_item = (when, item, capman)
            capman.resume_global_capture()
            capman.activate_fixture()
        return self

    def __enter__(self) -> None:
        """The phase runs (`phase_starts` did what pytest's ``item_capture`` does on entering)."""

    def __exit__(self, *exc_info: object) -> None:
        """The phase ends, as pytest's ``item_capture`` ends it: its capture suspended, its files read
        (our `_read_capture`, standing in: teardown's read ends the test; pytest's own if the tail was
        stopped during the phase) and what they held added to the report."""
        phase = self._phase_item
        if phase is None:
            return
        when, item, capman = phase
        capman.deactivate_fixture()
        capman.suspend_global_capture(in_=False)
        out, err = capman.read_global_capture()
        item.add_report_section(when, "stdout", out)
        item.add_report_section(when, "stderr", err)

    def _mark_session_teardown(self, item: pytest.Item) -> None:
        """Runs first when the session is torn down (finalizers run last-in, first-out), i.e. after this
        test's own fixtures and before every session fixture set up so far."""
        with contextlib.suppress(Exception):  # the session not being set up is no reason to fail
            item.session.addfinalizer(self._session_teardown_begins)
            self._session_fixtures_unmarked = False

    def _attach(self) -> None:
        """Find pytest's capture files (once per capture object: pytest keeps one per session)."""
        capturing = getattr(self._capman, "_global_capturing", None)
        if capturing is self._attached_to:
            return
        self._attached_to = capturing
        for stream in self._streams:
            stream.source = source(getattr(capturing, "out" if stream.name == "stdout" else "err", None))
            if self.written is not None and type(stream.source) is FileSource:
                self.written.watch(stream.source.fd)

    def _read_capture(self) -> Any:
        """pytest's ``read_global_capture``: pytest reads and empties its files there (at the end of
        each phase, or when --pdb shows the output), so that is where the rest of the running unit's
        output is taken. A phase of which nothing was read yet (the usual short test) costs no read
        of its own: its text is the one pytest just read. Teardown's read ends the test (what `end_test`
        does: no call of its own at each test's end); so does the last test's, whose teardown ran
        the session fixtures' (phase "fixture", the process's unit)."""
        with self._lock:
            if self._partial or self._records:
                result = self._read_rest()
            else:
                result = self._pytest_read_capture()  # type: ignore[misc]  # set while we stand in
                if result[0] or result[1]:
                    self._send_read(result)
            if self._phase in _LAST_READS:
                self._unit, self._phase, self._tailing = self._units[""], "", False
            return result

    def _read_rest(self) -> Any:
        """Some of the phase's output was read already: read the rest before pytest empties its files.
        Lock held."""
        self._read(None)
        self._flush_lines()
        result = self._pytest_read_capture()  # type: ignore[misc]
        for stream in self._streams:
            stream.offset = 0
        self._partial = False
        return result

    def _send_read(self, result: Any) -> None:
        """What pytest just read of a phase none of whose output was read before. Lock held."""
        now = time.time()
        for stream, text in zip(self._streams, (result[0], result[1]), strict=True):
            if text:
                block, count = stream.splitter.feed(str(text).encode("utf-8", "replace"))
                if count:
                    self._send(self._unit, self._phase, stream.name, block, now, count)
                self._flush_stream(stream)

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
        """Read the rest of what ran (pytest's read of its files, if it comes next, finds it read)."""
        with self._lock:
            self._read(None)
            self._flush_lines()
            self._unit, self._phase, self._tailing = previous

    def _tail_phase(self, nodeid: str, phase: str) -> Generator[None, Any, Any]:
        """The body of a wrapper hook: tail the output of what runs at the ``yield``."""
        previous = self._begin(nodeid, phase)
        try:
            return (yield)
        finally:
            self._end(previous)

    def _session_teardown_begins(self) -> None:
        """From here on, the last test's teardown phase runs the session's fixtures' teardown."""
        with self._lock:
            if self._tailing and self._unit.nodeid:
                self._read(None)
                self._flush_lines()
                self._unit, self._phase = self._units[""], "fixture"

    def _live_warning(self, message: Any) -> None:
        """A warning as it is issued (pytest reports it only after the test), in its place in the output.
        Outside a test or a collection, `pytest_warning_recorded` says when it was (config, collect)."""
        if not self._tailing:
            return
        with self._lock:
            self._read(TICK_BYTES)
            self._send(self._unit, self._phase, "warnings", warning_line(message), time.time())
            self._warnings_sent.add(id(message))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """What collecting writes (test modules being imported) is the run's own, phase "collect": one
        wrapper for the whole collection (pytest's read of its files after each module takes the text)."""
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


class PhaseHooks:
    """Without pytest's capture plugin (``-p no:capture``) there is no capture call to stand in front
    of: the phases are seen through hooks instead."""

    NAME = "mcpdebug-output-phases"

    def __init__(self, tail: OutputTail) -> None:
        self.tail = tail

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.tail.phase_starts("setup", item)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.tail.phase_starts("call", item)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self.tail.phase_starts("teardown", item)
