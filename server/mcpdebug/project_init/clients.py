"""The `mcpdebug` server in the project's MCP client configs, merged into what is there.

Claude Code reads `.mcp.json` (``mcpServers``), VS Code `.vscode/mcp.json` (``servers``, each with
``"type": "stdio"``), Cursor `.cursor/mcp.json` (``mcpServers``). Other servers and top-level keys
(VS Code's ``inputs``) stay; in an existing `mcpdebug` entry the user's own keys (``disabled``,
``autoApprove``, ...), extra `serve` flags (``--tools``, ``--read-only``) and ``env`` variables stay,
and the command, ``--dir`` and the variables init found are brought up to date.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpdebug.project_init.changes import read_if_any
from mcpdebug.project_init.environment import ServerCommand

SERVER_NAME = "mcpdebug"


@dataclass(frozen=True)
class Client:
    name: str
    """As `--clients` names it."""
    title: str
    path: str
    """The config file, relative to the project."""
    key: str
    """The object of servers in it."""
    stdio_type: bool
    """Whether its entries say ``"type": "stdio"``."""


CLIENTS = {
    "claude": Client("claude", "Claude Code", ".mcp.json", "mcpServers", True),
    "vscode": Client("vscode", "VS Code", ".vscode/mcp.json", "servers", True),
    "cursor": Client("cursor", "Cursor", ".cursor/mcp.json", "mcpServers", False),
}


class ClientConfigError(Exception):
    """A config file that cannot be merged into; the message says what to add by hand."""


def render(project: Path, client: Client, server: ServerCommand) -> tuple[Path, str | None, str]:
    """The config file, its text now (None: no such file) and its text with the server in it."""
    path = project / client.path
    before = read_if_any(path)
    ours = entry(client, server)
    data: Any = {}
    if before is not None and before.strip():
        try:
            data = json.loads(before)
        except ValueError:
            raise ClientConfigError(_by_hand(path, client, ours, "is not plain JSON (comments?)")) from None
    if not isinstance(data, dict) or not isinstance(data.setdefault(client.key, {}), dict):
        raise ClientConfigError(_by_hand(path, client, ours, f'has no "{client.key}" object'))
    servers = data[client.key]
    merged = merge(servers.get(SERVER_NAME), ours)
    if before is not None and servers.get(SERVER_NAME) == merged:
        return path, before, before
    servers[SERVER_NAME] = merged
    text = json.dumps(data, indent=_indent(before), ensure_ascii=False) + "\n"
    return path, before, text


def entry(client: Client, server: ServerCommand) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "stdio"} if client.stdio_type else {}
    found.update(command=server.command, args=list(server.args))
    if server.env:
        found["env"] = dict(server.env)
    return found


def merge(old: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """``ours`` over an existing entry: the user's keys, extra flags and variables kept."""
    if not isinstance(old, dict) or "url" in old or old.get("type", "stdio") != "stdio":
        return ours  # not a stdio entry (or not an entry): ours replaces it
    merged = dict(old)
    merged.update({k: v for k, v in ours.items() if k != "env"})
    merged["args"] = ours["args"] + _extra_flags(old.get("args"))
    theirs = old.get("env")
    env = {**(theirs if isinstance(theirs, dict) else {}), **ours.get("env", {})}
    if env:
        merged["env"] = env
    else:
        merged.pop("env", None)
    return merged


def _extra_flags(args: Any) -> list[str]:
    """The flags an existing entry gives `serve` besides ``--dir`` (``--tools``, ``--read-only``)."""
    if not isinstance(args, list) or "serve" not in args:
        return []
    rest = [str(a) for a in args[args.index("serve") + 1 :]]
    kept: list[str] = []
    skip = False
    for arg in rest:
        if skip:
            skip = False
        elif arg == "--dir":
            skip = True
        elif not arg.startswith("--dir="):
            kept.append(arg)
    return kept


def _indent(text: str | None) -> int | str:
    match = re.search(r"^([ \t]+)\S", text or "", re.MULTILINE)
    if match is None:
        return 2
    return "\t" if "\t" in match[1] else len(match[1])


def _by_hand(path: Path, client: Client, ours: dict[str, Any], problem: str) -> str:
    return (
        f'{path} {problem}, so it was left as it is: add this under "{client.key}" yourself: '
        f'"{SERVER_NAME}": {json.dumps(ours)}'
    )
