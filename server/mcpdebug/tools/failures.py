"""Tools over one failure: its snapshot (get_failure) and seed 002's frame inspection tools.

The inspection tools read the stored snapshot, or with ``session_id`` the live frames of a test held
alive right now (see `live`): the same replies either way.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mcpdebug.replies import FailureReport, Scopes, SourceContext, Stack, Variables
from mcpdebug.tools.annotations import READ_ONLY
from mcpdebug.tools.args import (
    Example,
    FailureTest,
    FrameId,
    LiveSessionId,
    OptionalFrameId,
    RunId,
    VariablesReference,
)
from mcpdebug.tools.context import ToolGroup, reads_store, tool
from mcpdebug.views import frames as frames_view
from mcpdebug.views import hang as hang_view
from mcpdebug.views import live as live_view
from mcpdebug.views import localize as localize_view
from mcpdebug.views import lookup
from mcpdebug.views.calls import call


class FailureTools(ToolGroup):
    group = "failures"

    @tool(READ_ONLY)
    @reads_store
    def get_failure(self, run_id: RunId = "latest", test: FailureTest = None) -> FailureReport:
        """Everything about one failure, from a snapshot taken while its frames were alive.

        The exception, its chain and notes (hypothesis's falsifying example), pytest's assertion
        introspection, each frame from the raise point to the test (absolute path, line, source,
        locals with type and value; secrets redacted; library frames named), and the tail of the
        test's output. Without test: the run's first failure and a list of the others.
        """
        run = lookup.run(self.store, run_id)
        reply = hang_view.failure_or_hang(self.store, run, test)
        reply.text += localize_view.suspects_and_note(self.store, run)
        for held in self.sessions.held():
            if held.nodeid == reply.test and held.run_id == reply.run_id:
                reply.session_id = held.id
                reply.next_call = call("evaluate_expression", session_id=held.id, expression="...")
                reply.text += (
                    f"\n\nThis test is held alive now as session {held.id}: {reply.next_call} runs code in "
                    "its frames."
                )
        return reply

    @tool(READ_ONLY)
    async def get_stack_trace(
        self,
        run_id: RunId = "latest",
        test: FailureTest = None,
        include_library: Annotated[
            bool,
            Field(description="Also list library frames (stdlib, site-packages, pytest). Default: false."),
            Example("true"),
        ] = False,
        session_id: LiveSessionId = None,
    ) -> Stack:
        """The failing test's frames, innermost (the raise point, id 0) first: id, function, file, line.

        For a debug session, the frames where it stopped.
        """
        if session_id:
            return await self.asking(
                live_view.inspect(self.sessions, session_id, "stack", include_library=include_library)
            )
        return await self.stored(
            lambda: frames_view.get_stack_trace(
                self.store, lookup.run(self.store, run_id), test, include_library
            )
        )

    @tool(READ_ONLY)
    async def get_scopes(
        self,
        frame_id: FrameId,
        run_id: RunId = "latest",
        test: FailureTest = None,
        session_id: LiveSessionId = None,
    ) -> Scopes:
        """A frame's scopes (its Locals; live also its Globals) with the variablesReference of each."""
        if session_id:
            return await self.asking(
                live_view.inspect(self.sessions, session_id, "scopes", frame_id=frame_id)
            )
        return await self.stored(
            lambda: frames_view.get_scopes(self.store, lookup.run(self.store, run_id), test, frame_id)
        )

    @tool(READ_ONLY)
    async def get_variables(
        self,
        variables_reference: VariablesReference,
        run_id: RunId = "latest",
        test: FailureTest = None,
        session_id: LiveSessionId = None,
    ) -> Variables:
        """The variables under a variablesReference: name, value, type and their own reference.

        A reference of 0 means there is nothing to expand.
        """
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

    @tool(READ_ONLY)
    async def get_local_variables(
        self,
        frame_id: OptionalFrameId = None,
        include_special: Annotated[
            bool, Field(description="Also show dunder names (__x__). Default: false."), Example("true")
        ] = False,
        run_id: RunId = "latest",
        test: FailureTest = None,
        session_id: LiveSessionId = None,
    ) -> Variables:
        """A frame's local variables in one call: name, value, type and variablesReference."""
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

    @tool(READ_ONLY)
    async def get_source_context(
        self,
        file: Annotated[
            str,
            Field(
                description="A file of the run's rootdir (absolute or relative) or of the failure's frames."
            ),
            Example('"src/cart.py"'),
        ],
        line: Annotated[int, Field(ge=1, description="The line to show, 1-based."), Example("42")],
        lines_context: Annotated[
            int,
            Field(ge=0, le=100, description="Lines to show before and after it. Default: 5."),
            Example("10"),
        ] = 5,
        run_id: RunId = "latest",
        test: FailureTest = None,
        session_id: LiveSessionId = None,
    ) -> SourceContext:
        """Source lines around a line of a file, as the file is on disk now.

        Only files of the run's rootdir or of the failure's frames are read.
        """
        if session_id:
            return await self.asking(
                live_view.source(self.sessions, self.store, session_id, file, line, lines_context)
            )
        return await self.stored(
            lambda: frames_view.get_source_context(
                self.store, lookup.run(self.store, run_id), test, file, line, lines_context
            )
        )
