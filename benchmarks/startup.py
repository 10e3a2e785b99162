"""Time `mcpdebug serve` over stdio from launch to its initialize reply, as an agent's client sees it.

Each round starts a fresh `mcpdebug serve --dir <scratch>` with the MCP SDK's own stdio client
(`mcp.client.stdio.stdio_client`, the environment it passes), and times:

- initialize: from just before the launch to the initialize reply (wall), and the server's CPU time
  (user + system, read from /proc when the reply arrives);
- tools/list: the reply to the first tools/list after it (wall, from launch), and its size in
  characters of compact JSON as the client received it;
- first tool: the reply to a first call of `list_sessions` (wall, from launch).

Bytecode must be cached for figures that mean anything: the SDK's client does not pass
PYTHONDONTWRITEBYTECODE on, and one unmeasured round runs first. Reports medians with the load
average before and after, and each round's idle share of the machine's CPUs from launch to the
initialize reply (from /proc/stat: on 2 CPUs, about 0.5 when nothing else runs, since the server
uses one). The machine is shared: with ``--quiet 0.35`` only rounds during which that much stood
idle count, launched until ``--rounds`` of them were seen (at most ``--attempts`` launches).

Usage: python benchmarks/startup.py [--rounds 5] [--quiet 0.35] [--args "--tools all"] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))
TICKS = os.sysconf("SC_CLK_TCK")


def compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _children() -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with open(task / "children") as fh:
            pids += [int(p) for p in fh.read().split()]
    return pids


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` so far, from /proc (fields 14 and 15 of its stat line)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _cpu_ticks() -> tuple[int, int]:
    """(idle, total) ticks of every CPU since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    return values[3] + values[4], sum(values)


async def one_round(folder: Path, extra: list[str]) -> dict[str, float]:
    """One launch; the server's log goes to a file beside the store, not to this terminal."""
    # The SDK passes only HOME, PATH and a few others: PYTHONDONTWRITEBYTECODE (set in this sandbox)
    # does not reach the server, so its bytecode is cached as on a user's machine.
    params = StdioServerParameters(
        command=MCPDEBUG, args=["serve", "--dir", str(folder), *extra], env=get_default_environment()
    )
    with open(folder.parent / "serve.log", "a") as log:
        return await _timed(params, log, time.perf_counter())


async def _timed(params: StdioServerParameters, log: Any, began: float) -> dict[str, float]:
    idle_before, total_before = _cpu_ticks()
    async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter() - began
        idle_after, total_after = _cpu_ticks()
        servers = _children()
        cpu = _cpu_seconds(servers[0]) if len(servers) == 1 else float("nan")
        listed = await session.list_tools()
        tools_list = time.perf_counter() - began
        chars = compact(listed.model_dump(by_alias=True, exclude_none=True, mode="json"))
        result = await session.call_tool("list_sessions", {})
        first_tool = time.perf_counter() - began
        assert not result.is_error, result.content
    return {
        "initialize": initialized,
        "idle": (idle_after - idle_before) / max(total_after - total_before, 1),
        "cpu": cpu,
        "tools_list": tools_list,
        "first_tool": first_tool,
        "chars": chars,
        "tools": len(listed.tools),
    }


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quiet", type=float, default=0.0, help="count only rounds with this idle share")
    parser.add_argument("--attempts", type=int, default=200, help="most launches for --quiet")
    parser.add_argument("--args", default="", help="extra `mcpdebug serve` arguments, e.g. '--tools all'")
    parser.add_argument("--markdown", help="append the result as markdown to this file")
    args = parser.parse_args()
    extra = shlex.split(args.args)
    load_before = _load()
    rows: list[dict[str, float]] = []
    launched = 0
    with tempfile.TemporaryDirectory(prefix="mcp-startup-") as scratch:
        folder = Path(scratch) / ".mcpdebug"
        anyio.run(one_round, folder, extra)  # warm: bytecode written, the store created
        while len(rows) < args.rounds and launched < max(args.attempts, args.rounds):
            launched += 1
            row = anyio.run(one_round, folder, extra)
            if row["idle"] >= args.quiet:
                rows.append(row)
    load_after = _load()
    if not rows:
        sys.exit(f"no round of {launched} had an idle share of {args.quiet}: the machine is busy")

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    each = ", ".join(f"{r['initialize']:.3f}" for r in rows)
    idle = ", ".join(f"{r['idle']:.2f}" for r in rows)
    kept = f"; {len(rows)} of {launched} launches had an idle share >= {args.quiet}" if args.quiet else ""
    command = " ".join(["python benchmarks/startup.py", *sys.argv[1:]])
    text = "\n".join(
        [
            f"`{command}` ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load "
            f"{load_before} before, {load_after} after; idle share {idle}{kept})",
            "",
            f"- initialize reply: median **{median('initialize'):.3f} s** wall ({each}), server CPU "
            f"{median('cpu'):.3f} s",
            f"- tools/list reply: {median('tools_list'):.3f} s from launch; {rows[0]['tools']} tools, "
            f"{rows[0]['chars']:,} characters of compact JSON",
            f"- first tool reply (list_sessions): {median('first_tool'):.3f} s from launch",
        ]
    )
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
