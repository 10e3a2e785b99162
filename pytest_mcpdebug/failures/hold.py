"""Holds a failing test alive for an agent (``--mcp-debug-break``) and answers its requests.

The hold happens in `pytest_exception_interact`, after the failure's snapshot was sent, in the test's
own thread: the failure's frames are alive and `liveframes` answers from them. Requests arrive on
the sender's connection (its thread hands them over through a queue); replies go straight back.

A hold never starts without a connected server, so a CI run never waits on anyone. It ends when
the agent continues or closes the session, after ``timeout`` seconds without a request, or when
the connection to the server is lost. Timers that would kill a held test (pytest-timeout's,
faulthandler's) are cancelled for the rest of the test.
"""

from __future__ import annotations

import contextlib
import faulthandler
import queue
import sys
import threading
import time
from types import FrameType
from typing import Any, Final

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.failures.live_frames import InspectError, LiveFrames
from pytest_mcpdebug.failures.snapshot import failure_frames
from pytest_mcpdebug.hangs.watchdog import Watchdog
from pytest_mcpdebug.plugin_object import PluginObject
from pytest_mcpdebug.recording.reporter import Reporter
from pytest_mcpdebug.recording.sender import Sender
from pytest_mcpdebug.values import is_library

POLL: Final = 0.5
"""How often a held test checks its connection while no request comes."""


