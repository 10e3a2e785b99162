"""Turns pytest's hooks into protocol events.

Who sends what: a plain run's only process sends everything. Under pytest-xdist the controller sends
the run's start, collection and finish, and each worker sends the events of the tests it runs (test
start before the test runs, each phase, the final outcome), so every test is recorded once, by the
process that ran it, and attributed to its worker.
"""

from __future__ import annotations

import math
import os
import platform
import shlex
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.plugin_object import PluginObject
from pytest_mcpdebug.protocol import plain
from pytest_mcpdebug.quiet_import import own_modules
from pytest_mcpdebug.recording.messages import message_of, redact_text
from pytest_mcpdebug.recording.sender import Sender

if TYPE_CHECKING:
    from pytest_mcpdebug.hangs.gil_dump import DumpFile
    from pytest_mcpdebug.output.tail import OutputTail
    from pytest_mcpdebug.recording.brief import Brief

Role = Literal["main", "controller", "worker"]
Passed = tuple[str, float, float]
"""(when, duration, finished) of a phase of the running test that passed quietly (no event of its own)."""
Phase = tuple[str, str, bool, float, str]
"""(when, outcome, was an xfail, duration, message) of a phase of the running test sent as an event."""
Location = tuple[str, "int | None", str]
"""pytest's ``item.location``: (file, 0-based line, domain)."""


