"""mcp-call: a shell agent's MCP client for the project's MCP server (the `mcpdebug` entry of `.mcp.json`).

    mcp-call --list                 the call syntax with an example, then the server's tools: name,
                                    what each answers, its arguments
    mcp-call --schema TOOL          one tool's whole input schema
    mcp-call --stop                 end the session (the next call starts a new one)
    mcp-call TOOL key=value ...     call a tool; a value is read as JSON when it parses (5, true, ["-x"]),
                                    else as a string; --args '{"k": ...}' passes them all as one JSON object

Like an MCP client, it keeps one server session for the whole conversation: the first call starts a
broker (a background process holding a stdio session to the server, reached over a unix socket in
the temp folder), and later calls go through it, so a held test, a debug session or tools enabled
within the session stay there between calls. The broker ends after 30 minutes without a call, on
`mcp-call --stop`, or once the project's .mcp.json is gone.

Installed into a trial workspace's venv by benchmarks/trials/setup.py (condition "with").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

IDLE_SECONDS = 30 * 60
START_SECONDS = 60
SERVER_NAME = "mcpdebug"
USAGE = (
    "usage: mcp-call TOOL key=value ...   (a value is JSON when it parses, else a string;\n"
    "       --args '{\"key\": ...}' passes them all as one JSON object)"
)


def find_root(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / ".mcp.json").is_file():
            return folder
    raise SystemExit("mcp-call: no .mcp.json in this folder or above it; run it inside the project")


def socket_path(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"mcp-call-{digest}.sock"


def server_entry(root: Path) -> dict[str, Any]:
    config = json.loads((root / ".mcp.json").read_text(encoding="utf-8"))
    servers = config.get("mcpServers", {})
    entry = servers.get(SERVER_NAME) or next(iter(servers.values()), None)
    if entry is None:
        raise SystemExit(f"mcp-call: {root / '.mcp.json'} configures no MCP server")
    return dict(entry)


# -- the broker: one stdio session to the server, many calls --------------------------------------


async def broker(root: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client

    entry = server_entry(root)
    env = {**get_default_environment(), **entry.get("env", {})}
    params = StdioServerParameters(
        command=entry["command"], args=list(entry.get("args", [])), env=env, cwd=str(root)
    )
    path = socket_path(root)
    last_call = time.monotonic()
    stopping = asyncio.Event()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal last_call
            last_call = time.monotonic()
            try:
                request = json.loads(await reader.readline())
                if request["op"] == "stop":
                    stopping.set()
                    reply = {"stopped": True}
                else:
                    reply = await answer(session, request)
            except Exception as exc:  # the caller sees every failure as an error reply
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            last_call = time.monotonic()

        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = await asyncio.start_unix_server(handle, path=str(path), limit=2**24)
        try:
            # until asked to stop, idle too long, or the project is gone
            while time.monotonic() - last_call < IDLE_SECONDS and (root / ".mcp.json").is_file():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), 5)
                if stopping.is_set():
                    break
        finally:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


async def answer(session: Any, request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "list":
        tools = (await session.list_tools()).tools
        return {"tools": [tool.model_dump(mode="json", exclude_none=True) for tool in tools]}
    result = await session.call_tool(request["tool"], request.get("arguments", {}))
    texts = [item.text for item in result.content if getattr(item, "type", "") == "text"]
    return {"is_error": bool(result.is_error), "texts": texts, "structured": result.structured_content}


# -- the command --------------------------------------------------------------------------------------


def ask(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    path = socket_path(root)
    for attempt in range(2):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(path))
                conn.sendall(json.dumps(request).encode() + b"\n")
                chunks = []
                while chunk := conn.recv(1 << 16):
                    chunks.append(chunk)
            return dict(json.loads(b"".join(chunks)))
        except (FileNotFoundError, ConnectionRefusedError):
            if attempt:
                raise
            # a socket nobody listens on is left by a broker that was killed: start afresh
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            start_broker(root)
    raise AssertionError("unreachable")


def start_broker(root: Path) -> None:
    path = socket_path(root)
    log = Path(tempfile.gettempdir()) / (path.stem + ".log")
    with open(log, "ab") as out:
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--broker", str(root)],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.1)
    raise SystemExit(f"mcp-call: the MCP server did not start within {START_SECONDS} s (log: {log})")


def parse_arguments(pairs: list[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    rest = list(pairs)
    while rest:
        item = rest.pop(0)
        if item == "--args":
            arguments.update(json.loads(rest.pop(0)))
            continue
        key, sep, value = item.partition("=")
        if not sep or not key or key.startswith("-"):
            raise SystemExit(f"mcp-call: arguments are key=value, not {item!r}\n{USAGE}")
        try:
            arguments[key] = json.loads(value)
        except json.JSONDecodeError:
            arguments[key] = value
    return arguments


def example_call(tools: list[dict[str, Any]]) -> str:
    """One call of a listed tool, as a native client's schema would show it: its first argument
    with the schema's default (or a placeholder of its type)."""
    for tool in tools:
        schema = tool.get("inputSchema") or tool.get("input_schema") or {}
        for name, prop in schema.get("properties", {}).items():
            if "default" in prop and prop["default"] is not None:
                value = prop["default"]
                shown = value if isinstance(value, str) else json.dumps(value)
                return f"mcp-call {tool['name']} {name}={shown}"
    return f"mcp-call {tools[0]['name']}" if tools else "mcp-call TOOL"


