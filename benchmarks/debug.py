"""Debugging through debugpy: what it costs a test, how fast a debug session starts and steps.

Usage: python benchmarks/debug.py [--calls 1000000] [--repeats 3] [--flow-repeats 5] [--skip-overhead]

Run it with the interpreter to measure (each needs the project installed: `pip install -e .`).

1. Overhead on a test making N calls (its loop timed by the test itself, so process start-up and
   collection are left out), each mode `--repeats` times, interleaved: plain `pytest --mcp-debug`;
   run_tests(debug=True) without breakpoints; with a breakpoint elsewhere in the same file (never
   hit); with a breakpoint whose condition is false in the hot function (evaluated at every call).
2. Through MCP over stdio against a real `mcpdebug serve` (the SDK's client), medians of
   `--flow-repeats`: each step's round trip (step_over, step_into, step_out, evaluate_expression,
   get_local_variables) in a debug run stopped at a breakpoint.
3. The peers' flow of FIELD-NOTES on a 20-step loop, as a script: a breakpoint with condition
   i == 7, start, read locals, step into, evaluate i * 100, run to the end: calls, characters of the
   replies, step, evaluate.

Start to first stop is `debug_start.py`'s (here sessions start back to back, so a spare debuggee
the server starts for the next session may still be importing when it is asked for).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from overhead import bytecode_env, clean_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from mcpdebug.debug.manager import Debugger
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store

HOT = """
import os
import time


def hot(n):
    return n + 1  # the false condition's line


def elsewhere():
    return 0  # the breakpoint elsewhere


def test_calls():
    calls = int(os.environ["BENCH_CALLS"])
    start = time.perf_counter()
    total = 0
    for n in range(calls):
        total = hot(total)
    elapsed = time.perf_counter() - start
    with open(os.environ["BENCH_OUT"], "a") as out:
        out.write(f"{elapsed}\\n")
    assert total == calls
"""

LOOP = """
def price(i):
    base = i * 2
    return base + 1


def main():
    total = 0
    for i in range(20):
        total += price(i)
    print("total", total)


main()
"""

TEST_LOOP = """
def price(i):
    base = i * 2
    return base + 1


def test_total():
    total = 0
    for i in range(20):
        total += price(i)
    assert total == 400
"""

FAST = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"]
MODES = ("plain", "attached", "breakpoint elsewhere", "false condition")


def line(source: str, marker: str) -> int:
    return next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)


# 1. Overhead -----------------------------------------------------------------------------------------


async def overhead(folder: Path, calls: int, repeats: int) -> dict[str, list[float]]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_hot.py").write_text(HOT)
    store = Store(folder / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    debugger = Debugger(store, sessions, runner, root=folder)
    breakpoints = {
        "plain": None,
        "attached": [],
        "breakpoint elsewhere": [{"file": "test_hot.py", "line": line(HOT, "breakpoint elsewhere")}],
        "false condition": [
            {"file": "test_hot.py", "line": line(HOT, "false condition"), "condition": "n < 0"}
        ],
    }
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for _ in range(repeats):
            for mode in MODES:
                out = folder / f"{mode}.txt"
                out.unlink(missing_ok=True)
                env = {"BENCH_CALLS": str(calls), "BENCH_OUT": str(out)}
                specs = breakpoints[mode]
                if specs is None:
                    managed = await runner.start([*FAST, "test_hot.py"], str(folder), env, False)
                    await managed.process.wait()
                else:
                    session = await debugger.start_tests(
                        [*FAST, "test_hot.py"], str(folder), env, specs, stop_on_entry=False
                    )
                    await session.wait(0, 600)
                    assert session.state == "terminated", session.state
                    await debugger.close(session.id)
                times[mode].append(float(out.read_text().split()[0]))
                print(f"  {mode}: {times[mode][-1]:.3f} s", file=sys.stderr)
    finally:
        await debugger.shutdown()
        await runner.close()
        await ingest.close()
        store.close()
    return times


# 2 and 3. Through MCP over stdio ---------------------------------------------------------------------


class Timed:
    """Calls over stdio with their wall time and the characters of each reply."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls: list[tuple[str, float, int]] = []

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        start = time.perf_counter()
        result = await self.client.call_tool(tool, arguments)
        elapsed = time.perf_counter() - start
        text = result.content[0].text
        assert not result.is_error, text
        self.calls.append((tool, elapsed, len(text)))
        data: dict[str, Any] = result.structured_content or {}
        if set(data) == {"result"}:  # a tool still answering JSON text
            data = json.loads(data["result"])
        return data


