"""`mcpdebug serve` over stdio: the initialize reply before the rest of the server is loaded.

Importing the MCP SDK (2.3) costs 0.5-0.7 s here, because any ``import mcp.X`` first runs the package's
``__init__``, which imports the client, every server class, the HTTP stack (starlette, uvicorn,
httpx) and both protocol versions' pydantic models (SDK issue #1617; lazy exports are proposed
upstream in PR #3242). An initialize reply needs only the protocol types and the SDK's connection
runner: `mcp.server.runner.serve_dual_era_loop` is the loop `Server.run` drives (the SDK's
streamable-HTTP session manager calls its sibling `serve_loop` directly). So:

1. `mcpdebug.lazy_sdk.defer_packages`, called before anything imports the SDK, creates the ``mcp``
   and ``mcp.server`` package modules without running their ``__init__``; their submodules import
   as usual, and `lazy_sdk.complete_packages` runs the two ``__init__`` later, so the SDK ends up
   imported as it always is;
2. `serve` runs the SDK's stdio transport and runner with `Pending` as the server: the runner answers
   initialize itself from `initialization` (a test checks it equals what the full server would
   say), and hands every other request to `Pending`, which waits for the full server;
3. once the initialize reply is written (or a request waits, or a second has passed),
   `Pending.wanted` is set: `mcpdebug.serve` then builds the full server (the rest of the SDK, the
   store, the tools) in a worker thread and calls `Pending.ready`; from then on each request goes
   to that server's lowlevel server, as `Server.run` would send it.

Before `ready`, no server middleware wraps a request (the SDK's OpenTelemetry middleware is a no-op
without an exporter; its request-state boundary concerns tool calls, which wait for `ready`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_dual_era_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcpdebug.instructions import instructions, version

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.shared._stream_protocols import WriteStream
    from mcp.shared.message import SessionMessage

LOAD_AFTER: Final = 1.0
"""Seconds after which the full server is built even if no client has asked anything: live test
runs find the ingest endpoint (server.json) without waiting for a client."""


def initialization(read_only: bool) -> InitializationOptions:
    """The initialize reply's content, as `build_server`'s server gives it (`tests/test_startup.py`
    checks they agree): tools, prompts, resources and completion; a tool list that grows."""
    return InitializationOptions(
        server_name="mcpdebug",
        server_version=version(),
        capabilities=types.ServerCapabilities(
            prompts=types.PromptsCapability(list_changed=False),
            resources=types.ResourcesCapability(subscribe=False, list_changed=False),
            tools=types.ToolsCapability(list_changed=True),
            completions=types.CompletionsCapability(),
            extensions={},
        ),
        instructions=instructions(read_only),
    )


class _AnyParams(BaseModel):
    """What a request's params are validated as until the full server says what they must be."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class _Entry:
    """The runner's view of a handler: `mcp.server.lowlevel.server.HandlerEntry`'s two fields."""

    params_type: type[BaseModel]
    handler: Callable[[Any, Any], Awaitable[Any]]


class Pending:
    """The server the SDK's runner serves until the full one is built: what the runner asks of a
    `Server` (handlers, middleware, cache hints, the serverInfo stamp), answered by the full
    server's lowlevel server once `ready`, and until then by handlers that wait for it."""

    def __init__(self, options: InitializationOptions) -> None:
        self.options = options
        self.server: Server[Any] | None = None
        self.wanted = anyio.Event()
        """Set when the full server should be built: the initialize reply is out, or a request waits."""
        self._built = anyio.Event()

    def ready(self, server: Server[Any]) -> None:
        self.server = server
        self._built.set()

    @property
    def middleware(self) -> list[Any]:
        return self.server.middleware if self.server is not None else []

    @property
    def cache_hints(self) -> dict[str, Any]:
        return self.server.cache_hints if self.server is not None else {}

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        if self.server is not None:
            return self.server.server_info_stamp
        info = types.Implementation(name=self.options.server_name, version=self.options.server_version)
        return info.model_dump(by_alias=True, mode="json", exclude_none=True)

    def create_initialization_options(self) -> InitializationOptions:
        return self.options

    def get_request_handler(self, method: str) -> Any:
        if self.server is not None:
            return self.server.get_request_handler(method)
        return _Entry(_AnyParams, self._request)

    def get_notification_handler(self, method: str) -> Any:
        if self.server is not None:
            return self.server.get_notification_handler(method)
        return _Entry(_AnyParams, self._notification)

    async def _full(self) -> Server[Any]:
        self.wanted.set()
        await self._built.wait()
        assert self.server is not None
        return self.server

    async def _request(self, ctx: Any, _: _AnyParams) -> Any:
        """A request that came before the full server: handled by it as the runner would have."""
        server = await self._full()
        entry = server.get_request_handler(ctx.method)
        if entry is None:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        params = entry.params_type.model_validate({} if ctx.params is None else ctx.params, by_name=False)
        return await entry.handler(ctx, params)

    async def _notification(self, ctx: Any, _: _AnyParams) -> None:
        server = await self._full()
        entry = server.get_notification_handler(ctx.method)
        if entry is not None:
            params = entry.params_type.model_validate({} if ctx.params is None else ctx.params, by_name=False)
            await entry.handler(ctx, params)


class _Watched:
    """The transport's write stream, setting ``sent`` once its first message (the initialize reply)
    is on its way."""

    def __init__(self, stream: WriteStream[SessionMessage], sent: anyio.Event) -> None:
        self._stream = stream
        self._sent = sent

    async def send(self, item: SessionMessage) -> None:
        await self._stream.send(item)
        self._sent.set()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def serve(pending: Pending) -> None:
    """Serve MCP on stdin/stdout until the client closes it, as `MCPServer.run_stdio_async` does,
    with ``pending`` as the server; ``pending.wanted`` is set after the first reply at the latest."""

    async def deadline() -> None:
        with anyio.move_on_after(LOAD_AFTER):
            await pending.wanted.wait()
        pending.wanted.set()

    async with anyio.create_task_group() as tasks, stdio_server() as (read, write):
        tasks.start_soon(deadline)
        await serve_dual_era_loop(
            pending,  # type: ignore[arg-type]  # what the runner uses of a Server (see Pending)
            read,
            _Watched(write, pending.wanted),
            lifespan_state={},  # the lowlevel server's default lifespan, which MCPServer keeps
            init_options=pending.options,
        )
        tasks.cancel_scope.cancel()
