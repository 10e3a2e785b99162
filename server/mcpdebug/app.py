"""The MCP server: built here, populated by the tool groups (one module per concern, see `mcpdebug.tools`)
that `tools.groups` selects (`mcpdebug serve` lists the core set; enable_tools lists more).

Every tool returns a typed reply (`mcpdebug.replies`): the same information as ``structuredContent``
and as text, so an agent sees all of it whichever form its client shows it.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings

from mcpdebug.debug.manager import Debugger
from mcpdebug.instructions import instructions, version
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from mcpdebug.tools import guide
from mcpdebug.tools.catalog import Catalog
from mcpdebug.tools.context import ToolContext
from mcpdebug.tools.groups import GROUPS, select
from mcpdebug.tools.server import ToolServer

__all__ = ["GROUPS", "DebugServer", "build_server"]  # GROUPS: the tool groups by name (`tools.groups`)

DebugServer = ToolServer
"""The server class (`mcpdebug.tools.server`), by the name `serve` knows it."""


def build_server(
    store: Store,
    sessions: Sessions | None = None,
    runner: Runner | None = None,
    processes: ProcessManager | None = None,
    debugger: Debugger | None = None,
    *,
    groups: Iterable[str] | None = None,
    read_only: bool = False,
    token_verifier: TokenVerifier | None = None,
) -> ToolServer:
    """The MCP server over ``store`` with the tools of ``groups``: group names, "core" or "all"
    (`tools.groups.select`; default: every group, as in-process callers and tests want it;
    `mcpdebug serve` passes its ``--tools``, by default the core set);
    ``sessions``, ``runner``, ``processes`` and ``debugger`` (from `serve`) make the live, process and
    debug tools work.

    ``read_only`` leaves out every tool that runs code or changes a process (a filter on the tools'
    annotations, beside the choice of groups); ``token_verifier`` makes the HTTP transport require
    its bearer token on every request (see `mcpdebug.http_auth`).
    """
    server = ToolServer(
        "mcpdebug",
        read_only=read_only,
        instructions=instructions(read_only),
        version=version(),
        token_verifier=token_verifier,
        # The SDK turns its bearer middleware on with auth settings; the token is static, not
        # issued by OAuth, so no authorization server or resource metadata is advertised and
        # issuer_url (a required field) is never served.
        auth=AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)  # type: ignore[arg-type]
        if token_verifier is not None
        else None,
    )
    live_sessions = sessions if sessions is not None else Sessions(store)
    test_runner = runner if runner is not None else Runner(store, live_sessions, url=None, token=None)
    context = ToolContext(
        store=store,
        sessions=live_sessions,
        runner=test_runner,
        processes=processes
        if processes is not None
        else ProcessManager(store, live_sessions, url=None, token=None),
        debugger=debugger if debugger is not None else Debugger(store, live_sessions, test_runner),
    )
    selection = select(groups) if groups is not None else dict.fromkeys(GROUPS)  # raises on unknown names
    catalog = server.catalog = Catalog(server, context)
    catalog.enable(selection)
    catalog.register()
    guide.register(server, context)
    return server
