"""The MCP server: built here, populated by the tools modules (one per concern, see `mcpdebug.tools`).

Every tool returns plain text that is complete on its own (the SDK also mirrors it as
``structuredContent``), so an agent sees the same thing whichever form its client shows it.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from mcpdebug.tools import failures, hangs, live, output, processes, runs
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
Services a test talks to can be process sessions: start_process runs one (or `mcpdebug run -- cmd` in
a shell); get_logs(labels=[its label, a run id]) merges its lines with a run's in time order;
control_process restarts or signals it, send_stdin writes to it."""

TOOL_MODULES = (runs, failures, hangs, live, output, processes)


def build_server(
    store: Store,
    sessions: Sessions | None = None,
    runner: Runner | None = None,
    processes: ProcessManager | None = None,
) -> MCPServer:
    """The MCP server over ``store``; ``sessions``, ``runner`` and ``processes`` (from `serve`) make the
    live tools work."""
    server: MCPServer = MCPServer("mcpdebug", instructions=INSTRUCTIONS, version=_version())
    live_sessions = sessions if sessions is not None else Sessions(store)
    context = ToolContext(
        store=store,
        sessions=live_sessions,
        runner=runner if runner is not None else Runner(store, live_sessions, url=None, token=None),
        processes=processes
        if processes is not None
        else ProcessManager(store, live_sessions, url=None, token=None),
    )
    for module in TOOL_MODULES:
        module.register(server, context)
    return server


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
