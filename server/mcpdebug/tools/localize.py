"""The dynamic localizer: `localize` re-runs a run's failing tests with small changes of its top
suspect lines, within a time budget, and stores what it found with the run (`views.localize`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpdebug.replies.localize import LocalizeReply
from mcpdebug.tools.annotations import RUNS_CODE
from mcpdebug.tools.args import RunId
from mcpdebug.tools.context import ToolGroup, tool
from mcpdebug.views import localize as localize_view
from mcpdebug.views import lookup


class LocalizeTools(ToolGroup):
    group = "localize"

    @tool(RUNS_CODE)
    async def localize(
        self,
        ctx: Context,
        run_id: RunId = "latest",
        budget: Annotated[
            float,
            Field(
                ge=1,
                le=600,
                description="Seconds the localizer may spend re-running tests (and its start-up). "
                "Default: 30.",
            ),
        ] = 30.0,
        lines: Annotated[
            int,
            Field(ge=1, le=100, description="How many top suspect lines to try, in rank order. Default: 20."),
        ] = 20,
    ) -> LocalizeReply:
        """Which suspect line, changed, makes the failing tests pass: localization by re-running them.

        Re-runs only the run's failing tests (and a few passing tests that run each line) with small
        changes of the top suspects, in memory (files are never written): comparisons flipped,
        conditions negated, and/or swapped, constants by one. A line whose change turns failing
        tests green without breaking its neighbours is where a fix can be made. Stored with the run:
        get_suspects and get_failure weigh it from then on. Needs --mcp-debug-coverage.
        """

        started = time.monotonic()  # the budget counts from here: ranking, start-up and reply included

        def prepare() -> localize_view.Planned:
            lookup.refresh(self.store)
            run = lookup.run(self.store, run_id)
            return localize_view.plan(self.store, run, budget, lines, started)

        try:
            planned = await anyio.to_thread.run_sync(prepare)
        except lookup.NotFound as exc:
            raise ToolError(str(exc)) from None
        terminal = await self._run(planned, ctx)
        elapsed = time.monotonic() - started

        def finish() -> LocalizeReply:
            result = localize_view.store_result(self.store, planned, elapsed, terminal)
            return localize_view.reply(self.store, planned.run, result)

        return await anyio.to_thread.run_sync(finish)

    async def _run(self, planned: localize_view.Planned, ctx: Context) -> str:
        """The localizer's process, stopped at its deadline; its terminal output."""
        try:
            process = await asyncio.create_subprocess_exec(
                *planned.command(),
                cwd=planned.cwd,
                env=planned.environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(
                f"Could not start the localizer's pytest in {planned.cwd}: {exc.strerror}"
            ) from None
        reading = asyncio.ensure_future(process.communicate())
        deadline = planned.deadline
        total = float(planned.plan["budget"])
        while not reading.done():
            left = deadline - time.monotonic()
            if left <= 0:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # what it learnt so far is in its result file
                break
            await asyncio.wait([reading], timeout=min(left, 2.0))
            spent = time.monotonic() - planned.started
            await ctx.report_progress(min(spent, total), total, "localizing")
        output, _ = await reading
        return (output or b"").decode(errors="replace")
