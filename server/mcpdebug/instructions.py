"""What the server says of itself at initialize: its version and its instructions to the agent.

Apart from the server so that `mcpdebug.stdio_start` answers initialize with them before the
server (and the MCP SDK's server classes) are loaded.
"""

from __future__ import annotations

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
localize(budget=...) re-runs the failing tests with small changes of the top suspects;
get_run_summary says whether each failure is new, known flaky or failing since an earlier run
(list_flaky, get_test_history). Not every tool named here is listed at first: enable_tools(groups=[...])
lists a group (debug, processes, diagnosis, ...), and calling a tool by its name lists its group."""

READ_ONLY_NOTE = """
This server is read-only (`mcpdebug serve --read-only`): it reads recorded runs; nothing that runs
code or changes a process (run_tests, detect_hang, evaluate_expression, start_process, ...) is offered."""


def instructions(read_only: bool) -> str:
    return INSTRUCTIONS + (READ_ONLY_NOTE if read_only else "")


def version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
