"""The MCP surface: thin tools and resources over the store.

Every tool returns plain text that is complete on its own (the SDK also mirrors it as
``structuredContent``), so an agent sees the same thing whichever form its client shows it.
Lookup failures are raised as `ToolError`: the client gets an error result whose message lists
what exists and what to call instead; the server carries on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations

from . import lookup, render
from .store import Store

INSTRUCTIONS = """\
pytest-mcpdebug records pytest runs (`pytest --mcp-debug`) in this project: each test's outcome per
phase, its failure text and its captured stdout/stderr/log. Start with list_sessions or
get_run_summary (run_id="latest"), then get_test for a failing test's traceback and output.
Runs in progress are visible live: a test listed as RUNNING is still executing."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

F = TypeVar("F", bound=Callable[..., str])


def build_server(store: Store) -> MCPServer:
    server: MCPServer = MCPServer("mcpdebug", instructions=INSTRUCTIONS, version=_version())

    def reading(fn: F) -> F:
        """Ingest pending spool first; turn lookup failures into error results."""

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> str:
            lookup.refresh(store)
            try:
                return fn(*args, **kwargs)
            except lookup.NotFound as exc:
                raise ToolError(str(exc)) from None

        return wrapper  # type: ignore[return-value]

    @server.tool(annotations=READ_ONLY)
    @reading
    def list_sessions() -> str:
        """Every recorded session (test run), newest first: id, kind, label, status, start time,
        duration and test counts. Status is running, finished, interrupted or crashed."""
        return render.sessions(store.runs())

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_run_summary(run_id: str = "latest") -> str:
        """A run's command, duration, exit status and counts, and each failed or errored test with its
        node id, phase and one-line message. run_id: an id from list_sessions, or "latest"."""
        return _summary(run_id)

    @server.tool(annotations=READ_ONLY)
    @reading
    def list_tests(
        run_id: str = "latest", outcome: str | None = None, offset: int = 0, limit: int = 200
    ) -> str:
        """Node ids of a run's tests with outcome, duration and worker, in execution order.
        outcome filters: passed, failed, error, skipped, xfailed, xpassed or running (comma-separate
        several, e.g. "failed,error"). offset/limit page through long lists."""
        row = lookup.run(store, run_id)
        wanted = lookup.outcomes(outcome)
        tests = store.tests(row["run_id"], wanted)
        total = sum(row["counts"].values())
        return render.test_list(row, tests, total, outcome, max(0, offset), max(1, min(limit, 1000)))

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_test(test: str, run_id: str = "latest", tail_lines: int = 50) -> str:
        """One test: outcome per phase (setup/call/teardown), failure text (traceback), and the last
        tail_lines lines of its captured stdout, stderr and log. test: a node id as pytest prints it
        (or a unique part of one)."""
        row = lookup.run(store, run_id)
        found = lookup.test(store, row, test)
        phases = store.phases(row["run_id"], found["nodeid"])
        return render.test_detail(row, found, phases, max(0, min(tail_lines, 2000)))

    @server.resource(
        "mcpdebug://runs",
        name="runs",
        mime_type="text/plain",
        description="Every recorded run, newest first (as list_sessions).",
    )
    def runs_resource() -> str:
        lookup.refresh(store)
        return render.sessions(store.runs())

    @server.resource(
        "mcpdebug://runs/{run_id}",
        name="run",
        mime_type="text/plain",
        description='One run\'s summary (as get_run_summary); run_id may be "latest".',
    )
    def run_resource(run_id: str) -> str:
        lookup.refresh(store)
        try:
            return _summary(run_id)
        except lookup.NotFound as exc:
            raise ResourceError(str(exc)) from None

    def _summary(run_id: str) -> str:
        row = lookup.run(store, run_id)
        rid = row["run_id"]
        return render.run_summary(
            row, store.problems(rid), store.collection_errors(rid), store.tests(rid, ("running",))
        )

    return server


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
