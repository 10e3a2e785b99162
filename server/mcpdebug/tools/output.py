"""Tools and resources over stored output: get_output, search_output, get_logs, and seed 003's
resources (a test's output, a line range, a search) with node ids percent-encoded in their URIs."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import ResourceSecurity

from mcpdebug.tools.context import READ_ONLY, ToolContext, ToolGroup, reads_store, reads_store_resource
from mcpdebug.views import logs as logs_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view


class OutputTools(ToolGroup):
    @reads_store
    def get_output(
        self,
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
        return output_view.get_output(
            self.store,
            lookup.run(self.store, run_id),
            test,
            stream=stream,
            phase=phase,
            start=start,
            end=end,
            since=since,
            until=until,
            line_numbers=line_numbers,
        )

    @reads_store
    def search_output(
        self,
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
        return search_view.search_output(
            self.store,
            lookup.run(self.store, run_id),
            pattern,
            test,
            stream=stream,
            context=context,
            occurrence=occurrence,
            ignore_case=ignore_case,
            max_results=max_results,
        )

    @reads_store
    def get_logs(
        self,
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
        return logs_view.get_logs(
            self.store,
            labels,
            lines=lines,
            since=since,
            stream=stream,
            pattern=pattern,
            max_results=max_results,
        )

    # Resources (seed 003) ---------------------------------------------------------------------------

    @reads_store_resource
    def logs_list(self) -> str:
        return logs_view.logs_list(self.store)

    @reads_store_resource
    def logs_recent(self, n: int = 5) -> str:
        return logs_view.logs_list(self.store, max(1, min(n, 1000)))

    @reads_store_resource
    def run_output(self, run_id: str) -> str:
        return output_view.get_output(self.store, lookup.run(self.store, run_id), None)

    @reads_store_resource
    def test_output(self, run_id: str, nodeid: str) -> str:
        return output_view.get_output(self.store, lookup.run(self.store, run_id), nodeid)

    @reads_store_resource
    def test_range(
        self,
        run_id: str,
        nodeid: str,
        start: int | None = None,
        end: int | None = None,
        lineNumbers: bool = True,
    ) -> str:
        run = lookup.run(self.store, run_id)
        return output_view.get_output(self.store, run, nodeid, start=start, end=end, line_numbers=lineNumbers)

    @reads_store_resource
    def test_search(
        self,
        run_id: str,
        nodeid: str,
        q: str = "",
        context: int = 3,
        occurrence: int = 1,
        caseInsensitive: bool = False,
    ) -> str:
        run = lookup.run(self.store, run_id)
        return search_view.search_output(
            self.store,
            run,
            q,
            nodeid,
            context=context,
            occurrence=occurrence,
            ignore_case=caseInsensitive,
            max_results=1,
        )

    @reads_store_resource
    def run_search(
        self, run_id: str, q: str = "", context: int = 3, occurrence: int = 1, caseInsensitive: bool = False
    ) -> str:
        run = lookup.run(self.store, run_id)
        return search_view.search_output(
            self.store, run, q, None, context=context, occurrence=occurrence, ignore_case=caseInsensitive
        )


RESOURCES = (
    # (method, URI template, name, mime type, description, node id in the URI)
    ("logs_list", "mcpdebug://logs/list", "logs-list", "application/json",
     "Stored output of every run: per run, its tests with output, their lines and size.", False),
    ("logs_recent", "mcpdebug://logs/recent{?n}", "logs-recent", "application/json",
     "As logs/list for the n most recent runs (default 5).", False),
    ("run_output", "mcpdebug://runs/{run_id}/output", "run-output", "text/plain",
     "The run's output outside tests (collection, session fixtures): the last 200 lines.", False),
    ("test_output", "mcpdebug://runs/{run_id}/tests/{nodeid}/output", "test-output", "text/plain",
     "A test's combined output (last 200 lines, with how to get the rest); nodeid percent-encoded.", True),
    ("test_range", "mcpdebug://runs/{run_id}/tests/{nodeid}/range{?start,end,lineNumbers}",
     "test-output-range", "text/plain",
     "Lines start..end of a test's output (1-based, negative from the end).", True),
    ("test_search", "mcpdebug://runs/{run_id}/tests/{nodeid}/search{?q,context,occurrence,caseInsensitive}",
     "test-output-search", "text/plain",
     "Search a test's output for a regex, with context lines, one occurrence at a time.", True),
    ("run_search", "mcpdebug://runs/{run_id}/search{?q,context,occurrence,caseInsensitive}",
     "run-output-search", "text/plain",
     "Search every test's output of a run for a regex; each hit names its test.", False),
)  # fmt: skip


def register(server: MCPServer, context: ToolContext) -> None:
    tools = OutputTools(context)
    for tool in (tools.get_output, tools.search_output, tools.get_logs):
        server.add_tool(tool, annotations=READ_ONLY)
    node = ResourceSecurity(exempt_params={"nodeid"})
    for method, uri, name, mime, description, has_node in RESOURCES:
        server.resource(
            uri,
            name=name,
            mime_type=mime,
            description=description,
            **({"security": node} if has_node else {}),  # type: ignore[arg-type]
        )(getattr(tools, method))
