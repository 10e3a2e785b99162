"""Tools and resources over stored output: get_output, search_output, get_logs, and seed 003's
resources (a test's output, a line range, a search) with node ids percent-encoded in their URIs."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.resources import ResourceSecurity
from pydantic import Field

from mcpdebug.replies import Logs, OutputWindow, SearchResult
from mcpdebug.tools.annotations import READ_ONLY
from mcpdebug.tools.args import Example, OutputTest, Pattern, RunId, SearchTest, Since, Stream
from mcpdebug.tools.context import ToolGroup, reads_store, reads_store_resource, tool
from mcpdebug.tools.server import ToolServer
from mcpdebug.views import logs as logs_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view

LineNumber = Annotated[
    int | None,
    Field(description="1-based line, inclusive; negative counts from the end (-1 is the last line)."),
    Example("-50"),
]


class OutputTools(ToolGroup):
    group = "output"

    @tool(READ_ONLY)
    @reads_store
    def get_output(
        self,
        run_id: RunId = "latest",
        test: OutputTest = None,
        stream: Stream = "combined",
        phase: Annotated[
            Literal["setup", "call", "teardown"] | None,
            Field(description="Only this phase's lines. Default: every phase."),
            Example('"call"'),
        ] = None,
        start: LineNumber = None,
        end: LineNumber = None,
        since: Since = None,
        until: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Only lines written until: ISO time, epoch seconds or an age. Default: now.",
            ),
            Example('"1m"'),
        ] = None,
        line_numbers: Annotated[
            bool, Field(description="Prefix each line with its number. Default: true."), Example("false")
        ] = True,
    ) -> OutputWindow:
        """Lines a test printed or logged (live while it runs); without start/end the last 200.

        start=-50, end=-1 is the last 50 lines. A long reply shows a window and names the calls for
        the lines before and after it.
        """
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

    @tool(READ_ONLY)
    @reads_store
    def search_output(
        self,
        pattern: Pattern,
        run_id: RunId = "latest",
        test: SearchTest = None,
        stream: Stream = "combined",
        context: Annotated[
            int,
            Field(ge=0, le=50, description="Lines shown before and after each match. Default: 3."),
            Example("5"),
        ] = 3,
        occurrence: Annotated[
            int,
            Field(ge=1, description="The first match to show (a reply names the next one). Default: 1."),
            Example("2"),
        ] = 1,
        ignore_case: Annotated[
            bool, Field(description="Match regardless of case. Default: false."), Example("true")
        ] = False,
        max_results: Annotated[
            int, Field(ge=1, le=1000, description="Most matches to show. Default: 20."), Example("5")
        ] = 20,
    ) -> SearchResult:
        """Lines matching a regex in a test's output, or in every test of a run, with context.

        Gives the number of matching lines (0 is a normal answer) and the matches from the
        occurrence-th on, each marked >>> N: line <<< among its context, with the call for the next.
        """
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

    @tool(READ_ONLY)
    @reads_store
    def get_logs(
        self,
        labels: Annotated[
            list[Annotated[str, Field(min_length=1)]],
            Field(
                min_length=1,
                description='Runs to read: run ids or labels (commands) from list_sessions, or "latest".',
            ),
            Example('["latest"]'),
        ],
        lines: Annotated[
            int,
            Field(ge=1, le=10_000, description="Newest lines to take from each run. Default: 100."),
            Example("50"),
        ] = 100,
        since: Since = None,
        stream: Annotated[
            Literal["both", "stdout", "stderr", "log", "warnings"],
            Field(description='One stream, or "both" (the default) for all of them.'),
            Example('"stderr"'),
        ] = "both",
        pattern: Annotated[
            str | None,
            Field(min_length=1, max_length=2000, description="A regex the lines must match. Default: all."),
            Example('"ERROR"'),
        ] = None,
        max_results: Annotated[
            int,
            Field(ge=1, le=10_000, description="Most lines in the reply, newest kept. Default: 1000."),
            Example("200"),
        ] = 1000,
    ) -> Logs:
        """The newest lines of one or more runs, across all their tests, merged in time order.

        Starts with total_results, truncated, sessions_queried, sessions_not_found and time_range.
        """
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
        return output_view.get_output(self.store, lookup.run(self.store, run_id), None).text

    @reads_store_resource
    def test_output(self, run_id: str, nodeid: str) -> str:
        return output_view.get_output(self.store, lookup.run(self.store, run_id), nodeid).text

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
        return output_view.get_output(
            self.store, run, nodeid, start=start, end=end, line_numbers=lineNumbers
        ).text

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
        ).render()

    @reads_store_resource
    def run_search(
        self, run_id: str, q: str = "", context: int = 3, occurrence: int = 1, caseInsensitive: bool = False
    ) -> str:
        run = lookup.run(self.store, run_id)
        return search_view.search_output(
            self.store, run, q, None, context=context, occurrence=occurrence, ignore_case=caseInsensitive
        ).render()

    def register_resources(self, server: ToolServer) -> None:
        node = ResourceSecurity(exempt_params={"nodeid"})
        for method, uri, name, mime, description, has_node in RESOURCES:
            server.resource(
                uri,
                name=name,
                mime_type=mime,
                description=description,
                **({"security": node} if has_node else {}),  # type: ignore[arg-type]
            )(getattr(self, method))


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
