"""Per-test hang timeouts: one watchdog thread samples the running test and diagnoses it at its deadline.

Arming costs the test thread almost nothing (an object and an event): the thread wakes every
``interval`` seconds while a timed test runs, records the test thread's stack and CPU time, and at
the deadline builds a `HangReport` from the process's live state (`hang_report.build`) and hands it to
``on_hang``. Then, by the hang action:

- ``fail``: the test is interrupted with `HangTimeout` (a pytest failure, so the run goes on). The
  main thread is interrupted by a signal, which also breaks a blocking call (sleep, lock, socket,
  subprocess wait); another thread by an asynchronous exception. If the test has not stopped within
  ``grace`` seconds, ``on_stuck`` records that and ends the process (xdist replaces a worker).
- ``exit``: the same with `HangExit`, which ends the run.
- ``pause``: ``on_pause`` holds the process for an agent; the watchdog waits for it.

A hang that holds the GIL (a long C call) starves this thread too. faulthandler's own C timer is the
backstop: kept armed to fire ``timeout + grace`` (plus the refresh period) after this thread last
ran, it writes every thread's stack to ``dump_path`` and exits; the xdist controller or the server
attributes the file to the test that was running. It is refreshed from this thread every
`REFRESH` seconds, never per test, so a passing test pays nothing for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from pytest_mcpdebug import forks
from pytest_mcpdebug.hangs import report as hang_report
from pytest_mcpdebug.hangs import tasks as async_tasks
from pytest_mcpdebug.hangs.classify import Sample
from pytest_mcpdebug.hangs.gil_dump import DumpFile
from pytest_mcpdebug.hangs.target import HangExit, HangTimeout, Target
from pytest_mcpdebug.hangs.whose_code import debugger_active, in_test_code
from pytest_mcpdebug.protocol import HangReport

# Timeouts
REFRESH: Final = 0.5
"""How often the faulthandler backstop is pushed forward while this thread runs."""
IDLE_CANCEL: Final = 2.0
"""Between timed tests for this long, the backstop is cancelled (an untimed test may run long)."""
ASYNC_FALLBACK: Final = 0.5
"""An exception handed to a test's event loop not taken within this: the thread is interrupted."""
AGAIN_AFTER: Final = 2
"""Intervals an interrupted test must sit at a new place before it is interrupted there again."""
# Limits
MAX_REPEATS: Final = 10
INTERRUPT_SIGNAL: Final = getattr(signal, "SIGRTMIN", int(signal.SIGUSR2)) + (
    3 if hasattr(signal, "SIGRTMIN") else 0
)
"""A signal nothing else uses, to interrupt a blocking call of the main thread."""


OnHang = Callable[[Target, HangReport], None]