def show_tools(tools: list[dict[str, Any]]) -> None:
    print(USAGE)
    print(f"example: {example_call(tools)}")
    print("arguments of each tool below, `(required)` marked; `mcp-call --schema TOOL` for the whole schema")
    print()
    for tool in tools:
        description = (tool.get("description") or "").strip().splitlines()
        print(f"{tool['name']}: {description[0] if description else ''}")
        schema = tool.get("inputSchema") or tool.get("input_schema") or {}
        required = set(schema.get("required", []))
        for name, prop in schema.get("properties", {}).items():
            kind = prop.get("type") or "/".join(
                str(option.get("type", "?")) for option in prop.get("anyOf", [])
            )
            mark = " (required)" if name in required else ""
            print(f"    {name}: {kind}{mark}")


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `mcp-call --list | head` ends quietly
    if argv[:1] == ["--broker"]:
        asyncio.run(broker(Path(argv[1])))
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0].strip())
        return 0 if argv else 2
    root = find_root(Path.cwd())
    if argv[0] == "--stop":
        if socket_path(root).exists():
            with contextlib.suppress(OSError):
                ask(root, {"op": "stop"})
        return 0
    if argv[0] in ("--list", "--schema"):
        reply = ask(root, {"op": "list"})
        if "error" in reply:
            print(f"mcp-call: {reply['error']}", file=sys.stderr)
            return 1
        if argv[0] == "--list":
            show_tools(reply["tools"])
            return 0
        chosen = [t for t in reply["tools"] if len(argv) > 1 and t["name"] == argv[1]]
        if not chosen:
            print("mcp-call: name a tool listed by `mcp-call --list`", file=sys.stderr)
            return 2
        print(json.dumps(chosen[0], indent=2))
        return 0
    if argv[0].startswith("-"):
        print(
            f"mcp-call: unknown option {argv[0]!r}\n{USAGE}\n       mcp-call --list | --schema TOOL | --stop",
            file=sys.stderr,
        )
        return 2
    reply = ask(root, {"op": "call", "tool": argv[0], "arguments": parse_arguments(argv[1:])})
    if "error" in reply:
        print(f"mcp-call: {reply['error']}", file=sys.stderr)
        return 1
    if reply["texts"]:
        print("\n".join(reply["texts"]))
    else:
        print(json.dumps(reply["structured"], indent=2))
    if reply["is_error"] and _bad_arguments(reply):
        print(f"\n{USAGE}\n(`mcp-call --schema {argv[0]}` shows its arguments)", file=sys.stderr)
    return 1 if reply["is_error"] else 0


def _bad_arguments(reply: dict[str, Any]) -> bool:
    """The server refused the call's arguments (a validation error or an unknown tool)."""
    text = " ".join(reply.get("texts") or []).lower()
    return any(
        mark in text
        for mark in (
            "validation error",
            "unknown tool",
            "unexpected keyword",
            "missing",
            "field required",
            "extra inputs",
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
