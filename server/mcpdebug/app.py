"""The MCP server: built here, populated by the tools modules (one per concern, see `mcpdebug.tools`).

Every tool returns plain text that is complete on its own (the SDK also mirrors it as
``structuredContent``), so an agent sees the same thing whichever form its client shows it.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcpdebug.debug.manager import Debugger
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from mcpdebug.tools import debug, failures, hangs, live, output, runs
from mcpdebug.tools.context import ToolContext

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
To debug (debugpy): run_tests(args=[...], debug=True, breakpoints=[{"file", "line", "condition"}]) or, for
a script, create_debug_session + set_breakpoint + start_debugging; each returns at the first stop with
its session_id. step_over / step_into / step_out / continue_execution / pause_execution return the next
stop; the inspection tools and evaluate_expression take the same session_id."""

TOOL_MODULES = (runs, failures, hangs, live, output, debug)


def build_server(
    store: Store,
    sessions: Sessions | None = None,
    runner: Runner | None = None,
    debugger: Debugger | None = None,
) -> MCPServer:
    """The MCP server over ``store``; ``sessions``, ``runner`` and ``debugger`` (from `serve`) make the
    live and debug tools work."""
    server: MCPServer = MCPServer("mcpdebug", instructions=INSTRUCTIONS, version=_version())
    live_sessions = sessions if sessions is not None else Sessions(store)
    test_runner = runner if runner is not None else Runner(store, live_sessions, url=None, token=None)
    context = ToolContext(
        store=store,
        sessions=live_sessions,
        runner=test_runner,
        debugger=debugger if debugger is not None else Debugger(store, live_sessions, test_runner),
    )
    for module in TOOL_MODULES:
        module.register(server, context)
    return server


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
