"""Tools about hangs: why a recorded test hung (get_hang), and whether something hangs (detect_hang)."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcpdebug.processes import hang_detection
from mcpdebug.tools.context import READ_ONLY, RUNS_CODE, ToolContext, ToolGroup, reads_store
from mcpdebug.views import hang as hang_view
from mcpdebug.views import lookup


class HangTools(ToolGroup):
    @reads_store
    def get_hang(self, run_id: str = "latest", test: str | None = None) -> str:
        """Why a test hung, from the hung process itself at its timeout: busy loop (the lines it
        cycles through) or blocked (the call it waits in, since when), the source there and its
        locals, every thread's stack, asyncio tasks and where each waits, CPU against wall time,
        and the output just before. Without test: the run's first hang and a list of the others."""
        return hang_view.get_hang(self.store, lookup.run(self.store, run_id), test)

    async def detect_hang(
        self,
        ctx: Context,
        command: str | None = None,
        tests: list[str] | None = None,
        timeout: float = 10,
        sample_interval: float = 0.1,
        cwd: str | None = None,
        pid: int | None = None,
    ) -> str:
        """Run tests (node ids or paths; none: the whole suite) or a command under the hang watchdog
        and say whether it hangs: HUNG with the kind (busy loop and its lines, or the call it blocks
        in), the location, the source and the stacks; or COMPLETED with the exit status. timeout:
        seconds per test (or for the command). A Python command (`python script.py ...`,
        `python -m module`, `script.py`) gets full stacks; another command can only be timed.
        pid: a running Python process to sample from outside (py-spy) for 2 s (or timeout if
        shorter) instead: where each thread is, and its child processes."""
        if timeout <= 0 or sample_interval <= 0:
            raise ToolError("timeout and sample_interval must be above 0 seconds, e.g. timeout=10.")
        if sum(x is not None and x != [] for x in (command, tests, pid)) > 1:
            raise ToolError("Give one of command, tests or pid.")
        interval = min(sample_interval, timeout)
        if pid is not None:
            seconds = min(timeout, hang_detection.PID_SAMPLING)
            return await self.asking(hang_detection.process(pid, seconds, min(interval, seconds)))
        if command is not None:
            return await self.asking(hang_detection.command(command, cwd, timeout, interval))

        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        return await self.asking(
            hang_detection.tests(self.runner, tests or [], cwd, timeout, interval, progress)
        )


def register(server: MCPServer, context: ToolContext) -> None:
    tools = HangTools(context)
    server.add_tool(tools.get_hang, annotations=READ_ONLY)
    server.add_tool(tools.detect_hang, annotations=RUNS_CODE)
