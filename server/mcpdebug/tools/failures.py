"""Tools over one failure: its snapshot (get_failure) and seed 002's frame inspection tools.

The inspection tools read the stored snapshot, or with ``session_id`` the live frames of a test held
alive right now (see `live`): the same replies either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer

from mcpdebug.tools.context import READ_ONLY, ToolContext, ToolGroup, reads_store
from mcpdebug.views import frames as frames_view
from mcpdebug.views import hang as hang_view
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup
from mcpdebug.views import suspects as suspects_view

SESSION_HELP = (
    " session_id: a live session (a test held at its failure, from run_tests or list_sessions): read "
    "the live frames instead of the stored snapshot."
)

F = TypeVar("F", bound=Callable[..., Any])


def live_capable(fn: F) -> F:
    """Say in the tool's description what its ``session_id`` argument does."""
    fn.__doc__ = (fn.__doc__ or "") + SESSION_HELP
    return fn


class FailureTools(ToolGroup):
    @reads_store
    def get_failure(self, run_id: str = "latest", test: str | None = None) -> str:
        """Everything about one failure, from the snapshot taken while the failing frames were alive:
        exception, chain and notes (hypothesis's falsifying example), pytest's assertion introspection,
        each frame from the raise point to the test (absolute path, line, source, locals with type and
        value; secrets redacted), and the tail of the test's output. Without test: the run's first
        failure, and a list of the others."""
        run = lookup.run(self.store, run_id)
        text = hang_view.failure_or_hang(self.store, run, test)
        suspects = suspects_view.failure_suspects(self.store, run)
        if suspects:
            text += "\n\n" + suspects
        headline = text.split("\n", 1)[0]
        for held in self.sessions.held():
            if f" {held.nodeid} ({held.when}) in run {held.run_id}" in headline:
                text += (
                    f"\n\nThis test is held alive now as session {held.id}: "
                    f'evaluate_expression(session_id="{held.id}", expression=...) runs code in its frames.'
                )
        return text

    @live_capable
    async def get_stack_trace(
        self,
        run_id: str = "latest",
        test: str | None = None,
        include_library: bool = False,
        session_id: str | None = None,
    ) -> str:
        """The failing test's frames, innermost (the raise point, id 0) first: id, function, absolute
        file, line. Library frames (stdlib, site-packages, pytest) only with include_library. Without
        test: the run's first failure."""
        if session_id:
            return await self.asking(
                live_view.inspect(self.sessions, session_id, "stack", include_library=include_library)
            )
        return await self.stored(
            lambda: frames_view.get_stack_trace(
                self.store, lookup.run(self.store, run_id), test, include_library
            )
        )

    @live_capable
    async def get_scopes(
        self, frame_id: int, run_id: str = "latest", test: str | None = None, session_id: str | None = None
    ) -> str:
        """The scopes of a frame (its Locals; live also its Globals) with the variablesReference to pass
        to get_variables."""
        if session_id:
            return await self.asking(
                live_view.inspect(self.sessions, session_id, "scopes", frame_id=frame_id)
            )
        return await self.stored(
            lambda: frames_view.get_scopes(self.store, lookup.run(self.store, run_id), test, frame_id)
        )

    @live_capable
    async def get_variables(
        self,
        variables_reference: int,
        run_id: str = "latest",
        test: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """The variables under a variablesReference (a scope from get_scopes, or an expandable value):
        name, value, type and their own variablesReference (0 = nothing to expand)."""
        if session_id:
            return await self.asking(
                live_view.inspect(
                    self.sessions, session_id, "variables", variables_reference=variables_reference
                )
            )
        return await self.stored(
            lambda: frames_view.get_variables(
                self.store, lookup.run(self.store, run_id), test, variables_reference
            )
        )

    @live_capable
    async def get_local_variables(
        self,
        frame_id: int | None = None,
        include_special: bool = False,
        run_id: str = "latest",
        test: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """A frame's locals in one call (default: the test function's frame). include_special shows
        dunder names too."""
        if session_id:
            return await self.asking(
                live_view.inspect(
                    self.sessions, session_id, "locals", frame_id=frame_id, include_special=include_special
                )
            )
        return await self.stored(
            lambda: frames_view.get_local_variables(
                self.store, lookup.run(self.store, run_id), test, frame_id, include_special
            )
        )

    @live_capable
    async def get_source_context(
        self,
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
            return await self.asking(
                live_view.source(self.sessions, self.store, session_id, file, line, lines_context)
            )
        return await self.stored(
            lambda: frames_view.get_source_context(
                self.store, lookup.run(self.store, run_id), test, file, line, lines_context
            )
        )


def register(server: MCPServer, context: ToolContext) -> None:
    tools = FailureTools(context)
    for tool in (
        tools.get_failure,
        tools.get_stack_trace,
        tools.get_scopes,
        tools.get_variables,
        tools.get_local_variables,
        tools.get_source_context,
    ):
        server.add_tool(tool, annotations=READ_ONLY)
