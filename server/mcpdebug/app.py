"""The MCP server: built here, populated by the tools modules (one per concern, see `mcpdebug.tools`).

Every tool returns plain text that is complete on its own (the SDK also mirrors it as
``structuredContent``), so an agent sees the same thing whichever form its client shows it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations

from mcpdebug.debug.manager import Debugger
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.report import entries
from mcpdebug.store import Store
from mcpdebug.tools import debug, diagnosis, failures, hangs, live, output, processes, runs
from mcpdebug.tools.context import ToolContext, side_effect

INSTRUCTIONS = """\
pytest-mcpdebug records pytest runs (`pytest --mcp-debug`) in this project: each test's outcome per
phase, its failure text and everything it printed or logged. Start with list_sessions or
get_run_summary (run_id="latest"), then get_test for a failing test's traceback and output tail.
Read more output with get_output (line ranges, negative = from the end) and find things in it with
search_output (Python regex, with context). Runs in progress are visible live: a test listed as
RUNNING is still executing, and its output so far is readable.
To investigate a failure alive, call run_tests(args=[...], break_on_failure=True): it returns when a
test fails, with a session_id; the failing test is held with its frames alive, so evaluate_expression
runs code in them and get_stack_trace / get_local_variables / get_variables take that session_id.
continue_execution resumes the run (then wait_for_stop), close_session stops it.
Services a test talks to can be process sessions: start_process runs one (or `mcpdebug run -- cmd` in
a shell); get_logs(labels=[its label, a run id]) merges its lines with a run's in time order;
control_process restarts or signals it, send_stdin writes to it.
To debug (debugpy): run_tests(args=[...], debug=True, breakpoints=[{"file", "line", "condition"}]) or, for
a script, create_debug_session + set_breakpoint + start_debugging; each returns at the first stop with
its session_id. step_over / step_into / step_out / continue_execution / pause_execution return the next
stop; the inspection tools and evaluate_expression take the same session_id.
When the faulty line is not on the failing stack: get_suspects ranks the lines failing tests ran and
passing ones did not (runs recorded with --mcp-debug-coverage); trace_test(test=...) re-runs a test
recording how its values changed and get_history says where each came from; get_run_summary says
whether each failure is new, known flaky or failing since an earlier run (list_flaky, get_test_history)."""

READ_ONLY_NOTE = """
This server is read-only (`mcpdebug serve --read-only`): it reads recorded runs; nothing that runs
code or changes a process (run_tests, detect_hang, evaluate_expression, start_process, ...) is offered."""

TOOL_MODULES = (runs, failures, hangs, live, output, processes, debug, diagnosis)


def build_server(
    store: Store,
    sessions: Sessions | None = None,
    runner: Runner | None = None,
    processes: ProcessManager | None = None,
    debugger: Debugger | None = None,
    *,
    read_only: bool = False,
    token_verifier: TokenVerifier | None = None,
) -> DebugServer:
    """The MCP server over ``store``; ``sessions``, ``runner``, ``processes`` and ``debugger`` (from
    `serve`) make the live, process and debug tools work.

    ``read_only`` leaves out every tool that runs code or changes a process; ``token_verifier``
    makes the HTTP transport require its bearer token on every request (see `mcpdebug.http_auth`).
    """
    server = DebugServer(
        "mcpdebug",
        read_only=read_only,
        instructions=INSTRUCTIONS + (READ_ONLY_NOTE if read_only else ""),
        version=_version(),
        token_verifier=token_verifier,
        # The SDK turns its bearer middleware on with auth settings; the token is static, not
        # issued by OAuth, so no authorization server or resource metadata is advertised and
        # issuer_url (a required field) is never served.
        auth=AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)  # type: ignore[arg-type]
        if token_verifier is not None
        else None,
    )
    live_sessions = sessions if sessions is not None else Sessions(store)
    test_runner = runner if runner is not None else Runner(store, live_sessions, url=None, token=None)
    context = ToolContext(
        store=store,
        sessions=live_sessions,
        runner=test_runner,
        processes=processes
        if processes is not None
        else ProcessManager(store, live_sessions, url=None, token=None),
        debugger=debugger if debugger is not None else Debugger(store, live_sessions, test_runner),
    )
    for module in TOOL_MODULES:
        module.register(server, context)
    return server


class DebugServer(MCPServer):
    """An MCP server whose tools are offered by their annotations, whatever module adds them.

    A tool that is not annotated read-only says what it does first in its description, and a
    read-only server does not add it at all: it is neither listed nor callable.
    """

    def __init__(self, name: str, *, read_only: bool, **options: Any) -> None:
        super().__init__(name, **options)
        self.read_only = read_only
        self.withheld: list[str] = []
        self._calls = itertools.count(1)

    def add_tool(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        **options: Any,
    ) -> None:
        effect = side_effect(annotations)
        if effect is not None:
            if self.read_only:
                self.withheld.append(name or fn.__name__)
                return
            text = (description or fn.__doc__ or "").lstrip()
            if not text.startswith(f"[{effect}]"):
                description = f"[{effect}] {text}"
        super().add_tool(
            fn, name=name, title=title, description=description, annotations=annotations, **options
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The call, between seed 000's tool:call and its tool:response or tool:error log entry."""
        call, started = next(self._calls), time.perf_counter()
        entries.tool_call(call, name, arguments)
        try:
            result = await self._answer(name, arguments, context)
        except BaseException as exc:  # cancelled too: the client went away, or the server is stopping
            why = str(exc) or type(exc).__name__
            why = why if isinstance(exc, Exception) else f"cancelled ({why})"
            entries.tool_error(call, name, arguments, why, time.perf_counter() - started)
            raise
        seconds = time.perf_counter() - started
        if isinstance(result, CallToolResult) and result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            entries.tool_error(call, name, arguments, text, seconds)
        else:
            entries.tool_response(call, name, arguments, _reply(result), seconds)
        return result

    async def _answer(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        if name in self.withheld:
            raise ToolError(
                f"{name} is not offered: this server is read-only (mcpdebug serve --read-only) and "
                f"{name} runs code or changes a process; the tools listed by tools/list read recorded runs."
            )
        return await super().call_tool(name, arguments, context)


def _reply(result: CallToolResult | InputRequiredResult) -> Any:
    """What a tool answered, for the log: its structured content, else its text (cleaned and cut
    by the log's writer thread)."""
    if isinstance(result, CallToolResult):
        if result.structured_content is not None:
            return result.structured_content
        return {"text": " ".join(getattr(c, "text", "") for c in result.content)}
    return {"inputRequired": True}


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
