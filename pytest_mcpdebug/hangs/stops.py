"""Runs stopped from outside: SIGTERM (a CI job cancelled), SIGINT (Ctrl-C, a debug run's close) and
the session timeout. Each leaves a report of where the run was when it was stopped.

A SIGTERM ends the process: its report is recorded and sent at once (and `Timeouts.on_killed`, the
HTML report, is written before it goes). A SIGINT only raises ``KeyboardInterrupt`` in the main
thread, which a test may catch itself (dask's, click's and many CLIs' suites test their Ctrl-C
handling that way): its report is taken at the signal, while the interrupted frames are there, and
recorded only if the session then ends interrupted (`pytest_keyboard_interrupt`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_mcpdebug import forks, protocol
from pytest_mcpdebug.hangs import unmoved

if TYPE_CHECKING:
    from pytest_mcpdebug.hangs.target import Target
    from pytest_mcpdebug.hangs.watchdog import Watchdog
    from pytest_mcpdebug.output.tail import OutputTail
    from pytest_mcpdebug.recording.reporter import Reporter
    from pytest_mcpdebug.recording.sender import Sender
    from pytest_mcpdebug.settings import HangSettings

    Stop = tuple[str, protocol.HangReport]  # (a protocol name read at import would load msgspec)

KILLED_WAIT: Final = 12.0
"""Most seconds a killed process waits for what it does before it goes (`on_killed`)."""
RECORD_WAIT: Final = 2.0
"""Most seconds the signal handler waits for the stop's report (a thread of its own builds it)."""


class Stops:
    """The kill handlers of `Timeouts` (a mixin: it reads the watchdog, reporter and sender there)."""

    settings: HangSettings
    reporter: Reporter
    sender: Sender
    hangs: list[Stop]
    interrupter: str | None
    on_killed: Callable[[], str] | None
    _watchdog: Watchdog | None
    _tail: OutputTail | None
    _previous: dict[int, Any]
    _stderr: int
    _killed: bool
    _interrupted: Stop | None

    if TYPE_CHECKING:  # `Timeouts` defines them

        def _say(self, text: str) -> None: ...

        def _own_pids(self) -> set[int]: ...

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
        killed = signum == signal.SIGTERM
        if not self._killed:
            self._killed = killed
            name = (
                self.interrupter
                if signum == signal.SIGINT and self.interrupter
                else signal.Signals(signum).name
            )
            why = f"{'killed' if killed else 'interrupted'} by {name}"
            # In a thread of its own: this handler may have interrupted the main thread inside the
            # reporter's lock, and must not wait on it for ever.
            recorder = threading.Thread(target=self._take_stop, args=(why, killed, frame), daemon=True)
            recorder.start()
            recorder.join(RECORD_WAIT)
            if killed and self.on_killed is not None and not recorder.is_alive():
                self._after_kill(self.on_killed)
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _take_stop(self, why: str, killed: bool, frame: Any) -> None:
        stop = self._stop_report(why, frame)
        if killed:
            self._record_stop(stop, flush=True)
        else:  # recorded if the session ends interrupted; a test that catches it goes on
            self._interrupted = stop

    @pytest.hookimpl(trylast=True)
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        # pytest's capture has stopped (its own hook, tryfirst) and closed the saved stderr: say it on 2
        self._stderr = 2
        stop, self._interrupted = self._interrupted, None
        if stop is not None:
            self._record_stop(stop, flush=False)

    def _after_kill(self, then: Callable[[], str]) -> None:
        """What a killed process does before it goes (its HTML report, bounded by its own timeout), in
        a thread: the interrupted main thread may hold a lock it needs."""
        worker = threading.Thread(target=lambda: self._say(then()), daemon=True)
        worker.start()
        worker.join(KILLED_WAIT)

    def _on_session_timeout(self, target: Target | None) -> None:
        why = f"the session timeout of {self.settings.session_timeout:g} s was reached"
        self._record_stop(self._stop_report(why), flush=False)

    def _stop_report(self, why: str, frame: Any = None) -> Stop:
        """What the process was doing when the run was stopped from outside, and in which test."""
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
        if self.reporter.role == "controller":  # it runs no test: its workers' own stops name theirs
            nodeid, doing = "", " (the xdist controller, waiting for its workers)"
        report.kind = "interrupted" if why.startswith("interrupted") else "killed"
        report.summary = f"{why}{doing}{unmoved.since_earlier(report, self.hangs)}"
        return nodeid, report

    def _record_stop(self, stop: Stop, *, flush: bool) -> None:
        nodeid, report = stop
        self.hangs.append(stop)
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
