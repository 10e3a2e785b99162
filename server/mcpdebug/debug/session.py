"""One debug session: a debuggee (a script, or a pytest run), its DAP connection, breakpoints, watches.

States: created (breakpoints can be set, pending) -> starting -> running <-> paused -> terminated
(the debuggee exited; its exit code is kept) -> closed. Everything runs on the server's event loop;
debugpy's events arrive through `_on_event` and wake the waiters.

A stop is captured once, when debugpy reports it: the stack, the top frame's locals, the exception
and every watch's value. A tool that waits for a stop waits for that capture, so what it answers is
consistent, and watches are compared stop to stop even when nobody asked in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import Any, Final

from mcpdebug.debug import DebugError, debuggee, inspect
from mcpdebug.debug.breakpoints import Breakpoints, log_breakpoint
from mcpdebug.debug.changes import Changes
from mcpdebug.debug.dap import REQUEST_TIMEOUT, DapClient, DapError
from mcpdebug.debug.output import OutputRecorder
from mcpdebug.debug.stops import Stop
from mcpdebug.debug.watches import Watch, Watches
from mcpdebug.live.sessions import SessionError
from mcpdebug.processes.test_runs import ManagedRun
from mcpdebug.report import entries
from mcpdebug.store import Store
from pytest_mcpdebug.debug import logpoints

# Timeouts
SCRIPT_REPORT_TIMEOUT: Final = 60.0
"""A script's launcher reports within a second; a test run only after collection (no limit)."""
NUDGES: Final = (0.002, 0.01, 0.03, 0.06, 0.1, 0.15)
"""When (seconds after the command) a thread told to resume is woken (see `DebugSession._nudge`)."""
EXCEPTION_FILTERS: Final = ("raised", "uncaught", "userUnhandled")
DEFAULT_FILTERS: Final = ("userUnhandled",)
"""An exception leaving the user's code stops where it was raised, before its frames unwind."""


