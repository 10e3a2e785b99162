"""Helpers of the debug tests: a server with a debugger wired as `mcpdebug serve` wires it, and calls."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from conftest import FIXTURES
from mcpdebug.app import build_server
from mcpdebug.debug.manager import Debugger
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store

SCRIPTS = FIXTURES / "debug" / "scripts"
CALL_DEADLINE = 60.0
"""How long a tool call may take on a loaded machine (debugpy starting, a process ending)."""


def line_of(path: Path, mark: str) -> int:
    """The line marked ``# mark: <mark>`` in a fixture file."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(rf"# mark: {re.escape(mark)}\b", line):
            return number
    raise AssertionError(f"no '# mark: {mark}' in {path}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def structured(result: Any) -> dict[str, Any]:
    """A reply's data: the typed object; for a debug session's stop answered by a run tool
    (run_tests, wait_for_stop, continue_execution), the stop's fields with the reply's text."""
    data = dict(result.structured_content)
    if isinstance(data.get("debug"), dict):
        return {**data["debug"], "text": data.get("text") or data.get("message")}
    return data


class Calls:
    """An agent's tool calls through ``client``: a reply's data or text (an error fails the test), or
    the error it must be."""

    client: Client

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        with anyio.fail_after(CALL_DEADLINE):
            result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        return structured(result)

    async def text(self, tool: str, **arguments: Any) -> str:
        with anyio.fail_after(CALL_DEADLINE):
            result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        text: str = result.content[0].text
        return text

    async def error(self, tool: str, **arguments: Any) -> str:
        with anyio.fail_after(CALL_DEADLINE):
            result = await self.client.call_tool(tool, arguments)
        text: str = result.content[0].text
        assert result.is_error, text
        return text


@dataclass
class Debug(Calls):
    client: Client
    debugger: Debugger
    store: Store

    async def script(self, script: str, *args: str, **launch: Any) -> tuple[str, dict[str, Any]]:
        """A started script session: its id and start_debugging's reply (breakpoints set by ``launch``)."""
        breakpoints = launch.pop("breakpoints", [])
        created = await self.call("create_debug_session", name=Path(script).stem)
        sid = created["sessionId"]
        for bp in breakpoints:
            await self.call("set_breakpoint", session_id=sid, **bp)
        reply = await self.call(
            "start_debugging", session_id=sid, script_path=script, args=list(args), **launch
        )
        return sid, reply

    async def until_running(self, sid: str, pid_file: Path) -> None:
        """Until the session runs (debugpy attached: not "starting") and its script has written
        ``pid_file`` (it is past its start, spinning), however long a loaded machine takes."""
        with anyio.fail_after(CALL_DEADLINE):
            while True:
                sessions = (await self.call("list_debug_sessions"))["sessions"]
                state = next(s["state"] for s in sessions if s["id"] == sid)
                if state == "running" and pid_file.exists() and pid_file.read_text():
                    return
                assert state in ("starting", "running"), state
                await anyio.sleep(0.05)


@asynccontextmanager
async def debug_server(
    directory: Path, root: Path, *, idle_timeout: float = 1800.0, spare: bool = True
) -> AsyncIterator[Debug]:
    """The MCP server of `mcpdebug serve` in this event loop: ingest, runner, debugger, in-memory client."""
    store = Store(directory)
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    debugger = Debugger(store, sessions, runner, idle_timeout=idle_timeout, root=root, spare=spare)
    try:
        async with Client(build_server(store, sessions, runner, debugger=debugger)) as client:
            yield Debug(client, debugger, store)
    finally:
        with anyio.fail_after(30):
            await debugger.shutdown()
            await runner.close()
            await ingest.close()
        store.close()