class Reporter(PluginObject):
    def __init__(
        self, *, sender: Sender, run_id: str, process: str, worker: str, role: Role, shard: str = ""
    ) -> None:
        self.sender = sender
        self.shard = shard
        """This process's shard of a run recorded in parts ("" for none): said in the run's start."""
        self.run_id = run_id
        self.process = process
        self.worker = worker
        self.role = role
        self._seq = 0
        self._lock = threading.Lock()
        self.started = time.time()
        """When the run started (handed on to a process that replaces this one)."""
        self.collected_before = 0
        """Tests a replaced process ran, left out of this one's collection but not of the run's."""
        self._tests: dict[Location, tuple[list[Passed], list[Phase]]] = {}
        """The phases so far of each test not yet finished (one at a time, but for a report out of turn),
        by its location: the same tuple in all of an item's reports, where ``report.nodeid`` builds a
        string each time it is read (pytest 9)."""
        self._collected_sent = False
        self.tests_recorded = 0
        self.current: str | None = None
        """The test running now, for a report when the run is stopped from outside."""
        self.location: Location | None = None
        self.dump: DumpFile | None = None
        """The crash dump file whose header names the running test (`hangs.gil_dump`), if any."""
        self.tail: OutputTail | None = None
        """The output tail, told here when a test ends if it cannot see that itself (`OutputTail.ends_tests`:
        it learns of phases from pytest's capture calls)."""
        self.brief: Brief | None = None
        """What a failure adds to pytest's own output (`brief`): told of each snapshot."""
        self.report_listeners: list[Callable[[pytest.TestReport], None]] = []
        """Told of each report of this process's tests (the hang machinery's): a call from here costs a
        fraction of a hook implementation of their own, which pluggy dispatches for every report."""
        self._running: tuple[str, Location, float] | None = None
        """(nodeid, location, start time) of the test running now, until its `TestFinished`."""
        self._announced: tuple[str, Location, float] | None = None
        self.quick_line: plain.QuickLine = plain.quick_line
        """Encodes a quiet pass's short record: `plain`'s at first; msgspec's (`use_msgspec`) where a
        connection's handshake loaded it, or once the run is a tick old (`use_msgspec_soon`), which
        repays its import in a few hundred tests, and a run over sooner never pays it."""

    def use_msgspec(self) -> None:
        """Encode quiet passes' records with msgspec from now on (loading it now: for the test thread)."""
        if self.quick_line == plain.quick_line or self.quick_line == self._load_msgspec:
            self.quick_line = plain.msgspec_quick_line()

    def use_msgspec_soon(self) -> None:
        """`use_msgspec` at the next quiet pass, in the test thread: for the sender thread. An import in
        another thread hands the GIL to and fro at each of its ~60 file system calls (a 2,000-test run's
        test thread waited 9.3 ms, against 3.8 ms and the import's own 3.5 ms here: see
        `benchmarks/notes/overhead.md`)."""
        if self.quick_line == plain.quick_line:
            self.quick_line = self._load_msgspec

    def _load_msgspec(self, record: plain.QuickRecord) -> bytes:
        """`quick_line` for one record, loading msgspec for the next ones (`use_msgspec_soon`)."""
        try:
            with own_modules():  # its definitions would set off a full collection here, mid-run
                self.quick_line = plain.msgspec_quick_line()
        except Exception:  # msgspec unusable: the standard library's encoding serves as well
            self.quick_line = plain.quick_line
        return self.quick_line(record)

    def emit(self, event_type: type[protocol.Event], **fields: Any) -> None:
        """Number and queue an event; safe from any thread (output is sent from a background one).

        Numbering and queueing happen under one lock so events are queued in ``seq`` order, which
        the server's acknowledgements rely on.
        """
        fields.setdefault("ts", time.time())
        with self._lock:
            self._seq += 1
            self.sender.send(event_type(run_id=self.run_id, process=self.process, seq=self._seq, **fields))

    def emit_plain(self, tag: str, **fields: Any) -> None:
        """`emit` of one of `plain`'s events (``tag``: its wire type), encoded at once without msgspec."""
        ts = fields.pop("ts", None) or time.time()
        with self._lock:
            self._seq += 1
            seq = self._seq
            line = plain.event_line(tag, self.run_id, self.process, seq, ts, fields)
            self.sender.send(plain.Encoded(seq, line))

    def emit_start(self, config: pytest.Config, workers: int) -> None:
        if self.role != "worker":
            args = _shown_args([str(a) for a in config.invocation_params.args])
            self.emit_plain(
                "run_started",
                args=args,
                rootdir=str(config.rootpath),
                cwd=str(config.invocation_params.dir),
                python=platform.python_version(),
                pytest_version=pytest.__version__,
                plugin_version=_plugin_version(),
                host=socket.gethostname(),
                pid=os.getpid(),
                label=shlex.join(["pytest", *args]),  # as pasted into a shell: `-k 'not slow'`
                workers=workers,
                **({"shard": self.shard} if self.shard else {}),
            )
        self.emit_plain("process_started", worker=self.worker, pid=os.getpid(), host=socket.gethostname())

    # Collection -----------------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.role == "main":
            self.emit_plain("collection_finished", count=len(session.items) + self.collected_before)
        self.sender.checkpoint()  # the run is on disk before its first test can kill the process

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.role == "controller" and not self._collected_sent:
            self._collected_sent = True
            self.emit_plain("collection_finished", count=len(ids))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped and self.role != "worker":
            # A module skipped as a whole (``pytest.skip(allow_module_level=True)``, a failed
            # ``importorskip``): pytest's summary counts it as one skipped test, and so does the record.
            # Under xdist the controller is told once, whichever workers skipped it.
            longrepr = report.longrepr
            where = longrepr if isinstance(longrepr, tuple) and len(longrepr) == 3 else None
            self.emit_plain(
                "test_finished",
                nodeid=report.nodeid,
                worker=self.worker,
                outcome="skipped",
                duration=0.0,
                message=message_of(report),
                file=str(where[0]) if where else report.nodeid.split("::")[0],
                line=int(where[1]) + 1 if where and isinstance(where[1], int) else None,
            )
        if report.failed and self.role != "worker":
            text = str(report.longrepr)
            self.emit(
                protocol.CollectionError,
                nodeid=report.nodeid,
                message=message_of(report),
                longrepr=redact_text(protocol.clip(text)),
            )

    # Tests ----------------------------------------------------------------------------------------

    def begin(self, nodeid: str, location: Location) -> None:
        """A test's set-up starts: told by the output tail, which stands in front of pytest's capture
        of each phase, so no hook of the reporter's own runs per test but the reports'."""
        self.current, self.location = nodeid, location
        self._running = (nodeid, location, time.time())
        dump = self.dump
        if dump is not None:
            try:
                dump.set_test(nodeid)  # a crash's dump, or a vanished process's file, says whose
            except (OSError, ValueError):
                self.dump = None

    def younger_than(self, age: float) -> float | None:
        """Seconds until the running test is ``age`` old; None if it is, if no test runs, or if the
        clock was set back since it started (it is then looked at as an old one)."""
        running = self._running
        if running is None:
            return None
        left = running[2] + age - time.time()
        return left if 0 < left <= age else None

    def announce(self) -> None:
        """`TestStarted` of the running test, once: from the sender thread's tick when the test runs
        longer than a tick, or before anything but its quiet end. A quick passing test costs one
        event, its `TestFinished`, which carries where it is; a process killed mid-test is
        attributed from the dump file's header (`hangs.gil_dump`), written at each test's start."""
        running = self._running
        if running is None or running is self._announced:
            return
        with self._lock:
            if self._running is not running or self._announced is running:
                return
            self._announced = running
            nodeid, location, started = running
            self._seq += 1
            fields = {
                "nodeid": nodeid,
                "worker": self.worker,
                "file": location[0],
                "line": None if location[1] is None else location[1] + 1,
            }
            line = plain.event_line("test_started", self.run_id, self.process, self._seq, started, fields)
            self.sender.send(plain.Encoded(self._seq, line))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Each phase's report. A quiet pass's (most of them) is only noted, the test's one event made
        at its teardown: this runs three times a test, on code and data pytest's own work left cold."""
        if self.role == "controller":
            return
        for listener in self.report_listeners:
            listener(report)
        location = report.location
        test = self._tests.get(location)
        if test is None:
            test = self._tests[location] = ([], [])
        when = report.when or "call"
        if report.outcome == "passed" and getattr(report, "wasxfail", None) is None:
            finished = getattr(report, "stop", 0) or time.time()  # when the phase's call returned
            test[0].append((when, report.duration, finished))
        else:
            self._phase_finished(report, when, test[1])
        if when == "teardown":
            self._test_finished(report, location, *test)

    def outcomes(self, nodeid: str) -> list[tuple[str, str, bool]]:
        """(when, outcome, was an xfail) of each phase reported so far of ``nodeid``, the running test."""
        running = self._running
        location = running[1] if running is not None and running[0] == nodeid else None
        passed, phases = self._tests.get(location, ([], [])) if location is not None else ([], [])
        return _outcomes(passed, phases)

    def _phase_finished(self, report: pytest.TestReport, when: str, phases: list[Phase]) -> None:
        self.announce()
        outcome = report.outcome
        wasxfail = getattr(report, "wasxfail", None)
        message = message_of(report)
        self.emit_plain(
            "phase_finished",
            nodeid=report.nodeid,
            worker=self.worker,
            when=when,
            outcome=outcome,
            duration=report.duration,
            message=message,
            longrepr=redact_text(protocol.clip(str(report.longrepr)))
            if outcome in ("failed", "rerun")
            else "",
            wasxfail=wasxfail,
        )
        phases.append((when, outcome, wasxfail is not None, report.duration, message))

    def _test_finished(
        self, report: pytest.TestReport, location: Location, passed: list[Passed], phases: list[Phase]
    ) -> None:
        """The test's one event: a quiet pass's short record (`protocol.quick`), else its `TestFinished`;
        then the test's outcome and its last lines reach the kernel before the next test starts."""
        running = self._running
        nodeid = running[0] if running is not None and running[1] is location else report.nodeid
        del self._tests[location]
        self.tests_recorded += 1
        file, line, _ = location
        attempt = getattr(report, "rerun", 0) + 1  # pytest-rerunfailures numbers its attempts
        if not phases:
            with self._lock:
                self._running = None  # from here on the tick has nothing to announce
                self._seq += 1
                seq = self._seq
                fields = (self.run_id, self.process, seq, time.time(), nodeid, self.worker, file, line)
                settled = self.sender.send_quick(seq, self.quick_line((*fields, attempt, passed)))
        else:
            settled = False
            self._running = None
            self.emit_plain(
                "test_finished",
                nodeid=nodeid,
                worker=self.worker,
                outcome=final_outcome(_outcomes(passed, phases)),
                duration=sum(p[1] for p in passed) + sum(p[3] for p in phases),
                message=next((p[4] for p in phases if p[4]), ""),
                passed_phases=[(w, _finite(d), f) for w, d, f in passed],
                attempt=attempt,
                file=file,
                line=None if line is None else line + 1,
            )
        self.current = None
        tail = self.tail
        if tail is not None:
            tail.end_test()
        dump = self.dump
        if dump is not None:
            try:
                dump.clear_test()
            except ValueError:  # closed
                self.dump = None
        if not settled:
            self.sender.checkpoint()

    @pytest.hookimpl(tryfirst=True)
    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        """A failed phase (never a skip or xfail): snapshot its frames while they are alive."""
        if self.role == "controller" or not isinstance(node, pytest.Item) or call.excinfo is None:
            return
        from pytest_mcpdebug.failures import doctests
        from pytest_mcpdebug.failures.snapshot import take

        self.announce()
        exc = call.excinfo.value
        try:
            snapshot = doctests.take(exc) or take(
                exc,
                call.excinfo.tb,
                first_code=getattr(getattr(node, "obj", None), "__code__", None),
                assertion=str(exc) if isinstance(exc, AssertionError) else "",
            )
        except Exception as error:  # never let a snapshot break the run; say what went wrong instead
            snapshot = protocol.Snapshot(
                exception=protocol.SnapshotException(
                    type=type(exc).__name__, message=f"(snapshot failed: {type(error).__name__}: {error})"
                )
            )
        self.emit(
            protocol.FailureSnapshot,
            nodeid=node.nodeid,
            worker=self.worker,
            when=getattr(report, "when", None) or call.when,
            snapshot=snapshot,
        )
        self.sender.checkpoint(now=True)  # an agent may be waiting for this failure: no tick's delay
        if self.brief is not None:
            self.brief.from_snapshot(node.nodeid, snapshot)

    def emit_finish(self, exitstatus: int, stats: dict[str, list[Any]] | None) -> None:
        if self.role != "worker":
            counts = {k: len(v) for k, v in (stats or {}).items() if k and k != "warnings"}
            self.emit_plain(
                "run_finished",
                exit_status=int(exitstatus),
                duration=time.time() - self.started,
                counts=counts,
            )
        self.emit_plain("process_finished", events=self._seq + 1)


