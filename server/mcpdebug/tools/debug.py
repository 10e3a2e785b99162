"""Debugging through debugpy (seed 002): sessions, breakpoints, stepping, pause and watches.

A debug session debugs a script (create_debug_session, start_debugging) or a pytest run
(run_tests(debug=True), in `live`); its id is also the run id of what it debugs. The inspection
tools (get_stack_trace, get_local_variables, evaluate_expression, ...) and continue_execution,
wait_for_stop and close_session take a debug session's id too. Every tool that lets the debuggee run
returns its next stop, or after ``wait`` seconds says it is still running and what to call.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, ClassVar, Literal, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from mcpdebug.debug import DebugError
from mcpdebug.debug.breakpoints import BreakpointError
from mcpdebug.debug.dap import DapError
from mcpdebug.debug.session import EXCEPTION_FILTERS, DebugSession
from mcpdebug.debug.watches import WatchError
from mcpdebug.live.sessions import SessionError
from mcpdebug.tools.annotations import CONTROLS, READ_ONLY, RUNS_CODE
from mcpdebug.tools.context import ToolGroup, tool
from mcpdebug.views import debug as debug_view

T = TypeVar("T")

SessionId = Annotated[
    str,
    Field(
        min_length=1,
        description="A debug session's id, from create_debug_session, run_tests(debug=True) or "
        "list_debug_sessions.",
    ),
]
Wait = Annotated[
    float,
    Field(
        description="Seconds to wait for the debuggee to stop (default 10); if it has not, the reply says "
        "it is running and wait_for_stop waits again.",
        ge=0,
        le=600,
    ),
]
BreakpointId = Annotated[
    str,
    Field(min_length=1, description="A breakpoint's id (bp1, ...) from set_breakpoint or list_breakpoints."),
]


class LaunchArgs(BaseModel):
    stop_on_entry: bool = Field(default=False, description="Stop at the script's first line.")
    just_my_code: bool = Field(
        default=True, description="Step and stop only in the project's code, not in libraries."
    )


def reply(model: BaseModel) -> CallToolResult:
    """A typed reply: ``structuredContent`` is the model, the text its ``text`` (a report) or its JSON."""
    data = model.model_dump(mode="json", exclude_none=True)
    report = data.get("text")
    text = report if isinstance(report, str) else json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


class DebugTools(ToolGroup):
    group: ClassVar[str] = "debug"

    @tool(CONTROLS)
    async def create_debug_session(
        self,
        language: Annotated[
            Literal["python"], Field(description='The language to debug: only "python" (the default).')
        ] = "python",
        name: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="A name to tell sessions apart (default Debug-<time>).",
            ),
        ] = None,
        executable_path: Annotated[
            str | None,
            Field(
                min_length=1,
                description="The Python interpreter to run the script with (it needs debugpy); default: "
                "the server's.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, debug_view.SessionCreated]:
        """Create a debug session for a Python script, in state "created".

        set_breakpoint, add_watch and set_exception_breakpoints may be called before start_debugging
        runs it.
        """
        session = self._do(lambda: self.debugger.create(language, name, executable_path))
        return reply(
            debug_view.SessionCreated(
                sessionId=session.id,
                name=session.name,
                state=session.state,
                executable=session.executable,
                message=f"Created python debug session: {session.name}. Next: set_breakpoint, then "
                f'start_debugging(session_id="{session.id}", script_path=...).',
            )
        )

    @tool(RUNS_CODE)
    async def start_debugging(
        self,
        session_id: SessionId,
        script_path: Annotated[
            str,
            Field(
                min_length=1,
                description='The script to run (relative to the project folder), or "-m package.module".',
            ),
        ],
        args: Annotated[list[str] | None, Field(description="Command-line arguments for the script.")] = None,
        dap_launch_args: Annotated[
            LaunchArgs | None, Field(description="stop_on_entry, just_my_code.")
        ] = None,
        wait: Wait = 10.0,
    ) -> Annotated[CallToolResult, debug_view.ExecutionReply]:
        """Run the session's script under debugpy and return at its first stop or its end.

        A stop is a breakpoint, an exception or the entry; the session's interpreter runs it. Its
        stdout and stderr are stored: get_output(run_id=session_id).
        """
        session = self._session(session_id)
        launch = dap_launch_args or LaunchArgs()
        await self._await(
            self.debugger.start_script(
                session,
                script_path,
                args or [],
                stop_on_entry=launch.stop_on_entry,
                just_my_code=launch.just_my_code,
            )
        )
        await session.wait(0, wait)
        return await self._stopped(session)

    @tool(READ_ONLY)
    async def list_debug_sessions(self) -> Annotated[CallToolResult, debug_view.DebugSessionList]:
        """Debug sessions of this server: open ones first, then recently closed ones with why.

        Each with id, name, kind (script or tests), state (created, starting, running, paused,
        terminated, closed) and where it is.
        """
        rows = [debug_view.session_info(s) for s in self.debugger.listed()]
        return reply(debug_view.DebugSessionList(sessions=rows, count=len(rows)))

    @tool(CONTROLS)
    async def close_debug_session(
        self, session_id: SessionId
    ) -> Annotated[CallToolResult, debug_view.SessionClosed]:
        """End a debug session: a script and what it started end within 5 s.

        A test run stops after its current test, which ends as it would (or fails as interrupted
        after 2 s); its outcome is recorded.
        """
        session = await self._await(self.debugger.close(session_id))
        return reply(_closed(session))

    @tool(RUNS_CODE)  # a condition or log message runs code in the debuggee
    async def set_breakpoint(
        self,
        session_id: SessionId,
        file: Annotated[
            str, Field(min_length=1, description="Source file, absolute or relative to the project folder.")
        ],
        line: Annotated[
            int, Field(description="1-based line; set_breakpoint on a line that has one updates it.", ge=1)
        ],
        condition: Annotated[
            str | None, Field(min_length=1, description="Python expression: stop only when it is true.")
        ] = None,
        hit_condition: Annotated[
            str | None,
            Field(min_length=1, description='Stop on the Nth hit: "5", ">= 3", "% 2" (every 2nd).'),
        ] = None,
        log_message: Annotated[
            str | None,
            Field(
                description="Logpoint: log this instead of stopping; {expr} is replaced, e.g. "
                '"total is {total}".'
            ),
        ] = None,
    ) -> Annotated[CallToolResult, debug_view.BreakpointInfo]:
        """Set a breakpoint (or logpoint) and say where debugpy bound it, with the source around it.

        Before the debuggee starts it is pending; a bad condition is refused (conditionError).
        Logpoint lines are stored as the session's output (search_output).
        """
        session = self._session(session_id)
        bp, _ = self._do(lambda: session.breakpoints.add(file, line, condition, hit_condition, log_message))
        await self._await(session.sync_breakpoints(bp.file))
        return reply(debug_view.breakpoint_info(bp, with_context=True))

    @tool(READ_ONLY)
    async def list_breakpoints(
        self, session_id: SessionId
    ) -> Annotated[CallToolResult, debug_view.BreakpointList]:
        """A session's breakpoints and its exception filters.

        Each breakpoint with id, file, bound line, verified, enabled, condition and hits.
        """
        session = self._session(session_id)
        rows = [debug_view.breakpoint_info(b) for b in session.breakpoints.all()]
        return reply(
            debug_view.BreakpointList(
                sessionId=session.id,
                breakpoints=rows,
                exceptionFilters=session.exception_filters,
                count=len(rows),
            )
        )

    @tool(CONTROLS)
    async def remove_breakpoint(
        self, session_id: SessionId, breakpoint_id: BreakpointId
    ) -> Annotated[CallToolResult, debug_view.BreakpointList]:
        """Remove a breakpoint; returns the session's remaining breakpoints."""
        session = self._session(session_id)
        removed = self._do(lambda: session.breakpoints.remove(breakpoint_id))
        await self._await(session.sync_breakpoints(removed.file))
        return await self.list_breakpoints(session_id)

    @tool(CONTROLS)
    async def toggle_breakpoint(
        self,
        session_id: SessionId,
        breakpoint_id: BreakpointId,
        enabled: Annotated[bool, Field(description="True to turn it on, False to turn it off (it is kept).")],
    ) -> Annotated[CallToolResult, debug_view.BreakpointInfo]:
        """Turn a breakpoint on or off; it keeps its id, place and condition."""
        session = self._session(session_id)
        bp = self._do(lambda: session.breakpoints.get(breakpoint_id))
        bp.enabled = enabled
        await self._await(session.sync_breakpoints(bp.file))
        return reply(debug_view.breakpoint_info(bp))

    @tool(CONTROLS)
    async def set_exception_breakpoints(
        self,
        session_id: SessionId,
        filters: Annotated[
            list[str],
            Field(
                description='Where to stop on exceptions: "raised" (every raise), "uncaught" (not in a test '
                'run: pytest catches all), "userUnhandled" '
                "(leaving the project's code: the default, before the frames unwind); [] for none."
            ),
        ],
    ) -> Annotated[CallToolResult, debug_view.ExceptionFilters]:
        """Choose which exceptions stop the debuggee."""
        session = self._session(session_id)
        aliases = {f.lower().replace("_", "").replace("-", ""): f for f in EXCEPTION_FILTERS}
        chosen = [aliases.get(f.lower().replace("_", "").replace("-", "")) for f in filters]
        if None in chosen:
            raise ToolError(f"Unknown filter in {filters}: use {', '.join(EXCEPTION_FILTERS)}.")
        session.exception_filters = [f for f in dict.fromkeys(chosen) if f]
        await self._await(session.sync_exception_filters())
        return reply(
            debug_view.ExceptionFilters(
                sessionId=session.id,
                filters=session.exception_filters,
                message="Set." if session.attached else "Pending: applied when the debuggee starts.",
            )
        )

    @tool(CONTROLS)
    async def step_over(
        self, session_id: SessionId, wait: Wait = 10.0
    ) -> Annotated[CallToolResult, debug_view.ExecutionReply]:
        """Run the current line (calls included) and stop at the next one; returns the new stop."""
        return await self._execute(session_id, "next", wait)

    @tool(CONTROLS)
    async def step_into(
        self, session_id: SessionId, wait: Wait = 10.0
    ) -> Annotated[CallToolResult, debug_view.ExecutionReply]:
        """Step into the call on the current line (or to the next line); returns the new stop."""
        return await self._execute(session_id, "stepIn", wait)

    @tool(CONTROLS)
    async def step_out(
        self, session_id: SessionId, wait: Wait = 10.0
    ) -> Annotated[CallToolResult, debug_view.ExecutionReply]:
        """Run until the current function returns to its caller; returns the new stop."""
        return await self._execute(session_id, "stepOut", wait)

    @tool(CONTROLS)
    async def pause_execution(
        self, session_id: SessionId, wait: Wait = 10.0
    ) -> Annotated[CallToolResult, debug_view.ExecutionReply]:
        """Pause a running debuggee (also one stuck in a loop) where it is; returns the stop."""
        session = self._session(session_id)
        await self._await(session.pause(wait))
        return await self._stopped(session)

    @tool(RUNS_CODE)
    async def add_watch(
        self,
        session_id: SessionId,
        expression: Annotated[
            str,
            Field(min_length=1, description="Python expression, evaluated in the top frame at every stop."),
        ],
    ) -> Annotated[CallToolResult, debug_view.WatchInfo]:
        """Watch an expression: every stop's reply lists the watches whose value changed (old -> new)."""
        session = self._session(session_id)
        watch = await self._await(session.add_watch(expression))
        return reply(debug_view.watch_info(watch))

    @tool(CONTROLS)
    async def remove_watch(
        self,
        session_id: SessionId,
        watch_id: Annotated[str, Field(min_length=1, description="A watch's id (w1, ...).")],
    ) -> Annotated[CallToolResult, debug_view.WatchList]:
        """Stop watching an expression; returns the remaining watches."""
        session = self._session(session_id)
        self._do(lambda: session.watches.remove(watch_id))
        return await self.list_watches(session_id)

    @tool(READ_ONLY)
    async def list_watches(self, session_id: SessionId) -> Annotated[CallToolResult, debug_view.WatchList]:
        """A session's watches with their value at the last stop."""
        session = self._session(session_id)
        rows = [debug_view.watch_info(w) for w in session.watches.all()]
        return reply(debug_view.WatchList(sessionId=session.id, watches=rows, count=len(rows)))

    # Helpers --------------------------------------------------------------------------------------

    async def _execute(self, session_id: str, command: str, wait: float) -> CallToolResult:
        session = self._session(session_id)
        await self._await(session.execute(command, wait))
        return await self._stopped(session)

    async def _stopped(self, session: DebugSession) -> CallToolResult:
        if session.error is not None:
            raise ToolError(session.error)
        return reply(await debug_view.reply(session, self.store, self.runner))

    def _session(self, session_id: str) -> DebugSession:
        return self._do(lambda: self.debugger.get(session_id))

    @staticmethod
    def _do(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (DebugError, BreakpointError, WatchError, SessionError) as exc:
            raise ToolError(str(exc)) from None

    async def _await(self, pending: Awaitable[T]) -> T:
        try:
            return await pending
        except (DebugError, BreakpointError, WatchError, SessionError) as exc:
            raise ToolError(str(exc)) from None
        except DapError as exc:
            raise ToolError(f"debugpy: {exc}; list_debug_sessions shows the session's state.") from None


def _closed(session: DebugSession) -> debug_view.SessionClosed:
    code = f" (exit code {session.exit_code})" if session.exit_code is not None else ""
    return debug_view.SessionClosed(
        success=True,
        sessionId=session.id,
        exitCode=session.exit_code,
        message=f"Closed debug session {session.id}{code}; its output stays readable: "
        f'get_output(run_id="{session.id}").',
    )