class DebugSession:
    def __init__(
        self, *, session_id: str, name: str, kind: str, executable: str, root: Path, store: Store
    ) -> None:
        self.id = session_id
        self.name = name
        self.kind = kind
        """script (start_debugging) or tests (run_tests(debug=True))."""
        self.executable = executable
        self.root = root
        self.store = store
        self.state = "created"
        self.created_at = self.updated_at = self.active_at = time.time()
        self.breakpoints = Breakpoints(root, session=session_id)
        self.watches = Watches()
        self.exception_filters: list[str] = list(DEFAULT_FILTERS)
        self.target = ""
        self.pid: int | None = None
        self.exit_code: int | None = None
        self.error: str | None = None
        """Why it could not start."""
        self.ended: str | None = None
        """Why it was closed."""
        self.stop: Stop | None = None
        self.stops = 0
        self.dap: DapClient | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.output: OutputRecorder | None = None
        self.managed: ManagedRun | None = None
        """A test run's process, as `Runner` follows it (terminal log, exit)."""
        self.logpoints_in_dap = True
        """debugpy's output events are stored (scripts); a test run prints logpoints itself."""
        self.modules: list[str] = []
        """What a test run imported before its tests that a spare may import first (`spares`)."""
        self._dap_ids: dict[int, str] = {}
        self._initialized = asyncio.Event()
        self._capture: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._changes = Changes()
        self._exited = asyncio.Event()
        self._resumes = 0

    # Starting -------------------------------------------------------------------------------------

    def launch(
        self, process: asyncio.subprocess.Process, report_fd: int, *, stop_on_entry: bool, just_my_code: bool
    ) -> None:
        """Follow a started debuggee: read its report, attach, configure, then let it run."""
        self.state, self.process, self.pid = "starting", process, process.pid
        self._spawn(self._start(report_fd, stop_on_entry, just_my_code))
        self._spawn(self._watch_process())

    async def _start(self, report_fd: int, stop_on_entry: bool, just_my_code: bool) -> None:
        timeout = SCRIPT_REPORT_TIMEOUT if self.kind == "script" else None
        try:
            report = await debuggee.read_report(report_fd, timeout)
            if report is None or "error" in report:
                await self._failed(report)
                return
            self.logpoints_in_dap = report.get("logpoints") != "stdout"
            self.modules = [str(m) for m in report.get("modules", [])]
            if self.kind == "script":
                self._record_output(report)
            self.dap = await debuggee.attach(report, self._on_event)
            await debuggee.configure(
                self.dap,
                self._initialized,
                self._send_settings,
                stop_on_entry=stop_on_entry,
                just_my_code=just_my_code,
            )
            if self.state == "starting":
                self.state = "running"
        except (DapError, OSError, TimeoutError, asyncio.TimeoutError, KeyError, ValueError) as exc:
            self.error = f"Could not attach to the debuggee: {exc or type(exc).__name__}"
            await self._end_process()
        finally:
            self._notify()

    async def _failed(self, report: dict[str, Any] | None) -> None:
        if report is not None:
            self.error = str(report["error"])
        elif self.kind == "tests":
            return  # pytest ended before its tests ran (usage or collection error): its outcome says why
        else:
            tail = await debuggee.stderr_tail(self.process) if self.process is not None else ""
            self.error = "The debuggee ended before debugpy could listen" + (f":\n{tail}" if tail else ".")
        await self._end_process()

    def _record_output(self, report: dict[str, Any]) -> None:
        assert self.process is not None
        self.output = OutputRecorder(
            self.store,
            self.id,
            label=self.name,
            args=self.target.split(),
            cwd=str(self.root),
            python=str(report.get("python", "")),
            pid=self.process.pid,
        )
        self._spawn(self.output.read("stdout", self.process.stdout))
        self._spawn(self.output.read("stderr", self.process.stderr))

    def _send_settings(self) -> list[Awaitable[None]]:
        """Send every file's breakpoints and the exception filters now (one round trip for all);
        the answers are taken as they come."""
        return [*(self._send_breakpoints(path) for path in self.breakpoints.files()), self._send_filters()]

    # Breakpoints ----------------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        return self.dap is not None and not self.dap.closed.is_set() and self._initialized.is_set()

    async def sync_breakpoints(self, path: str) -> None:
        """Send a file's breakpoints to debugpy (all at once, as DAP wants); pending until attached."""
        if self.attached:
            await self._send_breakpoints(path)

    async def sync_exception_filters(self) -> None:
        if self.attached:
            await self._send_filters()

    def _send_breakpoints(self, path: str) -> Awaitable[None]:
        """Send now; the returned awaitable takes debugpy's answer (where it bound each one)."""
        assert self.dap is not None
        sent = self.breakpoints.to_send(path)
        answer = self.dap.send(
            "setBreakpoints", {"source": {"path": path}, "breakpoints": [b.dap() for b in sent]}
        )

        async def bound() -> None:
            body = await _answer(answer, "setBreakpoints")
            self._dap_ids.update(self.breakpoints.bound(sent, list(body.get("breakpoints", [])), path))
            for bp in sent:
                log_breakpoint(self.id, "verified", bp)

        return bound()

    def _send_filters(self) -> Awaitable[None]:
        assert self.dap is not None
        answer = self.dap.send("setExceptionBreakpoints", {"filters": self.exception_filters})

        async def taken() -> None:
            await _answer(answer, "setExceptionBreakpoints")

        return taken()

    async def add_watch(self, expression: str) -> Watch:
        """Watch ``expression``; paused, its value now is the one the next stop compares with."""
        watch = self.watches.add(expression)
        if self.state == "paused" and self.stop is not None and self.stop.frames and watch.value is None:
            with contextlib.suppress(DapError):
                values = await inspect.watch_values(self, self.stop.frames[0])
                self.watches.record({watch.id: values[watch.id]}, self.stops)
        return watch

    # Execution ------------------------------------------------------------------------------------

    async def execute(self, command: str, wait: float) -> None:
        """continue, next, stepIn or stepOut from the current stop; returns at the next stop, at the
        end, or after ``wait`` seconds with the debuggee still running."""
        stop = await self.current_stop(command)
        after = self.stops
        self.state, self.stop = "running", None
        assert self.dap is not None
        resumed = self.dap.send(command, {"threadId": stop.thread})
        await self._nudge(stop.thread, after)
        try:
            await asyncio.wait_for(resumed, REQUEST_TIMEOUT)
        except (TimeoutError, asyncio.TimeoutError):
            raise DebugError(f"debugpy did not answer {command} within {REQUEST_TIMEOUT:g} s") from None
        except DapError as exc:
            self.state, self.stop = "paused", stop
            raise DebugError(f"debugpy refused {command}: {exc}") from None
        await self.wait(after, wait)

    async def _nudge(self, thread: int, after: int) -> None:
        """Wake a thread told to resume until it has (debugpy's "continued" event, or a new stop).

        With sys.monitoring (3.12+) pydevd's suspended thread notices that it may run only when
        something else is posted to it, or at its next poll 0.2 s later. A request for that thread
        wakes it (its answer comes at the next stop, and nobody waits for it), so a step takes
        milliseconds; more than one may be needed, as a wake-up can come before the step is seen.
        """
        resumes = self._resumes
        loop = asyncio.get_running_loop()
        start = loop.time()

        def resumed() -> bool:
            return self._resumes > resumes or self.stops > after or self.state in ("terminated", "closed")

        for at in NUDGES:  # on a schedule: other events must not spend the wake-ups at once
            await self._changes.until(resumed, start + at)
            if resumed():
                return
            if self.dap is not None:
                self.dap.tell("exceptionInfo", {"threadId": thread})

    async def pause(self, wait: float) -> None:
        deadline = asyncio.get_running_loop().time() + wait
        await self._changes.until(lambda: self.state != "starting", deadline)  # pause it once it runs
        if self.state == "paused":
            return
        self.require_started("pause")
        after = self.stops
        assert self.dap is not None
        threads = (await self.dap.request("threads")).get("threads", [])
        main = next((t for t in threads if t.get("name") == "MainThread"), threads[0] if threads else None)
        if main is None:
            raise DebugError("The debuggee has no Python thread to pause.")
        await self.dap.request("pause", {"threadId": main["id"]})
        await self.wait(after, wait)

    async def wait(self, after: int, timeout: float) -> None:
        """Until a stop numbered above ``after`` is captured, the debuggee ended, or ``timeout``."""
        deadline = asyncio.get_running_loop().time() + max(timeout, 0.0)

        def stopped_or_ended() -> bool:
            return self.state in ("terminated", "closed") or (
                self.stop is not None and self.stop.number > after
            )

        await self._changes.until(stopped_or_ended, deadline)

    async def wait_for_stop(self, timeout: float) -> None:
        """The stop it is paused at now, or the next one (or its end, or ``timeout``)."""
        await self.wait(self.stops - 1 if self.state == "paused" else self.stops, timeout)

    async def current_stop(self, doing: str) -> Stop:
        """The stop the session is paused at (captured), or DebugError saying why there is none."""
        if self.state == "paused" and self._capture is not None:
            await asyncio.shield(self._capture)
        if self.state != "paused" or self.stop is None:
            raise DebugError(self.not_paused(doing))
        return self.stop

    def require_started(self, doing: str) -> None:
        if self.state in ("created", "starting", "terminated", "closed") or self.dap is None:
            raise DebugError(self.not_paused(doing))

    def not_paused(self, doing: str) -> str:
        sid = self.id
        if self.state == "created":
            return f'Session {sid} has not started: start_debugging(session_id="{sid}", script_path=...).'
        if self.state == "starting":
            return f'Session {sid} is starting: wait_for_stop(id="{sid}") waits for its first stop.'
        if self.state in ("terminated", "closed"):
            how = self.error or (f"exit code {self.exit_code}" if self.exit_code is not None else self.ended)
            return f"Session {sid} has ended ({how}); close_debug_session removes it."
        return (
            f"Session is not paused: cannot {doing} while session {sid} is running. The session must be "
            f'paused at a breakpoint: pause_execution(session_id="{sid}") pauses it, '
            f'wait_for_stop(id="{sid}") waits for the next stop.'
        )

    # Inspection (the live session commands: stack, scopes, variables, locals, evaluate, files) ------

    async def handle(self, command: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.active_at = time.time()
        try:
            return await inspect.answer(self, command, arguments)
        except DebugError as exc:
            raise SessionError(str(exc)) from None

    # Ending ---------------------------------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Detach, end the debuggee and everything it started (within about 5 s), forget the session."""
        if self.state == "closed":
            return
        self.ended = reason
        disconnected = False
        if self.attached:
            assert self.dap is not None
            with contextlib.suppress(Exception):  # no breakpoints, every thread resumed
                await self.dap.request("disconnect", {"terminateDebuggee": False}, timeout=0.5)
                disconnected = True
        if self.process is not None:
            if self.kind == "tests":  # its test ends as it would; the run stops after it
                await debuggee.end_tests(self.process, disconnected=disconnected)
            else:
                await debuggee.end(self.process)
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(self._exited.wait(), 2.0)
        if self.dap is not None:
            await self.dap.close()
        for task in list(self._tasks):
            task.cancel()
        self.state = "closed"
        self._notify()

    async def _end_process(self) -> None:
        if self.process is not None:
            await debuggee.end(self.process)

    async def _watch_process(self) -> None:
        assert self.process is not None
        code = await self.process.wait()
        if self.output is not None:
            await self.output.finish(code)
        self.exit_code = code
        if self.state != "closed":
            self.state = "terminated"
        entries.debug_state(self.id, "stopped", reason="exited", exitCode=code)
        if self.dap is not None:
            await self.dap.close()
        self._exited.set()
        self._notify()

    # debugpy's events -----------------------------------------------------------------------------

    def _on_event(self, name: str, body: dict[str, Any]) -> None:
        if name == "initialized":
            self._initialized.set()
        elif self.state == "closed":
            return
        elif name == "stopped":
            self.stops += 1
            self.state, self.stop = "paused", None
            self._capture = self._spawn(self._capture_stop(self.stops, body))
        elif name == "continued":
            self._resumes += 1
            if self.state == "paused" and self.stop is not None:
                self.state, self.stop = "running", None
            entries.debug_state(self.id, "running", thread_id=body.get("threadId"))
        elif name == "terminated":  # pydevd waits for a disconnect before it lets the process exit
            if self.dap is not None:
                self.dap.tell("disconnect", {"terminateDebuggee": False})
        elif name == "output":
            self._debugpy_output(body)
        elif name == "breakpoint":
            bp_body = body.get("breakpoint") or {}
            ours = self._dap_ids.get(bp_body.get("id", -1))
            if ours is not None:
                with contextlib.suppress(LookupError):
                    Breakpoints.update(self.breakpoints.get(ours), bp_body)
                    log_breakpoint(self.id, "verified", self.breakpoints.get(ours))
        else:
            return
        self.updated_at = time.time()
        self._notify()

    def _debugpy_output(self, body: dict[str, Any]) -> None:
        category = body.get("category", "console")
        logpoint, text = logpoints.split(str(body.get("output", "")))
        if logpoint is not None:
            with contextlib.suppress(LookupError):
                self.breakpoints.get(logpoint).hits += 1
        if category != "telemetry" and text and self.output is not None and self.logpoints_in_dap:
            self.output.log(text)

    async def _capture_stop(self, number: int, body: dict[str, Any]) -> None:
        stop = Stop.reported(number, body)
        try:
            await inspect.capture(self, stop)
        except DapError:
            pass  # resumed or ended while it was read: what was read stays
        finally:
            if number == self.stops and self.state == "paused":
                self.stop = stop
            self._notify()
            stop.log(self.id)

    # Helpers --------------------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _notify(self) -> None:
        self._changes.notify()


async def _answer(future: asyncio.Future[dict[str, Any]], command: str) -> dict[str, Any]:
    try:
        return await asyncio.wait_for(future, REQUEST_TIMEOUT)
    except (TimeoutError, asyncio.TimeoutError):
        raise DapError(f"debugpy did not answer {command} within {REQUEST_TIMEOUT:g} s") from None
