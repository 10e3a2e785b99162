"""Tools over recorded runs and their tests: list_sessions, get_run_summary, list_tests, get_test."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcpdebug.tools.context import READ_ONLY, ToolContext, ToolGroup, reads_store, reads_store_resource
from mcpdebug.views import debug as debug_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views import processes as processes_view
from mcpdebug.views import runs as runs_view


class RunTools(ToolGroup):
    @reads_store
    def list_sessions(self) -> str:
        """Every recorded session (test run), newest first: id, kind, label, status, start time,
        duration and test counts. Status is running, finished, interrupted or crashed. Tests held
        alive at a failure right now, and debug sessions with their state (created, running, paused and
        why, terminated, closed and why), are listed first, with the session_id the live tools take; then
        process sessions (services and log sources): label, mode, status (running, stopped, crashed,
        restarting, disconnected), pid, exit code, command, cwd, start and exit time, lines stored."""
        held = live_view.held_sessions(self.sessions.held())
        debugged = debug_view.sessions_text(self.debugger.listed())
        process_sessions = self.store.process_sessions()
        processes = processes_view.sessions_text(process_sessions, self.sessions.connected_runs())
        runs = [r for r in self.store.runs() if r["kind"] != "process"]
        live = (held, debugged, processes)
        return "".join(part + "\n\n" for part in live if part) + runs_view.sessions(runs)

    @reads_store
    def get_run_summary(self, run_id: str = "latest") -> str:
        """A run's command, duration, exit status and counts, and each failed or errored test with its
        node id, phase and one-line message. run_id: an id from list_sessions, or "latest"."""
        return runs_view.summary(self.store, lookup.run(self.store, run_id))

    @reads_store
    def list_tests(
        self, run_id: str = "latest", outcome: str | None = None, offset: int = 0, limit: int = 200
    ) -> str:
        """Node ids of a run's tests with outcome, duration and worker, in execution order.
        outcome filters: passed, failed, error, skipped, xfailed, xpassed or running (comma-separate
        several, e.g. "failed,error"). offset/limit page through long lists."""
        row = lookup.run(self.store, run_id)
        tests = self.store.tests(row["run_id"], lookup.outcomes(outcome))
        total = sum(row["counts"].values())
        return runs_view.test_list(row, tests, total, outcome, max(0, offset), max(1, min(limit, 1000)))

    @reads_store
    def get_test(self, test: str, run_id: str = "latest", tail_lines: int = 50) -> str:
        """One test: outcome per phase (setup/call/teardown), failure text (traceback), and the last
        tail_lines lines of its output (stdout, stderr, log records and warnings, interleaved).
        test: a node id as pytest prints it (or a unique part of one)."""
        row = lookup.run(self.store, run_id)
        found = lookup.test(self.store, row, test)
        phases = self.store.phases(row["run_id"], found["nodeid"])
        output = output_view.output_tail(self.store, row, found["nodeid"], max(0, min(tail_lines, 2000)))
        return runs_view.test_detail(row, found, phases, output)

    @reads_store_resource
    def runs_resource(self) -> str:
        return runs_view.sessions(self.store.runs())

    @reads_store_resource
    def run_resource(self, run_id: str) -> str:
        return runs_view.summary(self.store, lookup.run(self.store, run_id))


def register(server: MCPServer, context: ToolContext) -> None:
    tools = RunTools(context)
    for tool in (tools.list_sessions, tools.get_run_summary, tools.list_tests, tools.get_test):
        server.add_tool(tool, annotations=READ_ONLY)
    server.resource(
        "mcpdebug://runs",
        name="runs",
        mime_type="text/plain",
        description="Every recorded run, newest first (as list_sessions).",
    )(tools.runs_resource)
    server.resource(
        "mcpdebug://runs/{run_id}",
        name="run",
        mime_type="text/plain",
        description='One run\'s summary (as get_run_summary); run_id may be "latest".',
    )(tools.run_resource)
