"""Tools that run tests and drive a test held alive: run_tests, wait_for_stop, evaluate_expression,
continue_execution and close_session.

A held test is a live session: its process answers requests over its ingest connection (see
`mcpdebug.live.sessions`); the frame inspection tools take its ``session_id`` too (see `failures`).
"""

from __future__ import annotations

import contextlib
import json
from functools import partial

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcpdebug.debug import DebugError
from mcpdebug.live.sessions import SessionError
from mcpdebug.tools.context import CONTROLS, READ_ONLY, RUNS_CODE, ToolContext, ToolGroup
from mcpdebug.views import debug as debug_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import runs as runs_view


class LiveTools(ToolGroup):
    async def evaluate_expression(self, session_id: str, expression: str, frame_id: int | None = None) -> str:
        """Run Python in a held test's frame (default: the test function's frame; frame_id from
        get_stack_trace picks another) and return the value's repr, type and variablesReference.
        Expressions and statements both work (`x = 3; x * 2`); side effects are real and stay for
        the rest of the test. Exceptions come back as errors with their traceback. A runaway
        expression is interrupted after 10 s."""
        return await self.asking(
            live_view.inspect(self.sessions, session_id, "evaluate", expression=expression, frame_id=frame_id)
        )

    async def continue_execution(self, session_id: str, wait: float = 10.0) -> str:
        """Resume a held test: it finishes (teardown) and the run goes on to its next stop or its end;
        wait_for_stop(run id) waits for that. A debug session runs to its next stop or its end, waiting
        up to wait seconds (then it says it is running)."""
        if self.debugger.owns(session_id):
            return await self._debug_step(session_id, "continue", wait)
        live = self.sessions
        session = live.get(session_id) if session_id in {s.id for s in live.held()} else None
        await self.asking(live.request(session_id, "continue", {}))
        rid = session.run_id if session else "latest"
        message = (
            f'Continued session {session_id}; wait_for_stop("{rid}") waits for the run\'s next stop or end.'
        )
        return json.dumps({"success": True, "state": "running", "message": message})

    async def close_session(self, session_id: str) -> str:
        """End a run: a held test's session (the test resumes, finishes its teardown, and the run
        stops after it, as interrupted) or the run id of a run started by run_tests (stopped as
        Ctrl-C would)."""
        return await self.asking(self._close(session_id))

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

    async def run_tests(
        self,
        ctx: Context,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        break_on_failure: bool = False,
        timeout: float | None = None,
        debug: bool = False,
        breakpoints: list[debug_view.BreakpointSpec] | None = None,
        stop_on_entry: bool = False,
    ) -> str:
        """Run `pytest --mcp-debug <args>` (e.g. args=["tests/test_api.py", "-x"]) in cwd (default: the
        server's folder) as a process of this server, and return when it finishes or, with
        break_on_failure, when a test fails and is held alive: the reply gives the session_id, the
        test, the exception, the top frame and its locals. timeout (seconds) returns earlier with
        the run still going. Progress is reported while waiting. Runs started together are kept
        apart: each has its own run id. debug=True runs them under debugpy (a debug session whose id is
        the run id) with breakpoints=[{"file", "line", "condition"?, "hit_condition"?, "log_message"?}]
        and returns at the first stop (a breakpoint, a failing test before its frames unwind, or the
        first line with stop_on_entry) or the end; timeout defaults to 10 s there. Not with -n."""
        if debug:
            specs = [b.model_dump() for b in breakpoints or []]
            session = await self.asking(
                self.debugger.start_tests(args or [], cwd, env, specs, stop_on_entry=stop_on_entry)
            )
            await session.wait(0, 10.0 if timeout is None else timeout)
            return await self._debug_reply(session.id)
        managed = await self.asking(self.runner.start(args or [], cwd, env, break_on_failure))
        return await self._wait(ctx, managed.run_id, timeout)

    async def wait_for_stop(self, ctx: Context, id: str, timeout: float | None = None) -> str:
        """Wait until a run holds a failing test or finishes, and say which (as run_tests does).
        id: a run id (or "latest") or a session id (waits on its run). timeout in seconds."""
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

    async def _debug_step(self, session_id: str, command: str, wait: float) -> str:
        session = self.debugger.get(session_id)
        try:
            await session.execute(command, wait)
        except DebugError as exc:
            raise ToolError(str(exc)) from None
        return await self._debug_reply(session_id)

    async def _debug_reply(self, session_id: str) -> str:
        """A debug session's stop (or end) as JSON, the shape of the debug tools' replies."""
        session = self.debugger.get(session_id)
        if session.error is not None:
            raise ToolError(session.error)
        stop = await debug_view.reply(session, self.store, self.runner)
        return stop.model_dump_json(exclude_none=True, indent=1)

    async def _wait(self, ctx: Context, run_id: str, timeout: float | None) -> str:
        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        result = await self.asking(self.runner.wait(run_id, timeout, progress))
        session = result.session
        frames = await live_view.live_locals(self.sessions, session.id) if session is not None else None
        return await self.asking(
            anyio.to_thread.run_sync(partial(live_view.outcome, self.store, result, frames))
        )


def register(server: MCPServer, context: ToolContext) -> None:
    tools = LiveTools(context)
    server.add_tool(tools.evaluate_expression, annotations=RUNS_CODE)
    server.add_tool(tools.continue_execution, annotations=CONTROLS)
    server.add_tool(tools.close_session, annotations=RUNS_CODE)
    server.add_tool(tools.run_tests, annotations=RUNS_CODE)
    server.add_tool(tools.wait_for_stop, annotations=READ_ONLY)