class ControllerProgress:
    """xdist's controller runs no test but hears of each a worker starts and ends (its reports come
    through the controller's hooks): the test named if the controller itself is stopped."""

    NAME = "mcpdebug-controller-progress"

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.reporter.current, self.reporter.location = nodeid, location

    def pytest_runtest_logfinish(self) -> None:
        self.reporter.current = None


def final_outcome(phases: list[tuple[str, str, bool]]) -> str:
    """The test's outcome as pytest's summary counts it, from (when, outcome, wasxfail) per phase
    ("rerun" for an attempt pytest-rerunfailures runs again)."""
    if any(o == "rerun" for _, o, _ in phases):
        return "rerun"  # pytest-rerunfailures runs it again; the next attempt has the outcome
    call_failed = any(w == "call" and o == "failed" for w, o, _ in phases)
    if call_failed:
        return "failed"
    if any(o == "failed" for _, o, _ in phases):
        return "error"
    for when, outcome, xfail in phases:
        if when in ("setup", "call") and outcome == "skipped":
            return "xfailed" if xfail else "skipped"
        if when == "call" and outcome == "passed" and xfail:
            return "xpassed"
    return "passed"


def _outcomes(passed: list[Passed], phases: list[Phase]) -> list[tuple[str, str, bool]]:
    """(when, outcome, was an xfail) of each phase, from a test's quiet passes and its other phases."""
    return [(when, "passed", False) for when, _, _ in passed] + [p[:3] for p in phases]


def _finite(duration: float) -> float:
    return duration if math.isfinite(duration) else 0.0


_SECRET_WORDS: Final = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "@")


def _shown_args(args: list[str]) -> list[str]:
    """The run's arguments without secrets (`redaction.redact_args`), loaded only for arguments
    that may hold one: most runs' (``-q tests/``) hold none of these words."""
    if not any(word in arg.lower() for arg in args for word in _SECRET_WORDS):
        return args
    from pytest_mcpdebug.redaction import redact_args

    return redact_args(args)


def _plugin_version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
