"""`mcpdebug serve` over stdio answers initialize before the rest is loaded (`mcpdebug.stdio_start`),
and what it says then is what the full server says; requests that come meanwhile are answered by it.
benchmarks/startup.py has the figures."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import MCPDEBUG
from mcpdebug.app import build_server
from mcpdebug.stdio_start import initialization
from mcpdebug.store import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("read_only", [False, True])
def test_the_early_initialize_reply_is_the_full_servers(tmp_path: Path, read_only: bool) -> None:
    server = build_server(Store(tmp_path / ".mcpdebug"), groups=["core"], read_only=read_only)
    full = server.lowlevel.create_initialization_options()
    assert initialization(read_only).model_dump() == full.model_dump()
    assert full.capabilities.tools.list_changed is True


def test_the_sdk_is_imported_in_two_steps_and_ends_whole() -> None:
    """What the initialize reply needs loads without the SDK's server classes, HTTP stack or client;
    completing the packages leaves the SDK as a plain import would."""
    probe = textwrap.dedent(
        """
        import json, sys
        from mcpdebug import lazy_sdk
        deferred = lazy_sdk.defer_packages()
        from mcpdebug import stdio_start
        heavy = ("mcp.server.mcpserver", "mcp.server.lowlevel.server", "mcp.client", "starlette",
                 "uvicorn", "httpx2", "mcpdebug.app", "mcpdebug.store")
        first = sorted(name for name in heavy if name in sys.modules)
        lazy_sdk.complete_packages(deferred)
        import mcp
        from mcp.server import MCPServer
        from mcp.server.mcpserver import MCPServer as Same
        again = lazy_sdk.defer_packages()  # the SDK is imported now: nothing to defer
        print(json.dumps({"first": first, "deferred": len(deferred), "again": len(again),
                          "whole": hasattr(mcp, "Client") and MCPServer is Same}))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"first": [], "deferred": 2, "again": 0, "whole": True}


async def test_a_handshake_client_is_answered_at_once_and_then_by_the_full_server(tmp_path: Path) -> None:
    folder = tmp_path / ".mcpdebug"
    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--dir", str(folder)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "mcpdebug" and "get_run_summary" in (init.instructions or "")
        tools = await session.list_tools()  # asked while the full server may still be loading
        assert "get_failure" in {t.name for t in tools.tools}
        reply = await session.call_tool("list_sessions", {})
        assert not reply.is_error and "No sessions recorded" in reply.content[0].text  # type: ignore[union-attr]
        info = json.loads((folder / "server.json").read_text())  # the ingest endpoint is advertised
        assert info["url"].startswith("ws://127.0.0.1:")
    assert not (folder / "server.json").exists()  # and withdrawn on exit


async def test_a_2026_client_waits_for_the_full_server_on_its_first_request(tmp_path: Path) -> None:
    """A client of the 2026-07-28 protocol sends no initialize: its first request (server/discover)
    is the one that waits."""
    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--dir", str(tmp_path / ".mcpdebug")])
    async with Client(params) as client:
        tools = await client.list_tools()
        assert "enable_tools" in {t.name for t in tools.tools}
        reply = await client.call_tool("get_run_summary", {})
        assert reply.is_error and "No runs recorded yet" in reply.content[0].text  # type: ignore[union-attr]


async def test_the_ingest_endpoint_is_advertised_before_any_client_request(tmp_path: Path) -> None:
    """A client that starts the server and says nothing yet: live test runs still find it."""
    folder = tmp_path / ".mcpdebug"
    server = subprocess.Popen(
        [MCPDEBUG, "serve", "--dir", str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(60):
            while not (folder / "server.json").exists():
                await anyio.sleep(0.05)
        assert json.loads((folder / "server.json").read_text())["pid"] == server.pid
    finally:
        assert server.stdin is not None
        server.stdin.close()  # end of input ends the server, which withdraws the advertisement
        assert server.wait(timeout=60) == 0
    assert not (folder / "server.json").exists()
