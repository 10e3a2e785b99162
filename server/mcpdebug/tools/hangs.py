"""Tools about hangs: why a recorded test hung (get_hang), and whether something hangs (detect_hang)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpdebug.processes import hang_detection
from mcpdebug.processes.test_runs import project_of
from mcpdebug.replies import Detection, HangInfo
from mcpdebug.tools.annotations import READ_ONLY, RUNS_CODE
from mcpdebug.tools.args import Cwd, Example, HangTest, RunId
from mcpdebug.tools.context import ToolGroup, reads_store, tool
from mcpdebug.views import hang as hang_view
from mcpdebug.views import lookup


class HangTools(ToolGroup):
    group = "hangs"

    @tool(READ_ONLY)
    @reads_store
    def get_hang(self, run_id: RunId = "latest", test: HangTest = None) -> HangInfo:
        """Why a test hung, from the hung process itself at its timeout.

        Busy loop (the lines it cycles through) or blocked (the call it waits in, since when), the
        source there and its locals, every thread's stack, asyncio tasks and where each waits, CPU
        against wall time, and the output just before. Without test: the run's first hang and a list
        of the others; a run without hangs says so.
        """
        return hang_view.get_hang(self.store, lookup.run(self.store, run_id), test)

    @tool(RUNS_CODE)
    async def detect_hang(
        self,
        ctx: Context,
        command: Annotated[
            str | None,
            Field(
                min_length=1,
                description="A command to run instead of tests (`python x.py` and `python -m x` get stacks).",
            ),
            Example('"python worker.py --once"'),
        ] = None,
        tests: Annotated[
            list[str] | None,
            Field(
                description="Node ids or paths to run (list_tests lists node ids). Default: the whole suite."
            ),
            Example('["tests/test_jobs.py"]'),
        ] = None,
        timeout: Annotated[
            float,
            Field(gt=0, le=3600, description="Seconds per test (or for the command). Default: 10."),
            Example("10"),
        ] = 10,
        sample_interval: Annotated[
            float,
            Field(gt=0, le=10, description="Seconds between stack samples. Default: 0.1."),
            Example("0.1"),
        ] = 0.1,
        cwd: Cwd = None,
        pid: Annotated[
            int | None,
            Field(
                ge=1,
                le=4_194_304,
                description="A running Python process to sample from outside (py-spy) for 2 s instead. "
                "Default: none.",
            ),
            Example("12345"),
        ] = None,
    ) -> Detection:
        """Run tests or a command under the hang watchdog and say whether it hangs.

        HUNG with the kind (busy loop and its lines, or the call it blocks in), the location, the
        source and the stacks; or COMPLETED with the exit status. With pid: where each thread of
        that process is, and its child processes (SAMPLED).
        """
        if sum(x is not None and x != [] for x in (command, tests, pid)) > 1:
            raise ToolError("Give one of command, tests or pid.")
        interval = min(sample_interval, timeout)
        if pid is not None:
            seconds = min(timeout, hang_detection.PID_SAMPLING)
            return await self.asking(hang_detection.process(pid, seconds, min(interval, seconds)))
        if command is not None:
            project = project_of(self.store.dir)
            return await self.asking(hang_detection.command(command, cwd, timeout, interval, project))

        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        return await self.asking(
            hang_detection.tests(self.runner, tests or [], cwd, timeout, interval, progress)
        )
