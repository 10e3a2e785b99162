"""Measure what an agent sees of the MCP server: tools/list, the largest replies, hostile arguments,
a catastrophic regex, and `mcpdebug show` of a big run.

1. tools/list: the default list as a client of `mcpdebug serve` receives it (the SDK's stdio client,
   compact JSON of the whole result: target at most 25,000 characters), and per tool of every group,
   name + description + inputSchema (what a client puts in the model's context) and the outputSchema
   beside it, in characters of compact JSON.
2. The largest replies as the model sees them: the JSON of structuredContent (what Claude Code and
   VS Code show) and the text, for calls made to be large on a run of --tests tests (--failures of
   them failing with long messages, one printing --lines lines).
3. Hostile arguments: --hostile calls generated from tools/list (tests/hostile.py, as the suite's
   test does), counting replies that are not clean errors and crashes (target 0 each).
4. A catastrophic regex ((a|aa)+$ on lines of a's) in search_output and get_logs, --regex-rounds
   times each, with get_run_summary called every 50 ms meanwhile: the worst reply time of the regex
   (target < 2 s) and of the other calls.
5. `mcpdebug show` of the big run as a subprocess, twice (target < 1 s), and its output size.

Usage: python benchmarks/mcp_surface.py [--tests 20000] [--hostile 5000] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "server"), str(ROOT)]

from helpers import Events  # noqa: E402
from hostile import CLEAN, calls, target_store  # noqa: E402
from mcpdebug.app import build_server  # noqa: E402
from mcpdebug.store import Store  # noqa: E402

MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))
CATASTROPHIC = "(a|aa)+$"


def compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


async def tools_list(client: Client) -> list[dict[str, Any]]:
    rows = []
    for tool in (await client.list_tools()).tools:
        rows.append(
            {
                "tool": tool.name,
                "context": len(tool.name) + len(tool.description or "") + compact(tool.input_schema),
                "output_schema": compact(tool.output_schema) if tool.output_schema else 0,
            }
        )
    return rows


async def default_surface(folder: Path) -> dict[str, Any]:
    """The default tools/list of `mcpdebug serve` over stdio, as the SDK's client receives it."""
    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--dir", str(folder / ".mcpdebug")])
    with open(folder / "serve.log", "w") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
    return {
        "chars": compact(listed.model_dump(by_alias=True, exclude_none=True, mode="json")),
        "tools": sorted(t.name for t in listed.tools),
    }


def big_run(folder: Path, tests: int, failures: int, lines: int) -> tuple[Store, str]:
    """A finished run of ``tests`` tests recorded straight into a store (what `pytest --mcp-debug`
    of such a suite stores): ``failures`` fail with a long message, one prints ``lines`` lines."""
    store = Store(folder / ".mcpdebug")
    run_id = "20261124-120000-b16b16"
    events = Events(run_id, step=0.001)
    batch: list[Any] = [events.run_started(label=f"pytest tests/ ({tests} tests)"), events.start()]
    for i in range(tests):
        nodeid = f"tests/test_module_{i // 100:03d}.py::test_case_{i:05d}[param-{i % 7}]"
        if i < failures:
            message = f"AssertionError: order {i} total was {i * 3} but expected {i * 3 + 1} " + "x" * 150
            batch += events.test(nodeid, "failed", message=message)
        elif i == failures:
            output = [("call", "stdout", [f"line {n:06d} " + "payload " * 10 for n in range(lines)])]
            batch += events.test(nodeid, "passed", output)
        else:
            batch += events.test(nodeid, "passed")
        if len(batch) > 5000:
            store.apply(batch)
            batch = []
    batch += events.run_finished(exit_status=1)
    store.apply(batch)
    return store, run_id