class Inspector(PluginObject):
    def __init__(
        self,
        *,
        config: pytest.Config,
        reporter: Reporter,
        sender: Sender,
        timeout: float,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.config = config
        self.watchdog = watchdog
        self.breaks = True
        """Hold failing tests (--mcp-debug-break); False when only hung tests are held (pause)."""
        self.session: pytest.Session | None = None
        """Set by the recorder: a closed pause stops the run through it."""
        self.reporter = reporter
        self.sender = sender
        self.timeout = timeout
        self.holds = 0
        self._held: str | None = None
        self._requests: queue.SimpleQueue[protocol.Request | None] = queue.SimpleQueue()
        sender.on_request = self._on_request
        sender.on_disconnect = self._on_disconnect

    # Sender thread ------------------------------------------------------------------------------

    def _on_request(self, request: protocol.Request) -> None:
        if request.session == self._held:
            self._requests.put(request)
            return
        now = f"; {self._held} is held now" if self._held else ""
        self.sender.reply(
            protocol.Reply(
                id=request.id,
                ok=False,
                error=f"session {request.session} is not held any more (it was continued, closed or "
                f"timed out){now}. wait_for_stop waits for the next stop.",
            )
        )

    def _on_disconnect(self) -> None:
        if self._held is not None:
            self._requests.put(None)

    # Hook ---------------------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        if not self.breaks or not isinstance(node, pytest.Item) or call.excinfo is None:
            return
        if self.config.getvalue("usepdb") or not self.sender.connected:
            return  # a debugger takes the failure; without a server nobody could release the hold
        first_code = getattr(getattr(node, "obj", None), "__code__", None)
        entries, _ = failure_frames(call.excinfo.tb, first_code)
        frames = list(reversed(entries))  # innermost first
        test_frame = next((i for i, (f, _) in enumerate(frames) if f.f_code is first_code), None)
        live = LiveFrames(frames, test_frame=test_frame)
        exc = call.excinfo.value
        when = getattr(report, "when", None) or call.when
        self.hold(node, when, live, _one_line(exc))

    def hold(self, item: pytest.Item, when: str, live: LiveFrames, exception: str) -> str:
        """Serve requests until the hold ends; returns why it ended."""
        self.holds += 1
        session = f"{self.reporter.run_id}-{self.reporter.worker}-{self.holds}"
        _cancel_timers(item)
        if self.watchdog is not None:
            self.watchdog.suspend()
        self._requests = queue.SimpleQueue()
        self._held = session
        self.reporter.emit(
            protocol.Held,
            session=session,
            nodeid=item.nodeid,
            worker=self.reporter.worker,
            when=when,
            timeout=self.timeout,
        )
        self._say(
            f"mcpdebug: holding {item.nodeid} ({when} failed: {exception}) for the agent as session "
            f"{session}; it resumes on continue_execution, or by itself after {self.timeout:g} s "
            "without a request"
        )
        try:
            reason = self._serve(live, exception, item.nodeid, when)
        finally:
            self._held = None
            if self.watchdog is not None:
                self.watchdog.resume()
        self.reporter.emit(protocol.Resumed, session=session, reason=reason)
        self._say(f"mcpdebug: {session} resumed ({_REASONS[reason]})")
        if reason == "close":
            item.session.shouldstop = f"mcpdebug: the agent closed session {session}"
        return reason

    def hold_target(self, target: Any) -> str:
        """The watchdog's ``on_pause``: `hold_hang` for its hung `hangs.target.Target`."""
        report = target.report
        summary, phase = (report.summary, report.phase) if report is not None else ("hung", "")
        return self.hold_hang(target.nodeid, target.thread, summary, phase or "call")

    def hold_hang(self, nodeid: str, thread_id: int, summary: str, when: str) -> str:
        """``--mcp-debug-hang-action=pause``, in the watchdog's thread: hold the hung process for an
        agent with every thread's frames inspectable. Returns "continue" (the test runs on, with a
        new timeout) or why the test should be failed now."""
        if not self.sender.connected:
            self._say(f"mcpdebug: {nodeid} hangs and no server is connected to pause it for; failing it")
            return "disconnected"
        live = _all_threads(thread_id)
        self.holds += 1
        session = f"{self.reporter.run_id}-{self.reporter.worker}-{self.holds}"
        self._requests = queue.SimpleQueue()
        self._held = session
        self.reporter.emit(
            protocol.Held,
            session=session,
            nodeid=nodeid,
            worker=self.reporter.worker,
            when=when,
            reason="hang",
            timeout=self.timeout,
        )
        self._say(
            f"mcpdebug: pausing hung {nodeid} for the agent as session {session} ({summary}); "
            f"continue_execution gives it another timeout, close_session fails it and stops the run"
        )
        try:
            reason = self._serve(live, f"hang: {summary}", nodeid, when)
        finally:
            self._held = None
        self.reporter.emit(protocol.Resumed, session=session, reason=reason)
        self._say(f"mcpdebug: {session} resumed ({_REASONS[reason]})")
        if reason == "close" and self.session is not None:
            self.session.shouldstop = f"mcpdebug: the agent closed session {session}"
        return reason

    def _serve(self, live: LiveFrames, exception: str, nodeid: str, when: str) -> str:
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                request = self._requests.get(timeout=min(remaining, POLL))
            except queue.Empty:
                if not self.sender.connected:
                    return "disconnected"
                continue
            if request is None:
                return "disconnected"
            if request.command in ("continue", "close"):
                self.sender.reply(protocol.Reply(id=request.id, result={"state": "running"}))
                return request.command
            self.sender.reply(self._answer(live, request, exception, nodeid, when))
            # The agent is at work: the idle clock restarts from the answer (an evaluation may be long).
            deadline = time.monotonic() + self.timeout

    def _answer(
        self, live: LiveFrames, request: protocol.Request, exception: str, nodeid: str, when: str
    ) -> protocol.Reply:
        try:
            result = live.handle(request.command, dict(request.arguments))
        except InspectError as exc:
            return protocol.Reply(id=request.id, ok=False, error=str(exc))
        except Exception as exc:  # a bug here must not end the hold or the run
            error = f"internal error answering {request.command}: {type(exc).__name__}: {exc}"
            return protocol.Reply(id=request.id, ok=False, error=error)
        if request.command == "stack":
            result = {"test": nodeid, "phase": when, "exception": exception, **result}
        return protocol.Reply(id=request.id, result=result)

    def _say(self, text: str) -> None:
        """A line on the terminal, outside pytest's capture (workers: their stderr reaches the controller)."""
        capman = self.config.pluginmanager.getplugin("capturemanager")
        terminal = self.config.pluginmanager.getplugin("terminalreporter")
        try:
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                if terminal is not None and self.reporter.role == "main":
                    if getattr(terminal._tw, "width_of_current_line", 0):
                        terminal.write("\n")  # after the progress dots or "FAILED"
                    terminal.write_line(text, yellow=True)
                else:  # an xdist worker: its stderr lands on the controller's progress line
                    print("\n" + text, file=sys.stderr, flush=True)
        except Exception:
            pass  # the terminal is a courtesy; the server has the events


_REASONS: Final = {
    "continue": "the agent continued it",
    "close": "the agent closed the session; the run stops after this test",
    "timeout": "no request within the break timeout",
    "disconnected": "the server went away",
}


def _all_threads(test_thread: int) -> LiveFrames:
    """Every thread's frames, the hung test's thread first, innermost first within each."""
    names = {t.ident: t.name for t in threading.enumerate()}
    frames: list[tuple[FrameType, int]] = []
    labels: list[str] = []
    current = sys._current_frames()
    order = [test_thread, *(i for i in current if i != test_thread)]
    test_frame = None
    for ident in order:
        name = names.get(ident, f"thread {ident:#x}")
        if name.startswith("mcpdebug-") or ident not in current:
            continue
        frame: FrameType | None = current[ident]
        while frame is not None and len(frames) < 200:
            if ident == test_thread and test_frame is None and not is_library(frame.f_code.co_filename):
                test_frame = len(frames)
            frames.append((frame, frame.f_lineno))
            labels.append(("[test] " if ident == test_thread else "") + name)
            frame = frame.f_back
    return LiveFrames(frames, test_frame=test_frame, threads=labels)


def _one_line(exc: BaseException) -> str:
    try:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _cancel_timers(item: pytest.Item) -> None:
    """A held test must not be killed by a timer meant for a hang (held time is the agent's)."""
    cancel = getattr(item.config.hook, "pytest_timeout_cancel_timer", None)
    if cancel is not None:  # pytest-timeout
        with contextlib.suppress(Exception):
            cancel(item=item)
    faulthandler.cancel_dump_traceback_later()  # pytest's faulthandler_timeout
