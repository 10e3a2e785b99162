"""Tools over recorded runs and their tests: list_sessions, get_run_summary, get_environment, list_tests,
get_test."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mcpdebug.replies import ProcessSession, RunEnvironment, RunSummary, SessionList, TestDetail, TestList
from mcpdebug.tools.annotations import READ_ONLY
from mcpdebug.tools.args import Example, RunId, Test
from mcpdebug.tools.context import ToolGroup, reads_store, reads_store_resource, tool
from mcpdebug.tools.server import ToolServer
from mcpdebug.views import debug as debug_view
from mcpdebug.views import environment as environment_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views import processes as processes_view
from mcpdebug.views import runs as runs_view


class RunTools(ToolGroup):
    group = "runs"

    @tool(READ_ONLY)
    @reads_store
    def list_sessions(self) -> SessionList:
        """Every session, newest first: test runs, held tests, debug sessions and process sessions.

        Per test run: id, kind, label (its command), status (running, finished, interrupted,
        crashed), exit status, start, duration, counts. Held tests and debug sessions (created,
        running, paused and why, terminated, closed) come with the session_id the live tools take;
        process sessions (services, log sources) with their label, status, pid and exit code.
        """
        held = self.sessions.held()
        debugged = self.debugger.listed()
        connected = self.sessions.connected_runs()
        process_sessions = self.store.process_sessions()
        runs = [r for r in self.store.runs() if r["kind"] != "process"]
        parts = (
            live_view.held_sessions(held),
            debug_view.sessions_text(debugged),
            processes_view.sessions_text(process_sessions, connected),
        )
        text = "".join(part + "\n\n" for part in parts if part) + runs_view.sessions(runs)
        reply = SessionList(
            held=live_view.held_rows(held),
            debug=[debug_view.session_info(s) for s in debugged],
            processes=[ProcessSession(**processes_view.row(s, connected)) for s in process_sessions],
            sessions=runs_view.session_rows(runs),
        )
        return reply.with_text(text)

    @tool(READ_ONLY)
    @reads_store
    def get_run_summary(self, run_id: RunId = "latest") -> RunSummary:
        """A run's outcome: command, duration, exit status, counts, and each failed or errored test.

        Each failure comes with its node id, phase and one-line message; then collection errors,
        tests still running, hangs, and the call to make next.
        """
        return runs_view.summary(self.store, lookup.run(self.store, run_id))

    @tool(READ_ONLY)
    @reads_store
    def get_environment(
        self,
        run_id: RunId = "latest",
        name: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Only variables whose name contains this (any case). Default: every variable.",
            ),
            Example('"TIERS"'),
        ] = None,
    ) -> RunEnvironment:
        """What a run ran in: its machine (CPUs usable, encodings, user), CI job, shards and environment.

        Every environment variable the run's process saw (secrets' values hidden); a run merged from
        CI shards lists the variables that differ between shards apart.
        """
        return environment_view.environment(self.store, lookup.run(self.store, run_id), name)

    @tool(READ_ONLY)
    @reads_store
    def list_tests(
        self,
        run_id: RunId = "latest",
        outcome: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Only tests with this outcome: passed, failed, error, skipped, xfailed, "
                'xpassed or running; comma-separate several ("failed,error"). Default: every test.',
            ),
            Example('"failed,error"'),
        ] = None,
        offset: Annotated[
            int,
            Field(ge=0, description="Tests to skip, for paging (a reply names the next offset). Default: 0."),
            Example("200"),
        ] = 0,
        limit: Annotated[
            int, Field(ge=1, le=1000, description="Most tests to list. Default: 200."), Example("50")
        ] = 200,
    ) -> TestList:
        """A run's tests in execution order, with outcome, duration, worker and message, paged."""
        row = lookup.run(self.store, run_id)
        tests = self.store.tests(row["run_id"], lookup.outcomes(outcome))
        total = sum(row["counts"].values())
        if offset and offset >= len(tests):
            raise lookup.NotFound(
                f"offset={offset} is past the end: run {row['run_id']} has {len(tests)} tests"
                + (f" with outcome {outcome}" if outcome else "")
                + (f" (offsets 0-{len(tests) - 1})." if tests else ".")
            )
        return runs_view.test_list(row, tests, total, outcome, offset, limit)

    @tool(READ_ONLY)
    @reads_store
    def get_test(
        self,
        test: Test,
        run_id: RunId = "latest",
        tail_lines: Annotated[
            int,
            Field(ge=0, le=2000, description="Lines of the test's output to end with. Default: 50."),
            Example("50"),
        ] = 50,
    ) -> TestDetail:
        """One test: its outcome per phase (setup, call, teardown), pytest's traceback and output tail.

        The output tail interleaves stdout, stderr, log records and warnings.
        """
        row = lookup.run(self.store, run_id)
        found = lookup.test(self.store, row, test)
        phases = self.store.phases(row["run_id"], found["nodeid"])
        output = output_view.output_tail(self.store, row, found["nodeid"], tail_lines)
        return runs_view.test_detail(row, found, phases, output)

    @reads_store_resource
    def runs_resource(self) -> str:
        return runs_view.sessions(self.store.runs())

    @reads_store_resource
    def run_resource(self, run_id: str) -> str:
        return runs_view.summary(self.store, lookup.run(self.store, run_id)).text

    def register_resources(self, server: ToolServer) -> None:
        server.resource(
            "mcpdebug://runs",
            name="runs",
            mime_type="text/plain",
            description="Every recorded run, newest first (as list_sessions).",
        )(self.runs_resource)
        server.resource(
            "mcpdebug://runs/{run_id}",
            name="run",
            mime_type="text/plain",
            description='One run\'s summary (as get_run_summary); run_id may be "latest".',
        )(self.run_resource)