async def largest_replies(store: Store, run_id: str, failures: int) -> list[dict[str, Any]]:
    noisy = f"tests/test_module_{failures // 100:03d}.py::test_case_{failures:05d}[param-{failures % 7}]"
    asks: list[tuple[str, dict[str, Any]]] = [
        ("list_sessions", {}),
        ("get_run_summary", {}),
        ("list_tests", {"limit": 1000}),
        ("list_tests", {"outcome": "failed", "limit": 1000}),
        ("get_test", {"test": noisy, "tail_lines": 2000}),
        ("get_output", {"test": noisy}),
        ("get_output", {"test": noisy, "start": 1, "end": -1}),
        ("search_output", {"pattern": "payload", "test": noisy, "max_results": 1000, "context": 50}),
        ("search_output", {"pattern": "line 0000", "max_results": 1000}),
        ("get_logs", {"labels": ["latest"], "lines": 10_000, "max_results": 10_000}),
        ("get_failure", {}),
        ("get_hang", {}),
    ]
    rows = []
    async with Client(build_server(store)) as client:
        for name, args in asks:
            began = time.perf_counter()
            result = await client.call_tool(name, args)
            took = time.perf_counter() - began
            assert not result.is_error, (name, result.content[0].text[:500])
            rows.append(
                {
                    "call": f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})",
                    "json": compact(result.structured_content),
                    "text": len(result.content[0].text),
                    "seconds": round(took, 3),
                }
            )
    return rows


def hostile_calls(folder: Path, count: int) -> dict[str, Any]:
    from anyio.from_thread import start_blocking_portal

    store = target_store(folder)
    counts = {"calls": 0, "not_error": 0, "crashed": 0, "unclear": 0, "too_long": 0}
    examples: list[str] = []
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(Client(build_server(store))) as client,
    ):
        tools = portal.call(client.list_tools).tools

        @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(call=calls(tools))
        def one(call: tuple[str, dict[str, Any]]) -> None:
            name, args = call
            result = portal.call(client.call_tool, name, args)
            text = result.content[0].text
            counts["calls"] += 1
            if not result.is_error:
                counts["not_error"] += 1
                examples.append(f"not an error: {name} {str(args)[:120]}")
            elif text == f"Error executing tool {name}" or "Traceback" in text:
                counts["crashed"] += 1
                examples.append(f"crash: {name} {str(args)[:120]}")
            elif not CLEAN.search(text):
                counts["unclear"] += 1
                examples.append(f"unclear: {name}: {text[:160]}")
            if len(text) > 2000:
                counts["too_long"] += 1

        one()
        assert not portal.call(client.call_tool, "list_sessions", {}).is_error
    store.close()
    return {**counts, "examples": examples[:10]}


async def timed(client: Client, tool: str, args: dict[str, Any], done: dict[str, Any]) -> None:
    began = time.perf_counter()
    done["result"] = await client.call_tool(tool, args)
    done["seconds"] = time.perf_counter() - began


async def catastrophic(folder: Path, rounds: int) -> dict[str, Any]:
    store = target_store(folder)
    worst = {"search_output": 0.0, "get_logs": 0.0}
    others: list[float] = []
    async with Client(build_server(store)) as client:
        for _ in range(rounds):
            for tool, args in (
                ("search_output", {"pattern": CATASTROPHIC}),
                ("get_logs", {"labels": ["latest"], "pattern": CATASTROPHIC}),
            ):
                done: dict[str, Any] = {}

                async def slow(
                    tool: str = tool, args: dict[str, Any] = args, done: dict[str, Any] = done
                ) -> None:
                    began = time.perf_counter()
                    done["result"] = await client.call_tool(tool, args)
                    done["seconds"] = time.perf_counter() - began

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(slow)
                    while "result" not in done:
                        began = time.perf_counter()
                        await client.call_tool("get_run_summary", {})
                        others.append(time.perf_counter() - began)
                        await anyio.sleep(0.05)
                result = done["result"]
                assert result.is_error and "backtracks catastrophically" in result.content[0].text
                worst[tool] = max(worst[tool], done["seconds"])
    store.close()
    return {
        "worst": {k: round(v, 3) for k, v in worst.items()},
        "others_worst": round(max(others), 3),
        "others_median": round(statistics.median(others), 3),
        "others": len(others),
    }


