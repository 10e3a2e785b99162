"""The hang-timeout plugin: which tests are timed and how, and what a hang leaves behind.

A test's timeout comes from ``@pytest.mark.mcpdebug_timeout(seconds, func_only=...)``, else from
``--mcp-debug-timeout`` / ``MCPDEBUG_TIMEOUT`` / ini ``mcpdebug_timeout`` (resolved once, in
`settings`). The whole test protocol (set-up, call, teardown) is timed, or only the call with
``func_only``. A bad marker value is a usage error naming the test. The diagnosis goes to the
server as a `HangDetected` event, to the terminal at once (on the real stderr, past pytest's capture),
and into a short section of the terminal summary.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpdebug import forks, protocol
from pytest_mcpdebug.hangs import gil_dump
from pytest_mcpdebug.hangs.leaks import Leaks
from pytest_mcpdebug.hangs.markers import marked, timeout_of
from pytest_mcpdebug.plugin_object import PluginObject, register
from pytest_mcpdebug.recording.reporter import Reporter
from pytest_mcpdebug.recording.sender import Sender
from pytest_mcpdebug.settings import HangSettings

if TYPE_CHECKING:
    import subprocess

    from pytest_mcpdebug.hangs import resume
    from pytest_mcpdebug.hangs.target import Target
    from pytest_mcpdebug.hangs.timer import CallTimer, TestTimer
    from pytest_mcpdebug.hangs.watchdog import Watchdog
    from pytest_mcpdebug.output.tail import OutputTail

STUCK_EXIT = 3
"""Exit status of a process ended because a hung test could not be interrupted."""
KILLED_WAIT = 12.0
"""Most seconds a killed process waits for what it does before it goes (`on_killed`)."""


class Timeouts(PluginObject):
    def __init__(
        self,
        *,
        config: pytest.Config,
        settings: HangSettings,
        reporter: Reporter,
        sender: Sender,
        tail: OutputTail | None,
        dump_path: Path | None,
        session_started: float | None = None,
        directory: Path | None = None,
        generation: int = 0,
    ) -> None:
        self.config = config
        self.settings = settings
        self.reporter = reporter
        self.sender = sender
        self.hangs: list[tuple[str, protocol.HangReport]] = []
        self.leaks = Leaks()
        self.directory = directory
        self.generation = generation
        self.finished: resume.Finished | None = None
        """Reports to hand on if this process must be replaced (no xdist, a timed run)."""
        self.carried: list[pytest.TestReport] = []
        """Reports handed on by the process this one replaces."""
        self._dump: gil_dump.DumpFile | None = None
        if dump_path is not None:
            try:
                self._dump = gil_dump.DumpFile(dump_path, threading.get_ident())
            except OSError:
                self._dump = None
        self.dump_path = dump_path if self._dump is not None else None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._stderr = _real_stderr(config)
        self._redirected = False
        self._tail = tail
        self._watchdog: Watchdog | None = None
        self._pdb = False
        self._timed = settings.timeout is not None or settings.session_timeout is not None
        if self._dump is not None and (reporter.role == "worker" or self._timed):
            # A crash (segfault, abort) writes its traceback here too, so it is recorded with its test.
            # A worker's is reported by the controller; without xdist the reaper shows it on the
            # terminal as pytest would. (A run without timeouts keeps pytest's own crash output, and a
            # crash is still attributed from the file's header, which the reporter keeps.)
            self._redirect_crashes()
        reporter.dump = self._dump
        self._started = False
        self._previous: dict[int, Any] = {}
        self._killed = False
        self.interrupter: str | None = None
        """Who sends SIGINT when it is not a Ctrl-C (a debug run's close): its stop says so."""
        self._timer: TestTimer | None = None
        self._call_timer: CallTimer | None = None
        self.on_timed: Callable[[], None] | None = None
        """Called once when the run turns out to time some test (a summary of hangs is then needed)."""
        self.on_killed: Callable[[], str] | None = None
        """Called on SIGTERM once the stop is recorded (the HTML report); returns a line to say."""
        if settings.session_timeout is not None:
            started = session_started if session_started is not None else time.time()
            self.watchdog.session_deadline = (
                time.monotonic() + started + settings.session_timeout - time.time()
            )
            self.watchdog.on_session_timeout = self._on_session_timeout
            self._start_watchdog()
        self._install_kill_handlers()

    @property
    def watchdog(self) -> Watchdog:
        """Made (and its module imported) on first use: a run that times nothing never needs it."""
        if self._watchdog is None:
            from pytest_mcpdebug.hangs.watchdog import Watchdog

            self._watchdog = Watchdog(
                interval=self.settings.interval,
                grace=self.settings.grace,
                on_hang=self._on_hang,
                on_stuck=self._on_stuck,
                output=self._tail.recent if self._tail is not None else None,
                dump=self._dump,
            )
            if self._reaper is not None:
                self._watchdog.own_pids.add(self._reaper.pid)
            if self._pdb:
                self._watchdog.disable()
        return self._watchdog

    def close(self) -> None:
        for timer in (self._timer, self._call_timer):
            if timer is not None:
                self.config.pluginmanager.unregister(timer)
        self._timer = self._call_timer = None
        if self.finished is not None:
            with contextlib.suppress(ValueError):
                self.reporter.report_listeners.remove(self.finished.add)
            self.finished = None
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, previous)
            forks.forget_signal(signum)
        forks.forget(self)
        if self._started and self._watchdog is not None:
            self._watchdog.stop()
        if self._dump is not None:
            if self._redirected:
                with contextlib.suppress(Exception):
                    faulthandler.enable(file=self._stderr, all_threads=True)  # back to the terminal
            self._dump.close()
        if self._reaper is not None and self._reaper.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                forks.disown(self._reaper.stdin.fileno())
            with contextlib.suppress(OSError):
                self._reaper.stdin.close()  # it sees the end of its input, finds no dump, and exits

    def _redirect_crashes(self) -> None:
        if self._redirected or self._dump is None:
            return
        self._redirected = True
        enabled = faulthandler.is_enabled()
        with contextlib.suppress(Exception):
            faulthandler.enable(file=self._dump, all_threads=True)
        # A child's crash is its own: on the terminal as without the plugin, not in this process's dump.
        forks.in_child(self, functools.partial(_crashes_to, self._stderr if enabled else None))
        if self.reporter.role == "main":
            from pytest_mcpdebug.hangs import reaper

            with forks.owning():
                self._reaper = reaper.start(self._dump.path, self._stderr)
                if self._reaper is not None and self._reaper.stdin is not None:
                    forks.own(self._reaper.stdin.fileno())  # the reaper waits for this pipe's end
            if self._reaper is not None and self._watchdog is not None:
                self._watchdog.own_pids.add(self._reaper.pid)

    # Hooks ----------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        per_test = call_only = False
        for item in items if self.settings.timeout is not None else marked(items):
            timeout, func_only = self._resolve(item)  # a bad marker is an error before anything runs
            per_test = per_test or timeout is not None
            call_only = call_only or (timeout is not None and func_only)
        if (per_test or self._timed) and self.on_timed is not None:
            self.on_timed()
            self.on_timed = None
        if per_test and self._timer is None:
            from pytest_mcpdebug.hangs import resume
            from pytest_mcpdebug.hangs.timer import CallTimer, TestTimer

            # A run with no timed test pays for none of these hooks (nor for the call's, without one
            # timed by its call alone).
            self._timer = TestTimer(self)
            register(self.config, self._timer, "mcpdebug-test-timer")
            if call_only:
                self._call_timer = CallTimer(self)
                register(self.config, self._call_timer, "mcpdebug-call-timer")
            if self.reporter.role == "main" and self.directory is not None:
                self.finished = resume.Finished(self.config)
                self.finished.reports.extend(self.carried)
                self.reporter.report_listeners.append(self.finished.add)

    def pytest_enter_pdb(self) -> None:
        self._pdb = True
        if self._watchdog is not None:
            self._watchdog.disable()

    # Settings -------------------------------------------------------------------------------------

    def _resolve(self, item: pytest.Item) -> tuple[float | None, bool]:
        """(timeout, func_only) of a test: marker > CLI > env > ini."""
        cached = item.stash.get(_KEY, None)
        if cached is not None:
            return cached
        timeout, func_only = timeout_of(item, self.settings.timeout, self.settings.func_only)
        item.stash[_KEY] = (timeout, func_only)
        return timeout, func_only

    def _arm(self, item: pytest.Item, timeout: float) -> None:
        if not self._started:
            self._start_watchdog()
        function = getattr(item, "originalname", None)
        test = (str(item.path), function) if isinstance(function, str) else None
        self.watchdog.arm(item.nodeid, timeout, self.settings.action, test)

    def _start_watchdog(self) -> None:
        self._started = True
        self.watchdog.start()
        self._redirect_crashes()  # a marker's timeout: the backstop's dump needs the reaper too
        # A first test that takes the GIL at once would starve the sender too: let it write out the
        # run's start now, so a process ended by the backstop still leaves its run behind.
        self.sender.drained()

    # Kills and the session timeout ----------------------------------------------------------------

    def _install_kill_handlers(self) -> None:
        """SIGTERM (a CI job cancelled) and SIGINT: record where the run was before it goes.

        A signal the process ignores is left ignored (started with ``nohup``, or as ``cmd &`` in a
        script, which ignores SIGINT): it does not end the run, and a handler in its place would change
        what the processes the tests start inherit (exec keeps an ignored signal ignored, a handler
        becomes the default): a child that would have survived the signal would die of it."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                if signal.getsignal(signum) == signal.SIG_IGN:
                    continue
                self._previous[signum] = signal.signal(signum, self._on_kill)
            except (ValueError, OSError):
                continue
            forks.restore_signal(signum, self._previous[signum])

    def _on_kill(self, signum: int, frame: Any) -> None:
        __tracebackhide__ = True
        if not self._killed:
            self._killed = True
            name = signal.Signals(signum).name
            if signum == signal.SIGINT and self.interrupter:
                name = self.interrupter
            # In a thread of its own: this handler may have interrupted the main thread inside the
            # reporter's lock, and must not wait on it for ever.
            killed = signum == signal.SIGTERM
            recorder = threading.Thread(
                target=self._record_stop,
                args=(f"{'killed' if killed else 'interrupted'} by {name}", killed, frame),
                daemon=True,
            )
            recorder.start()
            recorder.join(2.0)
            if killed and self.on_killed is not None and not recorder.is_alive():
                self._after_kill(self.on_killed)
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _after_kill(self, then: Callable[[], str]) -> None:
        """What a killed process does before it goes (its HTML report, bounded by its own timeout), in
        a thread: the interrupted main thread may hold a lock it needs."""
        worker = threading.Thread(target=lambda: self._say(then()), daemon=True)
        worker.start()
        worker.join(KILLED_WAIT)

    def _on_session_timeout(self, target: Target | None) -> None:
        self._record_stop(f"the session timeout of {self.settings.session_timeout:g} s was reached", False)

    def _record_stop(self, why: str, flush: bool, frame: Any = None) -> None:
        """A report of what the process was doing when the run was stopped from outside."""
        from pytest_mcpdebug.hangs import report as hang_report

        target = self._watchdog._target if self._watchdog is not None else None
        main = threading.main_thread().ident or threading.get_ident()
        report = hang_report.build(
            thread_id=target.thread if target is not None else main,
            samples=list(target.samples) if target is not None else [],
            started=target.started if target is not None else time.monotonic(),
            timeout=target.timeout if target is not None else 0.0,
            interval=self.settings.interval,
            cpu_start=target.cpu_start if target is not None else None,
            clock=target.clock if target is not None else None,
            action="exit",
            output=self._tail.recent if self._tail is not None else None,
            frame=frame,
            exclude_pids=self._own_pids(),
        )
        nodeid = target.nodeid if target is not None else (self.reporter.current or "")
        doing = f" while running {nodeid}: {report.summary}" if nodeid else " between tests"
        report.kind = "interrupted" if why.startswith("interrupted") else "killed"
        report.summary = f"{why}{doing}"
        self.hangs.append((nodeid, report))
        self.reporter.announce()
        self.reporter.emit(
            protocol.HangDetected,
            nodeid=nodeid,
            worker=self.reporter.worker,
            when=report.phase,
            report=report,
        )
        self._say(f"mcpdebug: {report.summary}")
        if flush:  # the process ends right after this: deliver what is queued now
            self.sender.close(timeout=1.5)

    def _own_pids(self) -> set[int]:
        """The plugin's own child processes (the reaper's, py-spy's), not the test's."""
        pids = set(self._watchdog.own_pids) if self._watchdog is not None else set()
        if self._reaper is not None:
            pids.add(self._reaper.pid)
        return pids

    # Watchdog callbacks (watchdog thread) ---------------------------------------------------------

    def _on_hang(self, target: Target, report: protocol.HangReport) -> None:
        self.hangs.append((target.nodeid, report))
        self.reporter.announce()
        self.reporter.emit(
            protocol.HangDetected,
            nodeid=target.nodeid,
            worker=self.reporter.worker,
            when=report.phase,
            report=report,
        )
        what = {"fail": "failing it", "exit": "ending the run", "pause": "holding it for the agent"}
        self._say(
            f"mcpdebug: HANG {target.nodeid} after {report.elapsed:.1f} s: {report.summary}; "
            f"{what.get(target.action, target.action)}"
        )

    def _on_stuck(self, target: Target) -> None:
        """Interrupted, the test did not stop (a call that cannot be interrupted): without xdist, the
        rest of the run goes on in a fresh process (`resume`); under xdist (or where that cannot
        be done) the process ends, xdist starts a new worker, and the dump file says why."""
        summary = target.report.summary if target.report else "hung"
        from pytest_mcpdebug.hangs import resume

        grace = f"it did not stop within {self.settings.grace:g} s of being interrupted"
        if self.finished is not None and resume.possible(self.config, self.generation):
            why = f"{summary}; {grace}, so the rest of the run went on in a fresh process"
            self._say(f"mcpdebug: {target.nodeid}: {why}")
            with contextlib.suppress(Exception):
                self._resume(target, why)
        why = f"{summary}; {grace}, so its process was ended"
        self._say(f"mcpdebug: {target.nodeid}: {why} (exit status {STUCK_EXIT})")
        if self._dump is not None:
            with contextlib.suppress(OSError, ValueError):
                self._dump.append(f"{gil_dump.STUCK}{why}\n")
        self.sender.close(timeout=2.0)
        os._exit(STUCK_EXIT)

    def _resume(self, target: Target, why: str) -> None:
        """Record the stuck test as failed and replace this process (`resume.restart`)."""
        from pytest_mcpdebug.hangs import resume

        assert self.finished is not None and self.directory is not None
        summary = self.config.pluginmanager.get_plugin("mcpdebug-hangs")
        state = resume.stuck_state(
            self.reporter,
            target,
            why,
            generation=self.generation + 1,
            finished=self.finished,
            hangs=[*getattr(summary, "hangs", []), (target.nodeid, why)],
            leaks=[leak.as_dict() for leak in self.leaks.found],
        )
        self.sender.close(timeout=2.0)
        if self._dump is not None:
            self._dump.close()  # nothing dumped: removed, and the reaper has nothing to say
            self._dump = None
        resume.restart(
            self.config,
            state=state,
            directory=self.directory,
            run_id=self.reporter.run_id,
            stdout=_saved_fd(self.config, "out"),
            stderr=_saved_fd(self.config, "err"),
        )

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self._stderr, (text + "\n").encode("utf-8", "replace"))


_KEY = pytest.StashKey[tuple[float | None, bool]]()


def _saved_fd(config: pytest.Config, stream: str) -> int | None:
    """The process's stdout or stderr before pytest's capture redirected it (a dup pytest keeps)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    capturing = getattr(capman, "_global_capturing", None)
    saved = getattr(getattr(capturing, stream, None), "targetfd_save", None)
    return saved if isinstance(saved, int) else None


def _crashes_to(stderr: int | None) -> None:
    """faulthandler as it was before the recorder's redirection: on ``stderr``, or off (None)."""
    if stderr is None:
        faulthandler.disable()
    else:
        faulthandler.enable(file=stderr, all_threads=True)


def _real_stderr(config: pytest.Config) -> int:
    """The process's stderr before pytest's capture redirected fd 2."""
    saved = _saved_fd(config, "err")
    if saved is not None:
        return saved
    try:
        return sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (OSError, ValueError):
        return 2
