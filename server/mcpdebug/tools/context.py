"""What every tools module shares: the store, live sessions, the test runner, and error handling.

Each tools module has one `ToolGroup` subclass named after its concern (``group = "runs"``): its
methods marked ``@tool(ANNOTATIONS)`` are its tools, each returning a `mcpdebug.replies` model;
``register`` adds them (all, or the core ones: see `tools.groups`) and ``register_resources`` the
module's resources. A tool never lets a lookup failure escape as a
server error: `reads_store` (sync tools), `ToolGroup.stored` (async tools computing in a worker
thread) and `ToolGroup.asking` (live requests and runs) turn it into an error result whose message
says what exists and what to call instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations

from mcpdebug.debug import DebugError
from mcpdebug.debug.manager import Debugger
from mcpdebug.live.sessions import SessionError, Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import RunError, Runner
from mcpdebug.store import Store
from mcpdebug.store.output_query import OutputError
from mcpdebug.views import lookup

if TYPE_CHECKING:
    from mcpdebug.tools.server import ToolServer

M = TypeVar("M", bound=Callable[..., Any])
T = TypeVar("T")


@dataclass
class ToolContext:
    """The server's shared state, built once by `mcpdebug.app.build_server`."""

    store: Store
    sessions: Sessions
    runner: Runner
    processes: ProcessManager
    debugger: Debugger


def tool(annotations: ToolAnnotations) -> Callable[[M], M]:
    """Mark a `ToolGroup` method as a tool with these annotations (READ_ONLY, RUNS_CODE, CONTROLS).

    Its name is the tool's name, its docstring (dedented) the description, its parameters (typed
    with `mcpdebug.tools.args`) the ``inputSchema`` and its return annotation the ``outputSchema``.
    """

    def mark(fn: M) -> M:
        fn.__mcp_tool__ = annotations  # type: ignore[attr-defined]
        return fn

    return mark


class ToolGroup:
    """Base of each tools module's class: its ``@tool`` methods are the tools, ``register`` adds them."""

    group: ClassVar[str]
    """The name `mcpdebug serve --tools` selects this group by."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.store = context.store
        self.sessions = context.sessions
        self.runner = context.runner
        self.debugger = context.debugger

    def tools(self) -> list[tuple[Callable[..., Any], ToolAnnotations]]:
        """The group's tools with their annotations, in the order they are defined."""
        found = []
        for name in vars(type(self)):
            annotations = getattr(getattr(type(self), name), "__mcp_tool__", None)
            if annotations is not None:
                found.append((getattr(self, name), annotations))
        return found

    def register(self, server: ToolServer, names: Collection[str] | None = None) -> None:
        """Add the group's tools to ``server`` (only those in ``names``, if given)."""
        for method, hints in self.tools():
            if names is None or method.__name__ in names:
                server.add_reply_tool(method, hints, inspect.cleandoc(method.__doc__ or ""))

    def register_resources(self, server: ToolServer) -> None:
        """Add the group's resources (once, when any of its tools is first listed); most have none."""

    async def stored(self, fn: Callable[[], T]) -> T:
        """A stored-data reply, computed in a worker thread (SQLite and files)."""

        def call() -> T:
            try:
                return lookup.reading(self.store, fn)
            except (lookup.NotFound, OutputError) as exc:
                raise ToolError(str(exc)) from None

        return await anyio.to_thread.run_sync(call)

    async def asking(self, pending: Awaitable[T]) -> T:
        """Await a live request or a run; what cannot be done becomes an error result."""
        try:
            return await pending
        except (SessionError, RunError, lookup.NotFound, DebugError) as exc:
            raise ToolError(str(exc)) from None


def _reads_store(error: type[Exception]) -> Callable[[M], M]:
    def decorate(fn: M) -> M:
        @wraps(fn)
        def wrapper(self: ToolGroup, *args: Any, **kwargs: Any) -> Any:
            try:
                return lookup.reading(self.store, lambda: fn(self, *args, **kwargs))
            except (lookup.NotFound, OutputError) as exc:
                raise error(str(exc)) from None

        return wrapper  # type: ignore[return-value]

    return decorate


reads_store = _reads_store(ToolError)
"""Decorates a sync tool method: pending spool is ingested first, lookup failures become error results."""
reads_store_resource = _reads_store(ResourceError)
"""The same for a resource method: lookup failures become resource errors."""