def show_timing(folder: Path, run_id: str) -> list[dict[str, Any]]:
    rows = []
    env = {**os.environ, "COLUMNS": "120"}
    for attempt in ("first", "second"):
        began = time.perf_counter()
        done = subprocess.run(
            [MCPDEBUG, "show", run_id, "--dir", str(folder)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        rows.append(
            {"attempt": attempt, "seconds": round(time.perf_counter() - began, 3), "bytes": len(done.stdout)}
        )
    return rows


def markdown(report: dict[str, Any], command: str) -> str:
    tools = report["tools_list"]
    context = [t["context"] for t in tools]
    default = report["default"]
    core = set(default["tools"])
    lines = [
        f"Command: `{command}`",
        "",
        f"**Default tools/list** of `mcpdebug serve` (SDK stdio client, compact JSON of the result): "
        f"{default['chars']:,} characters, {len(default['tools'])} tools (target at most 25,000).",
        "",
        f"**Every tool** (`--tools all`, {len(tools)} tools; **bold**: listed by default): name + "
        f"description + inputSchema {sum(context):,} characters, "
        f"{sum(context) / len(tools):,.0f} a tool on average (target at most 1,000), largest "
        f"{max(context):,} ({max(tools, key=lambda t: t['context'])['tool']}); output schemas beside them "
        f"{sum(t['output_schema'] for t in tools):,} characters.",
        "",
        "| tool | name + description + inputSchema | outputSchema |",
        "| --- | ---: | ---: |",
        *(
            f"| {'**' if t['tool'] in core else ''}`{t['tool']}`{'**' if t['tool'] in core else ''} | "
            f"{t['context']:,} | {t['output_schema']:,} |"
            for t in tools
        ),
        "",
        f"**Largest replies** on a run of {report['tests']:,} tests ({report['failures']} failing, one "
        f"printing {report['lines']:,} lines), as the model sees them (JSON of structuredContent) and "
        "as text:",
        "",
        "| call | structuredContent JSON | text | seconds |",
        "| --- | ---: | ---: | ---: |",
        *(f"| `{r['call']}` | {r['json']:,} | {r['text']:,} | {r['seconds']} |" for r in report["replies"]),
        "",
    ]
    h = report["hostile"]
    lines += [
        f"**Hostile arguments**: {h['calls']:,} calls generated from tools/list; not an error "
        f"{h['not_error']}, crashed {h['crashed']}, error without what is valid {h['unclear']}, over 2,000 "
        f"characters {h['too_long']} (targets 0).",
        "",
    ]
    c = report["catastrophic"]
    lines += [
        f"**Catastrophic regex** `{CATASTROPHIC}`, {report['regex_rounds']} rounds each: worst reply "
        f"search_output {c['worst']['search_output']} s, get_logs {c['worst']['get_logs']} s (target < 2 s); "
        f"{c['others']} get_run_summary calls meanwhile, worst {c['others_worst']} s, median "
        f"{c['others_median']} s.",
        "",
        f"**mcpdebug show** of the {report['tests']:,}-test run: "
        + ", ".join(f"{r['attempt']} {r['seconds']} s ({r['bytes']:,} bytes)" for r in report["show"])
        + " (target < 1 s).",
    ]
    return "\n".join(lines)


def main() -> None:
    logging.getLogger("mcp").setLevel(logging.WARNING)  # each refused call is logged at INFO
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20_000)
    parser.add_argument("--failures", type=int, default=200)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--hostile", type=int, default=5_000)
    parser.add_argument("--regex-rounds", type=int, default=5)
    parser.add_argument("--markdown", help="append the report as markdown to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-surface-") as scratch:
        base = Path(scratch)
        (base / "big").mkdir()
        store, run_id = big_run(base / "big", args.tests, args.failures, args.lines)

        async def surface() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            async with Client(build_server(store)) as client:
                listed = await tools_list(client)
            return listed, await largest_replies(store, run_id, args.failures)

        listed, replies = anyio.run(surface)
        store.close()
        (base / "hostile").mkdir()
        (base / "regex").mkdir()
        (base / "default").mkdir()
        report = {
            "default": anyio.run(default_surface, base / "default"),
            "tests": args.tests,
            "failures": args.failures,
            "lines": args.lines,
            "regex_rounds": args.regex_rounds,
            "tools_list": listed,
            "replies": replies,
            "hostile": hostile_calls(base / "hostile", args.hostile),
            "catastrophic": anyio.run(catastrophic, base / "regex", args.regex_rounds),
            "show": show_timing(base / "big", run_id),
        }
    command = "python benchmarks/mcp_surface.py " + " ".join(sys.argv[1:])
    text = markdown(report, command.strip())
    print(text)
    print(json.dumps(report["hostile"]["examples"], indent=1))
    if args.markdown:
        with open(args.markdown, "a") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
