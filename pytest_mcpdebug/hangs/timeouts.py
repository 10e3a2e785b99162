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
from pytest_mcpdebug.hangs import gil_dump, unmoved
from pytest_mcpdebug.hangs.leaks import Leaks
from pytest_mcpdebug.hangs.markers import marked, timeout_of
from pytest_mcpdebug.hangs.stops import Stops
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


class Timeouts(Stops, PluginObject):
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
        self._interrupted: tuple[str, protocol.HangReport] | None = None
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

    def _own_pids(self) -> set[int]:
        """The plugin's own child processes (the reaper's, py-spy's), not the test's."""
        pids = set(self._watchdog.own_pids) if self._watchdog is not None else set()
        if self._reaper is not None:
            pids.add(self._reaper.pid)
        return pids

    # Watchdog callbacks (watchdog thread) ---------------------------------------------------------

    def _on_hang(self, target: Target, report: protocol.HangReport) -> None:
        report.summary += unmoved.since_earlier(report, self.hangs)
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
