"""Diagnosis beyond the failing stack: get_suspects (coverage-based fault localisation), trace_test and
get_history (how a failing test's values got their state), get_test_history and list_flaky.

Typed replies (`mcpdebug.replies.diagnosis`): each carries its whole report in ``text``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpdebug.replies.diagnosis import FlakyList, Suspects, TestHistory, TraceReply, ValueHistoryReply
from mcpdebug.tools.annotations import READ_ONLY, RUNS_CODE
from mcpdebug.tools.args import RunId, Test
from mcpdebug.tools.context import ToolGroup, reads_store, tool
from mcpdebug.views import flaky as flaky_view
from mcpdebug.views import import_problem, lookup, value_history
from mcpdebug.views import suspects as suspects_view


class DiagnosisTools(ToolGroup):
    group = "diagnosis"

    @tool(READ_ONLY)
    @reads_store
    def get_suspects(
        self,
        run_id: RunId = "latest",
        top: Annotated[int, Field(ge=1, le=200, description="How many suspects to list. Default: 10.")] = 10,
        level: Annotated[
            Literal["statement", "function"],
            Field(description='Rank lines ("statement", the default) or whole functions ("function").'),
        ] = "statement",
    ) -> Suspects:
        """Which lines (or functions) most likely hold the bug, from a run recorded with coverage.

        Ranked by how much more the run's failing tests ran them than its passing tests (Ochiai;
        DStar orders ties). Each with file, line, function, source, score and how many failing and
        passing tests ran it; ties are explained. Needs --mcp-debug-coverage.
        """
        return suspects_view.suspects(self.store, lookup.run(self.store, run_id), top, level)

    @tool(RUNS_CODE)
    async def trace_test(
        self,
        ctx: Context,
        test: Test,
        run_id: RunId = "latest",
        watch: Annotated[
            list[str] | None,
            Field(
                description="Record only these variable names (faster on long tests). Default: every local."
            ),
        ] = None,
        timeout: Annotated[
            float, Field(gt=0, le=3600, description="Seconds to wait for the traced run. Default: 120.")
        ] = 120.0,
    ) -> TraceReply:
        """Re-run one test with line tracing and say how the failing line's values got their state.

        Records how its locals changed in the project's code: each operand, where it was set, and
        the function whose return produced it, back to the lines that computed it. Says so when the
        traced run's outcome differs (flaky, time-dependent). get_history reads the trace again.
        """

        def prepare() -> tuple[dict[str, Any], dict[str, Any]]:
            lookup.refresh(self.store)
            run = lookup.run(self.store, run_id)
            return run, lookup.test(self.store, run, test)

        try:
            run, found = await anyio.to_thread.run_sync(prepare)
        except lookup.NotFound as exc:
            raise ToolError(str(exc)) from None
        args = [found["nodeid"], "--mcp-debug-trace"]
        if watch:
            args += ["--mcp-debug-trace-watch", ",".join(watch)]
        managed = await self.asking(
            self.runner.start(args, run["rootdir"] or run["cwd"] or None, None, False)
        )

        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        result = await self.asking(self.runner.wait(managed.run_id, timeout, progress))
        if result.kind == "waiting":
            raise ToolError(
                f"The traced run {managed.run_id} is still going after {timeout:g} s; wait_for_stop(id="
                f'"{managed.run_id}") waits for it, then get_history(test="{found["nodeid"]}").'
            )

        def reply() -> TraceReply:
            lookup.refresh(self.store)
            traced = self.store.trace(managed.run_id, found["nodeid"])
            if traced is None:
                tail = "\n".join(list(managed.terminal)[-15:])
                rerun = self.store.run(managed.run_id)
                imports = import_problem.advice(self.store, rerun, managed.terminal, managed.cwd)
                raise lookup.NotFound(
                    (f"{imports}\n" if imports else "")  # first: an error reply is cut at 2,000 characters
                    + f"The traced run {managed.run_id} (exit status {managed.returncode}) recorded no trace "
                    "of "
                    f"{found['nodeid']}: the test was not collected or pytest failed to start. Its last "
                    f"lines:\n{tail}"
                )
            return value_history.trace_reply(self.store, traced, found)

        try:
            return await anyio.to_thread.run_sync(reply)
        except lookup.NotFound as exc:
            raise ToolError(str(exc)) from None

    @tool(READ_ONLY)
    @reads_store
    def get_history(
        self,
        test: Test,
        name: Annotated[
            str | None,
            Field(
                min_length=1,
                description="A variable: every assignment of it, old -> new, with the call that produced "
                "each value. Default: the failing line's operands, traced back to where they were set.",
            ),
        ] = None,
        run_id: Annotated[
            str,
            Field(
                min_length=1,
                description='The run trace_test started (its reply names it), or "latest" for the test\'s '
                'newest trace. Default: "latest".',
            ),
        ] = "latest",
    ) -> ValueHistoryReply:
        """How a traced test's values got their state ("how did `total` get this value?").

        From the trace trace_test recorded: each assignment with line, function, old -> new, and for
        the failing line's operands the last place each was set, followed into the functions that
        returned them.
        """
        found = value_history.find_trace(self.store, test, run_id)
        return value_history.history(self.store, found, name)

    @tool(READ_ONLY)
    @reads_store
    def get_test_history(
        self,
        test: Test,
        limit: Annotated[
            int, Field(ge=1, le=500, description="Records to list, newest first. Default: 20.")
        ] = 20,
    ) -> TestHistory:
        """A test's outcome in each recorded run, newest first, and whether its failure is new.

        Each with outcome, duration, phase and message of a failure, and the code version (commit,
        uncommitted changes); kept after the runs' output is evicted. Says whether its latest failure
        is new, known flaky, or failing since an earlier run.
        """
        return flaky_view.test_history(self.store, test, limit)

    @tool(READ_ONLY)
    @reads_store
    def list_flaky(
        self,
        runs: Annotated[
            int, Field(ge=1, le=1000, description="How many recent runs to look at. Default: 50.")
        ] = 50,
    ) -> FlakyList:
        """Tests that both passed and failed on the same code version in recent runs.

        The same version: the same commit plus the same uncommitted changes. Each with counts and its
        last failure.
        """
        return flaky_view.flaky_list(self.store, runs)
