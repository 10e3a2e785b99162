"""Tools that run tests and drive a test held alive: run_tests, wait_for_stop, evaluate_expression,
continue_execution and close_session.

A held test is a live session: its process answers requests over its ingest connection (see
`mcpdebug.live.sessions`); the frame inspection tools take its ``session_id`` too (see `failures`).
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpdebug.debug import DebugError
from mcpdebug.live.sessions import SessionError
from mcpdebug.replies import Continued, DebugStop, Evaluation, RunState
from mcpdebug.tools.annotations import CONTROLS, READ_ONLY, RUNS_CODE
from mcpdebug.tools.args import Cwd, Example, OptionalFrameId, Seconds, SessionId
from mcpdebug.tools.context import ToolGroup, tool
from mcpdebug.views import debug as debug_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import runs as runs_view
from mcpdebug.views.calls import call

RunOrSession = Annotated[
    str,
    Field(
        min_length=1,
        description='A run id (or "latest") from run_tests or list_sessions, or a session id of a held '
        "test (ends that test's run).",
    ),
    Example('"20261122-011523-424242-main-1"'),
]


class LiveTools(ToolGroup):
    group = "live"

    @tool(RUNS_CODE)
    async def evaluate_expression(
        self,
        session_id: SessionId,
        expression: Annotated[
            str,
            Field(description="Python to run in the frame: an expression or statements (`x = 3; x * 2`)."),
            Example('"order.total()"'),
        ],
        frame_id: OptionalFrameId = None,
    ) -> Evaluation:
        """Run Python in a held test's or debug session's frame and return the value's repr and type.

        Side effects are real and stay for the rest of the test. The value's variablesReference
        expands it with get_variables. An exception comes back as an error with its traceback; in a
        held test a runaway expression is interrupted after 10 s.
        """
        return await self.asking(
            live_view.inspect(self.sessions, session_id, "evaluate", expression=expression, frame_id=frame_id)
        )

    @tool(CONTROLS)
    async def continue_execution(
        self,
        session_id: SessionId,
        wait: Annotated[
            float,
            Field(
                ge=0,
                le=600,
                description="A debug session: seconds to wait for its next stop before saying it runs. "
                "Default: 10.",
            ),
            Example("30"),
        ] = 10.0,
    ) -> Continued:
        """Resume a held test or a debug session: it runs to its next stop or its end.

        A held test finishes (teardown) and wait_for_stop waits for the run's next stop; a debug
        session's reply is its next stop, or after ``wait`` seconds that it is running.
        """
        if self.debugger.owns(session_id):
            stop = await self._debug_stop(session_id, "continue", wait)
            return Continued(
                state="running" if stop.state == "closed" else stop.state,
                message=stop.text,
                run_id=session_id,
                next_call=stop.next_call,
                debug=stop.debug,
            )
        live = self.sessions
        session = live.get(session_id) if session_id in {s.id for s in live.held()} else None
        await self.asking(live.request(session_id, "continue", {}))
        rid = session.run_id if session else "latest"
        waits = call("wait_for_stop", id=rid)
        return Continued(
            message=f"Continued session {session_id}; {waits} waits for the run's next stop or end.",
            run_id=session.run_id if session else None,
            next_call=waits,
        )

    @tool(RUNS_CODE)
    async def close_session(self, session_id: RunOrSession) -> RunState:
        """End a run: a held test resumes, finishes its teardown, and the run stops after it.

        A run id of a run started by run_tests stops that run as Ctrl-C would.
        """
        text = await self.asking(self._close(session_id))
        return RunState(text=text, state="closed", run_id=self.sessions.run_of(session_id) or session_id)

    async def _close(self, identifier: str) -> str:
        live, runs = self.sessions, self.runner
        if self.debugger.owns(identifier):
            debugged = await self.debugger.close(identifier)
            return f"Closed debug session {identifier} (exit code {debugged.exit_code})."
        if identifier in {s.id for s in live.held()}:
            session = live.get(identifier)
            await live.request(identifier, "close", {})
            for other in live.held(session.run_id):  # xdist: the other workers' holds end with the run
                with contextlib.suppress(SessionError):
                    await live.request(other.id, "close", {})
            result = await runs.wait(session.run_id, 15.0)
            state = (
                f"run {session.run_id} has stopped ({runs_view.status_text(result.run)})"
                if result.kind == "finished" and result.run
                else f"run {session.run_id} stops after this test"
            )
            return f"Closed session {identifier}: {state}."
        managed = runs.runs.get(identifier)
        if managed is not None:
            if managed.returncode is not None:
                return f"Run {identifier} had already ended (exit status {managed.returncode})."
            for held in live.held(identifier):
                await live.request(held.id, "close", {})
            code = await runs.stop(managed)
            return f"Stopped run {identifier} (exit status {code})."
        live.get(identifier)  # raises with the live sessions listed
        raise SessionError(f"No session or managed run {identifier!r}.")

    @tool(RUNS_CODE)
    async def run_tests(
        self,
        ctx: Context,
        args: Annotated[
            list[str] | None,
            Field(description="Arguments for `pytest --mcp-debug`: node ids, paths, options. Default: none."),
            Example('["tests/test_api.py", "-x"]'),
        ] = None,
        cwd: Cwd = None,
        env: Annotated[
            dict[str, str] | None,
            Field(description="Extra environment variables for the run. Default: none."),
            Example('{"DEBUG": "1"}'),
        ] = None,
        break_on_failure: Annotated[
            bool,
            Field(description="Hold the first failing test alive and return its session_id. Default: false."),
            Example("true"),
        ] = False,
        timeout: Seconds = None,
        debug: Annotated[
            bool,
            Field(
                description="Run under debugpy, as a debug session whose id is the run id. Default: false."
            ),
            Example("true"),
        ] = False,
        breakpoints: Annotated[
            list[debug_view.BreakpointSpec] | None,
            Field(description="With debug: breakpoints set before the tests start. Default: none."),
            Example('[{"file": "src/cart.py", "line": 42, "condition": "total > 100"}]'),
        ] = None,
        stop_on_entry: Annotated[
            bool, Field(description="With debug: stop at the first line. Default: false."), Example("true")
        ] = False,
    ) -> RunState:
        """Run `pytest --mcp-debug <args>` and return when it finishes or a test is held.

        FINISHED gives the exit status, counts and failures; with break_on_failure, STOPPED gives the
        session_id, the test, the exception and the top frame with its locals; with timeout, RUNNING
        may come first. Each run has its own run id; progress is reported while waiting. With debug,
        it returns at the first stop (a breakpoint, a failing test before its frames unwind, the first
        line with stop_on_entry) or the end; timeout defaults to 10 s there.
        """
        if debug:
            specs = [b.model_dump() for b in breakpoints or []]
            session = await self.asking(
                self.debugger.start_tests(args or [], cwd, env, specs, stop_on_entry=stop_on_entry)
            )
            await session.wait(0, 10.0 if timeout is None else timeout)
            return await self._debug_reply(session.id)
        managed = await self.asking(self.runner.start(args or [], cwd, env, break_on_failure))
        state = await self._wait(ctx, managed.run_id, timeout)
        if state.state == "stopped" or state.exit_status == 1:
            self.debugger.prepare("tests")  # a failure is what one debugs next
        return state

    @tool(READ_ONLY)
    async def wait_for_stop(
        self,
        ctx: Context,
        id: Annotated[
            str,
            Field(
                min_length=1,
                description='A run id (or "latest") from run_tests or list_sessions, or a session id.',
            ),
            Example('"latest"'),
        ],
        timeout: Seconds = None,
    ) -> RunState:
        """Wait until a run holds a failing test or finishes, and say which (as run_tests does)."""
        if self.debugger.owns(id):
            await self.debugger.get(id).wait_for_stop(10.0 if timeout is None else timeout)
            return await self._debug_reply(id)
        store, runs = self.store, self.runner
        run_id = self.sessions.run_of(id) or id
        if run_id == "latest" and runs.runs:  # the run just started here may not have recorded yet
            newest = max(runs.runs.values(), key=lambda r: r.started)
            ids = await anyio.to_thread.run_sync(partial(store.run_ids, 1))
            latest = await anyio.to_thread.run_sync(partial(store.run, ids[0])) if ids else None
            if latest is None or latest["started"] < newest.started - 1.0:
                run_id = newest.run_id
        if run_id not in runs.runs:
            run_id = await self.stored(lambda: str(lookup.run(store, run_id)["run_id"]))
        return await self._wait(ctx, run_id, timeout)

    async def _debug_stop(self, session_id: str, command: str, wait: float) -> RunState:
        session = self.debugger.get(session_id)
        try:
            await session.execute(command, wait)
        except DebugError as exc:
            raise ToolError(str(exc)) from None
        return await self._debug_reply(session_id)

    async def _debug_reply(self, session_id: str) -> RunState:
        """A debug session's stop (or end), as a run's stop: its text, and its typed facts in ``debug``."""
        session = self.debugger.get(session_id)
        if session.error is not None:
            raise ToolError(session.error)
        stop = await debug_view.reply(session, self.store, self.runner)
        state = {"paused": "stopped", "terminated": "finished"}.get(stop.state, "running")
        return RunState(
            text=stop.text,
            state=state,  # type: ignore[arg-type]
            run_id=session_id,
            session_id=session_id,
            exit_status=stop.exitCode,
            next_call=stop.next,
            debug=DebugStop.model_validate(stop.model_dump(exclude={"text"})),
        )

    async def _wait(self, ctx: Context, run_id: str, timeout: float | None) -> RunState:
        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        result = await self.asking(self.runner.wait(run_id, timeout, progress))
        session = result.session
        frames = await live_view.live_locals(self.sessions, session.id) if session is not None else None
        return await self.asking(
            anyio.to_thread.run_sync(partial(live_view.outcome, self.store, result, frames))
        )
