"""The MCP surface: thin tools and resources over the store.

Every tool returns plain text that is complete on its own (the SDK also mirrors it as
``structuredContent``), so an agent sees the same thing whichever form its client shows it.
Lookup failures are raised as `ToolError`: the client gets an error result whose message lists
what exists and what to call instead; the server carries on.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from functools import partial, wraps
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.types import ToolAnnotations

from mcpdebug.live.sessions import SessionError, Sessions
from mcpdebug.processes import hang_detection
from mcpdebug.processes.test_runs import RunError, Runner
from mcpdebug.store import Store
from mcpdebug.store.output_query import OutputError
from mcpdebug.views import frames as frames_view
from mcpdebug.views import hang as hang_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views import runs as runs_view

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
continue_execution resumes the run (then wait_for_stop), close_session stops it."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
CONTROLS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
SESSION_HELP = (
    " session_id: a live session (a test held at its failure, from run_tests or list_sessions): read "
    "the live frames instead of the stored snapshot."
)

F = TypeVar("F", bound=Callable[..., str])
T = TypeVar("T")


def build_server(store: Store, sessions: Sessions | None = None, runner: Runner | None = None) -> MCPServer:
    """The MCP server over ``store``; ``sessions`` and ``runner`` (from `serve`) make the live tools work."""
    server: MCPServer = MCPServer("mcpdebug", instructions=INSTRUCTIONS, version=_version())
    live = sessions if sessions is not None else Sessions(store)
    runs = runner if runner is not None else Runner(store, live, url=None, token=None)

    def reads_store(error: type[Exception]) -> Callable[[F], F]:
        """Ingest pending spool first; turn lookup failures into ``error`` (an error result)."""

        def decorate(fn: F) -> F:
            @wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> str:
                lookup.refresh(store)
                try:
                    return fn(*args, **kwargs)
                except (lookup.NotFound, OutputError) as exc:
                    raise error(str(exc)) from None

            return wrapper  # type: ignore[return-value]

        return decorate

    reading, resource_reading = reads_store(ToolError), reads_store(ResourceError)

    async def stored(fn: Callable[[], str]) -> str:
        """A stored-data reply, computed in a worker thread (SQLite and files)."""

        def call() -> str:
            lookup.refresh(store)
            try:
                return fn()
            except (lookup.NotFound, OutputError) as exc:
                raise ToolError(str(exc)) from None

        return await anyio.to_thread.run_sync(call)

    async def asking(pending: Awaitable[T]) -> T:
        """Await a live request or a run; what cannot be done becomes an error result."""
        try:
            return await pending
        except (SessionError, RunError, lookup.NotFound) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=READ_ONLY)
    @reading
    def list_sessions() -> str:
        """Every recorded session (test run), newest first: id, kind, label, status, start time,
        duration and test counts. Status is running, finished, interrupted or crashed. Tests held
        alive at a failure right now are listed first, with the session_id the live tools take."""
        held = live_view.held_sessions(live.held())
        return (held + "\n\n" if held else "") + runs_view.sessions(store.runs())

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
        return runs_view.test_list(row, tests, total, outcome, max(0, offset), max(1, min(limit, 1000)))

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_test(test: str, run_id: str = "latest", tail_lines: int = 50) -> str:
        """One test: outcome per phase (setup/call/teardown), failure text (traceback), and the last
        tail_lines lines of its output (stdout, stderr, log records and warnings, interleaved).
        test: a node id as pytest prints it (or a unique part of one)."""
        row = lookup.run(store, run_id)
        found = lookup.test(store, row, test)
        phases = store.phases(row["run_id"], found["nodeid"])
        output = output_view.output_tail(store, row, found["nodeid"], max(0, min(tail_lines, 2000)))
        return runs_view.test_detail(row, found, phases, output)

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_failure(run_id: str = "latest", test: str | None = None) -> str:
        """Everything about one failure, from the snapshot taken while the failing frames were alive:
        exception, chain and notes (hypothesis's falsifying example), pytest's assertion introspection,
        each frame from the raise point to the test (absolute path, line, source, locals with type and
        value; secrets redacted), and the tail of the test's output. Without test: the run's first
        failure, and a list of the others."""
        text = hang_view.failure_or_hang(store, lookup.run(store, run_id), test)
        headline = text.split("\n", 1)[0]
        for held in live.held():
            if f" {held.nodeid} ({held.when}) in run {held.run_id}" in headline:
                text += (
                    f"\n\nThis test is held alive now as session {held.id}: "
                    f'evaluate_expression(session_id="{held.id}", expression=...) runs code in its frames.'
                )
        return text

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_hang(run_id: str = "latest", test: str | None = None) -> str:
        """Why a test hung, from the hung process itself at its timeout: busy loop (the lines it
        cycles through) or blocked (the call it waits in, since when), the source there and its
        locals, every thread's stack, asyncio tasks and where each waits, CPU against wall time,
        and the output just before. Without test: the run's first hang and a list of the others."""
        return hang_view.get_hang(store, lookup.run(store, run_id), test)

    @server.tool(annotations=READ_ONLY)
    async def get_stack_trace(
        run_id: str = "latest",
        test: str | None = None,
        include_library: bool = False,
        session_id: str | None = None,
    ) -> str:
        """The failing test's frames, innermost (the raise point, id 0) first: id, function, absolute
        file, line. Library frames (stdlib, site-packages, pytest) only with include_library. Without
        test: the run's first failure."""
        if session_id:
            return await asking(live_view.inspect(live, session_id, "stack", include_library=include_library))
        return await stored(
            lambda: frames_view.get_stack_trace(store, lookup.run(store, run_id), test, include_library)
        )

    get_stack_trace.__doc__ = (get_stack_trace.__doc__ or "") + SESSION_HELP

    @server.tool(annotations=READ_ONLY)
    async def get_scopes(
        frame_id: int, run_id: str = "latest", test: str | None = None, session_id: str | None = None
    ) -> str:
        """The scopes of a frame (its Locals; live also its Globals) with the variablesReference to pass
        to get_variables."""
        if session_id:
            return await asking(live_view.inspect(live, session_id, "scopes", frame_id=frame_id))
        return await stored(lambda: frames_view.get_scopes(store, lookup.run(store, run_id), test, frame_id))

    @server.tool(annotations=READ_ONLY)
    async def get_variables(
        variables_reference: int,
        run_id: str = "latest",
        test: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """The variables under a variablesReference (a scope from get_scopes, or an expandable value):
        name, value, type and their own variablesReference (0 = nothing to expand)."""
        if session_id:
            return await asking(
                live_view.inspect(live, session_id, "variables", variables_reference=variables_reference)
            )
        return await stored(
            lambda: frames_view.get_variables(store, lookup.run(store, run_id), test, variables_reference)
        )

    @server.tool(annotations=READ_ONLY)
    async def get_local_variables(
        frame_id: int | None = None,
        include_special: bool = False,
        run_id: str = "latest",
        test: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """A frame's locals in one call (default: the test function's frame). include_special shows
        dunder names too."""
        if session_id:
            return await asking(
                live_view.inspect(
                    live, session_id, "locals", frame_id=frame_id, include_special=include_special
                )
            )
        return await stored(
            lambda: frames_view.get_local_variables(
                store, lookup.run(store, run_id), test, frame_id, include_special
            )
        )

    @server.tool(annotations=READ_ONLY)
    async def get_source_context(
        file: str,
        line: int,
        lines_context: int = 5,
        run_id: str = "latest",
        test: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Source lines around a line of a file of the run's rootdir or of the failure's frames (others
        are refused), as the file is on disk now."""
        if session_id:
            return await asking(live_view.source(live, store, session_id, file, line, lines_context))
        return await stored(
            lambda: frames_view.get_source_context(
                store, lookup.run(store, run_id), test, file, line, lines_context
            )
        )

    for tool in (get_scopes, get_variables, get_local_variables, get_source_context):
        tool.__doc__ = (tool.__doc__ or "") + SESSION_HELP

    @server.tool(annotations=RUNS_CODE)
    async def evaluate_expression(session_id: str, expression: str, frame_id: int | None = None) -> str:
        """Run Python in a held test's frame (default: the test function's frame; frame_id from
        get_stack_trace picks another) and return the value's repr, type and variablesReference.
        Expressions and statements both work (`x = 3; x * 2`); side effects are real and stay for
        the rest of the test. Exceptions come back as errors with their traceback. A runaway
        expression is interrupted after 10 s."""
        return await asking(
            live_view.inspect(live, session_id, "evaluate", expression=expression, frame_id=frame_id)
        )

    @server.tool(annotations=CONTROLS)
    async def continue_execution(session_id: str) -> str:
        """Resume a held test: it finishes (teardown) and the run goes on to its next stop or its end;
        wait_for_stop(run id) waits for that."""
        session = live.get(session_id) if session_id in {s.id for s in live.held()} else None
        await asking(live.request(session_id, "continue", {}))
        rid = session.run_id if session else "latest"
        message = (
            f'Continued session {session_id}; wait_for_stop("{rid}") waits for the run\'s next stop or end.'
        )
        return json.dumps({"success": True, "state": "running", "message": message})

    @server.tool(annotations=RUNS_CODE)
    async def close_session(session_id: str) -> str:
        """End a run: a held test's session (the test resumes, finishes its teardown, and the run
        stops after it, as interrupted) or the run id of a run started by run_tests (stopped as
        Ctrl-C would)."""
        return await asking(_close(session_id))

    async def _close(identifier: str) -> str:
        if identifier in {s.id for s in live.held()}:
            session = live.get(identifier)
            await live.request(identifier, "close", {})
            for other in live.held(session.run_id):  # xdist: the other workers' holds end with the run
                with contextlib.suppress(SessionError):
                    await live.request(other.id, "close", {})
            result = await runs.wait(session.run_id, 15.0)
            state = (
                f"run {session.run_id} has stopped ({runs_view.status_text(result.run)})"
                if result.kind == "finished" and result.run
                else f"run {session.run_id} stops after this test"
            )
            return f"Closed session {identifier}: {state}."
        managed = runs.runs.get(identifier)
        if managed is not None:
            if managed.returncode is not None:
                return f"Run {identifier} had already ended (exit status {managed.returncode})."
            for held in live.held(identifier):
                await live.request(held.id, "close", {})
            code = await runs.stop(managed)
            return f"Stopped run {identifier} (exit status {code})."
        live.get(identifier)  # raises with the live sessions listed
        raise SessionError(f"No session or managed run {identifier!r}.")

    @server.tool(annotations=RUNS_CODE)
    async def run_tests(
        ctx: Context,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        break_on_failure: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Run `pytest --mcp-debug <args>` (e.g. args=["tests/test_api.py", "-x"]) in cwd (default: the
        server's folder) as a process of this server, and return when it finishes or, with
        break_on_failure, when a test fails and is held alive: the reply gives the session_id, the
        test, the exception, the top frame and its locals. timeout (seconds) returns earlier with
        the run still going. Progress is reported while waiting. Runs started together are kept
        apart: each has its own run id."""
        managed = await asking(runs.start(args or [], cwd, env, break_on_failure))
        return await _wait(ctx, managed.run_id, timeout)

    @server.tool(annotations=READ_ONLY)
    async def wait_for_stop(ctx: Context, id: str, timeout: float | None = None) -> str:
        """Wait until a run holds a failing test or finishes, and say which (as run_tests does).
        id: a run id (or "latest") or a session id (waits on its run). timeout in seconds."""
        run_id = live.run_of(id) or id
        if run_id == "latest" and runs.runs:  # the run just started here may not have recorded yet
            newest = max(runs.runs.values(), key=lambda r: r.started)
            ids = await anyio.to_thread.run_sync(partial(store.run_ids, 1))
            latest = await anyio.to_thread.run_sync(partial(store.run, ids[0])) if ids else None
            if latest is None or latest["started"] < newest.started - 1.0:
                run_id = newest.run_id
        if run_id not in runs.runs:
            run_id = await stored(lambda: str(lookup.run(store, run_id)["run_id"]))
        return await _wait(ctx, run_id, timeout)

    @server.tool(annotations=RUNS_CODE)
    async def detect_hang(
        ctx: Context,
        command: str | None = None,
        tests: list[str] | None = None,
        timeout: float = 10,
        sample_interval: float = 0.1,
        cwd: str | None = None,
    ) -> str:
        """Run tests (node ids or paths; none: the whole suite) or a command under the hang watchdog
        and say whether it hangs: HUNG with the kind (busy loop and its lines, or the call it blocks
        in), the location, the source and the stacks; or COMPLETED with the exit status. timeout:
        seconds per test (or for the command). A Python command (`python script.py ...`,
        `python -m module`, `script.py`) gets full stacks; another command can only be timed."""
        if timeout <= 0 or sample_interval <= 0:
            raise ToolError("timeout and sample_interval must be above 0 seconds, e.g. timeout=10.")
        if command is not None and tests:
            raise ToolError("Give either command or tests, not both.")
        if command is not None:
            return await asking(hang_detection.command(command, cwd, timeout, min(sample_interval, timeout)))

        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        return await asking(
            hang_detection.tests(runs, tests or [], cwd, timeout, min(sample_interval, timeout), progress)
        )

    async def _wait(ctx: Context, run_id: str, timeout: float | None) -> str:
        async def progress(elapsed: float, total: float | None, message: str) -> None:
            await ctx.report_progress(elapsed, total, message)

        result = await asking(runs.wait(run_id, timeout, progress))
        frames = await live_view.live_locals(live, result.session.id) if result.session is not None else None
        return await asking(anyio.to_thread.run_sync(partial(live_view.outcome, store, result, frames)))

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_output(
        run_id: str = "latest",
        test: str | None = None,
        stream: str = "combined",
        phase: str | None = None,
        start: int | None = None,
        end: int | None = None,
        since: str | None = None,
        until: str | None = None,
        line_numbers: bool = True,
    ) -> str:
        """Lines a test printed or logged, live while it runs. Without start/end: the last 200 lines.
        start/end are 1-based and inclusive; negative counts from the end (start=-50, end=-1 is the
        last 50 lines). test: a node id (or a unique part); omitted: the run's output outside tests
        (collection, session fixtures). stream: combined (stdout, stderr, log and warnings
        interleaved, non-stdout lines tagged), stdout, stderr, log or warnings. phase: setup, call or
        teardown. since/until: ISO time, epoch seconds or an age like 5m. Long replies show a window
        and say how to get the rest."""
        row = lookup.run(store, run_id)
        return output_view.get_output(
            store,
            row,
            test,
            stream=stream,
            phase=phase,
            start=start,
            end=end,
            since=since,
            until=until,
            line_numbers=line_numbers,
        )

    @server.tool(annotations=READ_ONLY)
    @reading
    def search_output(
        pattern: str,
        run_id: str = "latest",
        test: str | None = None,
        stream: str = "combined",
        context: int = 3,
        occurrence: int = 1,
        ignore_case: bool = False,
        max_results: int = 20,
    ) -> str:
        """Find lines matching a Python regex in a test's output (or, without test, in every test of
        the run; each hit names its test). Shows the total number of matching lines and up to
        max_results of them from the occurrence-th on, each with context lines before and after and
        the match marked >>> N: line <<<; says how to get the next one."""
        row = lookup.run(store, run_id)
        return output_view.search_output(
            store,
            row,
            pattern,
            test,
            stream=stream,
            context=context,
            occurrence=occurrence,
            ignore_case=ignore_case,
            max_results=max_results,
        )

    @server.tool(annotations=READ_ONLY)
    @reading
    def get_logs(
        labels: list[str],
        lines: int = 100,
        since: str | None = None,
        stream: str = "both",
        pattern: str | None = None,
        max_results: int = 1000,
    ) -> str:
        """The last `lines` lines of one or more sessions merged in time order, across all their tests.
        labels: run ids (or "latest", or a session label such as "pytest tests -x"). stream: stdout,
        stderr, log, warnings or both (all). pattern: a regex the lines must match. since: ISO time
        or an age like 10m. Replies start with total_results, truncated, sessions_queried,
        sessions_not_found and time_range."""
        return output_view.get_logs(
            store, labels, lines=lines, since=since, stream=stream, pattern=pattern, max_results=max_results
        )

    @server.resource(
        "mcpdebug://runs",
        name="runs",
        mime_type="text/plain",
        description="Every recorded run, newest first (as list_sessions).",
    )
    def runs_resource() -> str:
        lookup.refresh(store)
        return runs_view.sessions(store.runs())

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

    node = ResourceSecurity(exempt_params={"nodeid"})

    @server.resource(
        "mcpdebug://logs/list",
        name="logs-list",
        mime_type="application/json",
        description="Stored output of every run: per run, its tests with output, their lines and size.",
    )
    @resource_reading
    def logs_list() -> str:
        return output_view.logs_list(store)

    @server.resource(
        "mcpdebug://logs/recent{?n}",
        name="logs-recent",
        mime_type="application/json",
        description="As logs/list for the n most recent runs (default 5).",
    )
    @resource_reading
    def logs_recent(n: int = 5) -> str:
        return output_view.logs_list(store, max(1, min(n, 1000)))

    @server.resource(
        "mcpdebug://runs/{run_id}/output",
        name="run-output",
        mime_type="text/plain",
        description="The run's output outside tests (collection, session fixtures): the last 200 lines.",
    )
    @resource_reading
    def run_output(run_id: str) -> str:
        return output_view.get_output(store, lookup.run(store, run_id), None)

    @server.resource(
        "mcpdebug://runs/{run_id}/tests/{nodeid}/output",
        name="test-output",
        mime_type="text/plain",
        description="A test's combined output (last 200 lines, with how to get the rest); nodeid "
        "percent-encoded.",
        security=node,
    )
    @resource_reading
    def test_output(run_id: str, nodeid: str) -> str:
        return output_view.get_output(store, lookup.run(store, run_id), nodeid)

    @server.resource(
        "mcpdebug://runs/{run_id}/tests/{nodeid}/range{?start,end,lineNumbers}",
        name="test-output-range",
        mime_type="text/plain",
        description="Lines start..end of a test's output (1-based, negative from the end).",
        security=node,
    )
    @resource_reading
    def test_range(
        run_id: str, nodeid: str, start: int | None = None, end: int | None = None, lineNumbers: bool = True
    ) -> str:
        run = lookup.run(store, run_id)
        return output_view.get_output(store, run, nodeid, start=start, end=end, line_numbers=lineNumbers)

    @server.resource(
        "mcpdebug://runs/{run_id}/tests/{nodeid}/search{?q,context,occurrence,caseInsensitive}",
        name="test-output-search",
        mime_type="text/plain",
        description="Search a test's output for a regex, with context lines, one occurrence at a time.",
        security=node,
    )
    @resource_reading
    def test_search(
        run_id: str,
        nodeid: str,
        q: str = "",
        context: int = 3,
        occurrence: int = 1,
        caseInsensitive: bool = False,
    ) -> str:
        run = lookup.run(store, run_id)
        return output_view.search_output(
            store,
            run,
            q,
            nodeid,
            context=context,
            occurrence=occurrence,
            ignore_case=caseInsensitive,
            max_results=1,
        )

    @server.resource(
        "mcpdebug://runs/{run_id}/search{?q,context,occurrence,caseInsensitive}",
        name="run-output-search",
        mime_type="text/plain",
        description="Search every test's output of a run for a regex; each hit names its test.",
    )
    @resource_reading
    def run_search(
        run_id: str, q: str = "", context: int = 3, occurrence: int = 1, caseInsensitive: bool = False
    ) -> str:
        run = lookup.run(store, run_id)
        return output_view.search_output(
            store, run, q, None, context=context, occurrence=occurrence, ignore_case=caseInsensitive
        )

    def _summary(run_id: str) -> str:
        row = lookup.run(store, run_id)
        rid = row["run_id"]
        return runs_view.run_summary(
            row,
            store.problems(rid),
            store.collection_errors(rid),
            store.tests(rid, ("running",)),
            store.hangs(rid),
        )

    return server


def _version() -> str:
    from pytest_mcpdebug import __version__

    return __version__