async def with_server(folder: Path, body: Callable[[Timed], Awaitable[None]]) -> Timed:
    mcpdebug = str(Path(sys.executable).with_name("mcpdebug"))
    params = StdioServerParameters(
        command=mcpdebug, args=["serve", "--log-level", "warning"], cwd=str(folder)
    )
    async with Client(params) as client:
        timed = Timed(client)
        await body(timed)
        return timed


async def steps(folder: Path, repeats: int) -> dict[str, list[float]]:
    (folder / "test_loop.py").write_text(TEST_LOOP)
    body = line(TEST_LOOP, "total += price(i)")
    times: dict[str, list[float]] = {}

    async def flow(call: Timed) -> None:
        for _ in range(repeats):
            stop = await call(
                "run_tests",
                args=[*FAST, "test_loop.py"],
                debug=True,
                breakpoints=[{"file": "test_loop.py", "line": body, "condition": "i == 7"}],
            )
            sid = stop.get("session_id") or stop["sessionId"]
            for tool, arguments in (
                ("step_into", {}),
                ("get_local_variables", {}),
                ("evaluate_expression", {"expression": "i * 100"}),
                ("step_over", {}),
                ("step_out", {}),
            ):
                await call(tool, session_id=sid, **arguments)
                times.setdefault(tool, []).append(call.calls[-1][1])
            await call("close_debug_session", session_id=sid)

    await with_server(folder, flow)
    return times


async def peers_flow(folder: Path, repeats: int) -> dict[str, Any]:
    (folder / "loop.py").write_text(LOOP)
    body = line(LOOP, "total += price(i)")
    marks: dict[str, list[float]] = {"step": [], "evaluate": []}
    sizes: dict[str, int] = {}

    async def flow(call: Timed) -> None:
        for _ in range(repeats):
            call.calls.clear()
            sid = (await call("create_debug_session", name="loop"))["sessionId"]
            await call("set_breakpoint", session_id=sid, file="loop.py", line=body, condition="i == 7")
            stop = await call("start_debugging", session_id=sid, script_path="loop.py")
            assert {v["name"]: v["value"] for v in stop["locals"]}["i"] == "7"  # the stop has the locals
            await call("step_into", session_id=sid)
            marks["step"].append(call.calls[-1][1])
            await call("evaluate_expression", session_id=sid, expression="i * 100")
            marks["evaluate"].append(call.calls[-1][1])
            end = await call("continue_execution", session_id=sid)
            assert (end.get("debug") or end)["state"] == "terminated", end
            sizes["calls"], sizes["characters"] = len(call.calls), sum(c[2] for c in call.calls)
        tools = (await call.client.list_tools()).tools
        sizes["tools"] = len(tools)
        sizes["tools/list characters"] = sum(
            len(t.name) + len(t.description or "") + len(json.dumps(t.input_schema)) for t in tools
        )

    await with_server(folder, flow)
    return {**{k: statistics.median(v) for k, v in marks.items()}, **sizes}


# Report ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--flow-repeats", type=int, default=5)
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcpdebug-bench-") as tmp:
        env = bytecode_env(clean_env(), Path(tmp) / "pycache")  # debuggees and servers inherit it
        os.environ.clear()
        os.environ.update(env)
        print(f"### Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        if not args.skip_overhead:
            times = asyncio.run(overhead(Path(tmp) / "overhead", args.calls, args.repeats))
            plain = statistics.median(times["plain"])
            print(f"\nA test making {args.calls:,} calls (its loop's time; median of {args.repeats}):\n")
            print("| Mode | Median | Runs | vs plain |\n| --- | --- | --- | --- |")
            for mode in MODES:
                runs = ", ".join(f"{t:.2f}" for t in times[mode])
                median = statistics.median(times[mode])
                print(f"| {mode} | {median:.3f} s | {runs} | {median / plain:.2f}x |")
        (Path(tmp) / "steps").mkdir()
        step_times = asyncio.run(steps(Path(tmp) / "steps", args.flow_repeats))
        print(f"\nThrough MCP over stdio (median of {args.flow_repeats}; min-max):\n")
        print("| Call | Median | Range |\n| --- | --- | --- |")
        for name, values in step_times.items():
            print(
                f"| {name} | {statistics.median(values) * 1000:.0f} ms | "
                f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms |"
            )
        (Path(tmp) / "peers").mkdir()
        peers = asyncio.run(peers_flow(Path(tmp) / "peers", args.flow_repeats))
        print(
            f"\nThe peers' flow as a script (medians of {args.flow_repeats}): {peers['calls']} calls, "
            f"{peers['characters']:,} characters of replies; "
            f"step {peers['step'] * 1000:.0f} ms; "
            f"evaluate {peers['evaluate'] * 1000:.0f} ms; {peers['tools']} tools, "
            f"{peers['tools/list characters']:,} characters of tools/list."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
