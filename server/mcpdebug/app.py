"""The MCP server: built here, populated by the tool groups (one module per concern, see `mcpdebug.tools`).

Every tool returns a typed reply (`mcpdebug.replies`): the same information as ``structuredContent``
and as text, so an agent sees all of it whichever form its client shows it.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings

from mcpdebug.debug.manager import Debugger
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from mcpdebug.tools import debug, diagnosis, failures, guide, hangs, live, localize, output, processes, runs
from mcpdebug.tools.context import ToolContext, ToolGroup
from mcpdebug.tools.server import ToolServer

INSTRUCTIONS = """\
pytest-mcpdebug records pytest runs (`pytest --mcp-debug`) in this project: each test's outcome per
phase, its failure snapshot (frames, locals, source) and everything it printed or logged. Start with
get_run_summary (or list_sessions), then get_failure for a failure's frames and locals, get_hang for
a test that hung; get_output and search_output read a test's output. run_tests(args=[...],
break_on_failure=True) runs tests and holds the first failing one alive: evaluate_expression and the
frame tools then take its session_id. The prompts investigate_failure, diagnose_hang and triage_run
give these steps with the ids filled in. Services a test talks to can be process sessions:
start_process runs one (or `mcpdebug run -- cmd` in a shell); get_logs(labels=[its label, a run id])
merges its lines with a run's in time order; control_process restarts or signals it, send_stdin
writes to it. To debug (debugpy): run_tests(args=[...], debug=True, breakpoints=[{"file", "line",
"condition"}]) or, for a script, create_debug_session + set_breakpoint + start_debugging; each returns
at the first stop with its session_id. step_over / step_into / step_out / continue_execution /
pause_execution return the next stop; the inspection tools and evaluate_expression take the same
session_id. When the faulty line is not on the failing stack: get_suspects ranks the lines failing
tests ran and passing ones did not (runs recorded with --mcp-debug-coverage); trace_test(test=...)
re-runs a test recording how its values changed and get_history says where each came from;
get_run_summary says whether each failure is new, known flaky or failing since an earlier run
(list_flaky, get_test_history)."""

READ_ONLY_NOTE = """
This server is read-only (`mcpdebug serve --read-only`): it reads recorded runs; nothing that runs
code or changes a process (run_tests, detect_hang, evaluate_expression, start_process, ...) is offered."""

GROUPS: dict[str, type[ToolGroup]] = {
    group.group: group
    for group in (
        runs.RunTools,
        failures.FailureTools,
        hangs.HangTools,
        live.LiveTools,
        output.OutputTools,
        processes.ProcessTools,
        debug.DebugTools,
        diagnosis.DiagnosisTools,
        localize.LocalizeTools,
    )
}
"""The tool groups by the name `mcpdebug serve --tools` selects them by."""

DebugServer = ToolServer
"""The server class (`mcpdebug.tools.server`), by the name `serve` knows it."""


def build_server(
    store: Store,
    sessions: Sessions | None = None,
    runner: Runner | None = None,
    processes: ProcessManager | None = None,
    debugger: Debugger | None = None,
    *,
    groups: Iterable[str] | None = None,
    read_only: bool = False,
    token_verifier: TokenVerifier | None = None,
) -> ToolServer:
    """The MCP server over ``store`` with the tools of ``groups`` (default: every group);
    ``sessions``, ``runner``, ``processes`` and ``debugger`` (from `serve`) make the live, process and
    debug tools work.

    ``read_only`` leaves out every tool that runs code or changes a process (a filter on the tools'
    annotations, beside the choice of groups); ``token_verifier`` makes the HTTP transport require
    its bearer token on every request (see `mcpdebug.http_auth`).
    """
    server = ToolServer(
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
    chosen = list(GROUPS) if groups is None else list(groups)
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown:
        raise ValueError(
            f"unknown tool group {', '.join(map(repr, unknown))}; the groups are {', '.join(GROUPS)}"
        )
    for name in chosen:
        GROUPS[name](context).register(server)
    guide.register(server, context)
    return server


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