class Watchdog:
    def __init__(
        self,
        *,
        interval: float,
        grace: float,
        on_hang: OnHang,
        on_stuck: Callable[[Target], None],
        on_pause: Callable[[Target], str] | None = None,
        output: Callable[[], list[str]] | None = None,
        dump: DumpFile | None = None,
    ) -> None:
        self.interval = interval
        self.grace = grace
        self.on_hang = on_hang
        self.on_stuck = on_stuck
        self.on_pause = on_pause
        self.output = output
        self.dump = dump
        self._target: Target | None = None
        self._suspended = 0
        self._disabled = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcpdebug-watchdog", daemon=True)
        self._main = threading.main_thread().ident
        self._pending: type[BaseException] | None = None
        self._signal_installed = False
        self._backstop_until = 0.0
        self._backstop_refreshed = 0.0
        self._backstop_lock = threading.Lock()
        """Arming and cancelling the backstop, and a fork (held from just before to just after it)."""
        self._backstop_paused = 0.0
        self._idle_since: float | None = None
        self.session_deadline: float | None = None
        """time.monotonic() at which the whole run ends (``--mcp-debug-session-timeout``)."""
        self.on_session_timeout: Callable[[Target | None], None] | None = None
        self._session_fired = False
        self.own_pids: set[int] = set()
        """Child processes of the plugin's own (the reaper): not the test's, left out of reports."""
        self._async_fallback: tuple[float, int, type[BaseException]] | None = None
        """An exception handed to a test's event loop: when to interrupt the thread instead, and how."""

    # Test thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread.is_alive():
            return
        if threading.current_thread() is threading.main_thread():
            try:
                forks.restore_signal(INTERRUPT_SIGNAL, signal.signal(INTERRUPT_SIGNAL, self._on_signal))
                self._signal_installed = True
            except (ValueError, OSError):
                pass
        forks.around(self, self._before_fork, self._after_fork)
        self._thread.start()

    def arm(
        self, nodeid: str, timeout: float, action: str, test: async_tasks.TestFunction | None = None
    ) -> None:
        if self._disabled or debugger_active():
            return
        thread = threading.get_ident()
        clock = hang_report.thread_clock(thread)
        cpu = hang_report._cpu(clock)
        target = Target(nodeid, thread, timeout, action, clock=clock, cpu_start=cpu, test=test)
        if self.dump is not None and self._backstop_until < target.deadline + self.grace:
            # The test may take the GIL before this thread runs again (a regex at its first line):
            # the backstop must already cover it. Armed for a while, so this is rarely needed.
            self._arm_backstop(target.deadline + self.grace + REFRESH - time.monotonic())
        self._target = target  # no wake-up: the thread looks again within `interval`

    @property
    def hung(self) -> bool:
        """Has the armed test been diagnosed as hung?"""
        target = self._target
        return target is not None and target.hung

    def disarm(self) -> None:
        self._target = None
        self._pending = None  # an interruption the test outran must not hit the next one
        self._async_fallback = None

    def landed(self) -> None:
        """The hang's interruption reached the test: the rest of it (teardown) is timed afresh."""
        target = self._target
        if target is not None and target.fired is not None:
            target.fired = None
            target.report = None
            target.started = time.monotonic()
            target.samples.clear()

    def suspend(self) -> None:
        """A held test is the agent's time, not a hang: nothing fires until `resume`."""
        self._suspended += 1
        self._cancel_backstop()

    def resume(self) -> None:
        self._suspended = max(self._suspended - 1, 0)
        target = self._target
        if target is not None and not self._suspended and target.fired is None:
            target.started = time.monotonic()  # the test gets its whole timeout again
            target.samples.clear()
        self._wake.set()

    def disable(self) -> None:
        """A debugger was entered: timing a human stepping through code would be wrong."""
        self._disabled = True
        self._target = None
        self._cancel_backstop()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(2.0)
        self._cancel_backstop()
        forks.forget(self)
        if self._signal_installed:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(INTERRUPT_SIGNAL, signal.SIG_DFL)
            forks.forget_signal(INTERRUPT_SIGNAL)

    def _on_signal(self, signum: int, frame: Any) -> None:
        __tracebackhide__ = True  # the test's traceback ends at the line that hung, not in here
        pending = self._pending
        if pending is None:
            return
        if issubclass(pending, HangExit) or in_test_code(frame):
            self._pending = None
            raise pending()
        # pytest itself is running (the test failed just before its deadline and is being reported):
        # a failure raised here would be pytest's internal error. The watchdog signals again.

    # Watchdog thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            target = self._target
            now = time.monotonic()
            if self._session_due(now, target):
                continue
            if target is None or self._suspended:
                self._idle(now)
                self._wait(self.interval)  # a test armed meanwhile is seen within one interval
                continue
            self._idle_since = None
            self._refresh_backstop(target, now)
            if target.fired is None:
                self._sample(target, now)
                if now >= target.deadline and self._reportable(target, now):
                    self._fire(target)
                    continue
                if now >= target.deadline:  # pytest is reporting the test's own failure: let it finish
                    self._wait(self.interval)
                    continue
                self._wait(min(self.interval, target.deadline - now, REFRESH))
            else:
                if now >= target.fired + self.grace:
                    self._target = None
                    self.on_stuck(target)
                    continue
                fallback = self._async_fallback
                if fallback is not None and now >= fallback[0]:  # the event loop did not take it
                    self._async_fallback = None
                    self.interrupt(fallback[1], fallback[2])
                elif self._pending is not None and self._signal_installed:
                    with contextlib.suppress(OSError, ValueError):
                        signal.pthread_kill(target.thread, INTERRUPT_SIGNAL)  # not delivered yet
                elif fallback is None:
                    self._again(target)
                self._wait(min(target.fired + self.grace - now, self.interval))

    def _again(self, target: Target) -> None:
        """Interrupted, the test blocks again on its way out (a ``with`` block that joins a stuck
        worker, a ``finally`` that waits): interrupt it again at each new place it settles in."""
        frame = sys._current_frames().get(target.thread)
        stack = hang_report.stack_of(frame)
        if stack != target.seen:
            target.seen, target.still = stack, 0
            return
        target.still += 1
        settled = target.still >= AGAIN_AFTER and stack != target.interrupted_at
        if settled and target.exc is not None and target.repeats < MAX_REPEATS and in_test_code(frame):
            target.repeats += 1
            target.interrupted_at = stack
            self.interrupt(target.thread, target.exc)

    def _session_due(self, now: float, target: Target | None) -> bool:
        deadline = self.session_deadline
        if deadline is None or self._session_fired or now < deadline or self._suspended:
            return False
        self._session_fired = True
        if self.on_session_timeout is not None:
            with contextlib.suppress(Exception):
                self.on_session_timeout(target)
        message = "mcpdebug: the session timeout was reached; the run ends here"
        if target is not None:
            target.fired = time.monotonic()  # not interrupted within the grace: the process ends
        self.interrupt(
            self._main or threading.get_ident(), type("HangExit", (HangExit,), {"message": message})
        )
        return True

    def _wait(self, seconds: float) -> None:
        if self.session_deadline is not None and not self._session_fired:
            seconds = min(seconds, max(self.session_deadline - time.monotonic(), 0))
        self._wake.wait(max(seconds, 0.001))
        self._wake.clear()

    def _sample(self, target: Target, now: float) -> None:
        frame = sys._current_frames().get(target.thread)
        if frame is not None:
            cpu = hang_report._cpu(target.clock)
            target.samples.append(Sample(now, cpu, hang_report.stack_of(frame)))

    def _reportable(self, target: Target, now: float) -> bool:
        """At the deadline, is the test's own code running (not pytest recording its result)? After
        the grace period it is reported whatever it runs: pytest's own work may hang too."""
        if now >= target.deadline + self.grace:
            return True
        return in_test_code(sys._current_frames().get(target.thread))

    def _fire(self, target: Target) -> None:
        report = hang_report.build(
            thread_id=target.thread,
            samples=list(target.samples),
            started=target.started,
            timeout=target.timeout,
            interval=self.interval,
            cpu_start=target.cpu_start,
            clock=target.clock,
            action=target.action,
            output=self.output,
            test=target.test,
            exclude_pids=self.own_pids,
        )
        target.report = report
        target.fired = time.monotonic()
        target.hung = True
        if self._target is not target:
            return  # the test ended while the report was built
        with contextlib.suppress(Exception):  # recording is best effort; interrupting the test is not
            self.on_hang(target, report)
        message = f"{report.summary} (mcpdebug timeout of {target.timeout:g} s)"
        if target.action == "pause" and self.on_pause is not None:
            self._cancel_backstop()
            outcome = self.on_pause(target)  # blocks while an agent inspects the process
            if outcome == "continue" and self._target is target:
                target.fired = None
                target.started = time.monotonic()
                target.samples.clear()
                return
        if self._target is not target:
            return
        kind: type[BaseException] = HangExit if target.action == "exit" else HangTimeout
        exc = type(kind.__name__, (kind,), {"message": message})
        target.exc, target.seen, target.still, target.repeats = exc, (), 0, 0
        target.interrupted_at = hang_report.stack_of(sys._current_frames().get(target.thread))
        if report.wait_kind == "asyncio" and self._interrupt_task(target, exc):
            return
        self.interrupt(target.thread, exc)

    def _interrupt_task(self, target: Target, exc: type[BaseException]) -> bool:
        """An async test waiting in its event loop: the exception is raised at its ``await``, so its
        failure shows the coroutine's frames; if the loop does not take it soon, the thread is
        interrupted as any other (`_run` sees to that)."""
        frame = sys._current_frames().get(target.thread)

        def delivered() -> None:
            self._async_fallback = None

        self._async_fallback = (time.monotonic() + ASYNC_FALLBACK, target.thread, exc)
        if async_tasks.interrupt(frame, target.test, exc, delivered):
            return True
        self._async_fallback = None
        return False

    def interrupt(self, thread: int, exc: type[BaseException]) -> None:
        if thread == self._main and self._signal_installed:
            self._pending = exc
            signal.pthread_kill(thread, INTERRUPT_SIGNAL)
        else:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc))

    # faulthandler backstop ------------------------------------------------------------------------

    def _refresh_backstop(self, target: Target, now: float) -> None:
        if self.dump is None or now - self._backstop_refreshed < REFRESH:
            return
        self._backstop_refreshed = now
        self._arm_backstop(max(target.deadline - now, 0) + self.grace + REFRESH)

    def _arm_backstop(self, seconds: float) -> None:
        if self.dump is None:
            return
        with self._backstop_lock, contextlib.suppress(Exception):
            faulthandler.dump_traceback_later(seconds, exit=True, file=self.dump)
            self._backstop_until = time.monotonic() + seconds

    def _before_fork(self) -> None:
        """A child must not inherit an armed backstop: its copy of faulthandler would believe its
        timer thread runs, and wait for that thread for ever the first time it cancels or re-arms one
        (pytest's ``faulthandler_timeout``, a library's own watchdog). Cancelled here, in the parent,
        and armed again after the fork (`_after_fork`); the lock keeps the watchdog thread from arming
        it in between."""
        self._backstop_lock.acquire()
        if self._backstop_until:
            with contextlib.suppress(Exception):
                faulthandler.cancel_dump_traceback_later()
            self._backstop_paused, self._backstop_until = self._backstop_until, 0.0

    def _after_fork(self) -> None:
        try:
            paused, self._backstop_paused = self._backstop_paused, 0.0
            if paused and self.dump is not None:
                with contextlib.suppress(Exception):
                    faulthandler.dump_traceback_later(
                        max(paused - time.monotonic(), 0.001), exit=True, file=self.dump
                    )
                    self._backstop_until = paused
        finally:
            self._backstop_lock.release()

    def _idle(self, now: float) -> None:
        if self._idle_since is None:
            self._idle_since = now
        elif now - self._idle_since > IDLE_CANCEL or self._suspended:
            self._cancel_backstop()

    def _cancel_backstop(self) -> None:
        if self._backstop_until:
            with self._backstop_lock:
                self._backstop_until = 0.0
                self._backstop_refreshed = 0.0
                with contextlib.suppress(Exception):
                    faulthandler.cancel_dump_traceback_later()
