"""A debug session's start to its first stop, through MCP over stdio, and where the time goes.

Usage: python benchmarks/debug_start.py [--repeats 5] [--breakdown 3]

1. Against a real `mcpdebug serve` (the SDK's stdio client), medians of `--repeats`, after a warm-up:
   - a test run: `run_tests(debug=True)` of one small test with a breakpoint (condition ``i == 3``)
     to the reply at that stop;
   - a script (the peers' flow of FIELD-NOTES): create_debug_session, set_breakpoint (``i == 7``),
     start_debugging, to the reply at that stop;
   each with a fresh process per session (`serve --no-debug-spare`) and with the spare the server
   keeps (waited for until it is idle before each start, as between an agent's calls). Beside the
   wall time: the debuggee's CPU time to the stop (a spare's counted from its job) and the server's,
   and the load average.
2. `--breakdown N`: the same test run N times in this process (a `Debugger` as `serve` wires it)
   with timestamps from both sides: the server's DAP requests and events, and in the debuggee a
   plugin's marks (pytest_configure, collection finished, debugpy listening, the test's call).

Bytecode is cached (in a folder of ours): PYTHONDONTWRITEBYTECODE is dropped, as a developer has it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from overhead import bytecode_env, clean_env

TEST = """
def price(i):
    base = i * 2
    return base + 1


def test_total():
    total = 0
    for i in range(20):
        total += price(i)
    assert total == 400
"""
SCRIPT = TEST.replace("def test_total", "def main").replace("assert total == 400", 'print("total", total)')
SCRIPT += "\n\nmain()\n"
FAST = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly", "-p", "no:asyncio", "-q"]
MARKS = '''
"""Timestamps of a debug run's start, written to $BENCH_MARKS (the breakdown of debug_start.py)."""
import os, time
import pytest

def _mark(name):
    path = os.environ.get("BENCH_MARKS")
    if path:
        with open(path, "a") as out:
            out.write(f"{name} {time.time():.6f} {time.process_time():.6f}\\n")

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _mark("pytest_configure")
    from pytest_mcpdebug.debug import launcher
    listen = launcher.listen
    def marked(*args, **kwargs):
        _mark("debugpy listen")
        return listen(*args, **kwargs)
    launcher.listen = marked
    original = launcher.report
    def report(fd, message):
        _mark("debugpy listening, port reported")
        original(fd, message)
    launcher.report = report

@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    _mark("collection finished")

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    _mark("test call (server configured)")
'''


MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))
_HELP = subprocess.run([MCPDEBUG, "serve", "--help"], capture_output=True, text=True).stdout
SPARES = "--debug-spare" in _HELP
"""Whether this mcpdebug keeps spares (an older one, measured for comparison, starts every session fresh)."""


def line(source: str, marker: str) -> int:
    return next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)


def cpu_of(pid: int) -> float:
    """utime + stime of a process, in seconds (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
    except OSError:
        return []


def server_pid() -> int:
    return next(p for p in children(os.getpid()) if any(a.endswith("mcpdebug") for a in cmdline(p)[:2]))


async def idle_spare(server: int, kind: str, deadline: float = 60.0) -> int | None:
    """The pid of the server's spare of ``kind`` once it waits for its job (blocked on its pipe)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for pid in children(server):
            args = cmdline(pid)
            if any(a.endswith("warm.py") for a in args) and args[-1:] == [kind]:
                try:
                    if Path(f"/proc/{pid}/wchan").read_text().endswith("pipe_read"):
                        before = cpu_of(pid)
                        await asyncio.sleep(0.3)  # and stays so: its imports are done
                        if cpu_of(pid) == before:
                            return pid
                except OSError:
                    continue
        await asyncio.sleep(0.05)
    return None


class Session:
    def __init__(self, client: Client, server: int) -> None:
        self.client = client
        self.server = server

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        data: dict[str, Any] = result.structured_content or {}
        return {**data["debug"], "text": data.get("text")} if isinstance(data.get("debug"), dict) else data

    async def pid(self, sid: str) -> int:
        sessions = (await self("list_debug_sessions"))["sessions"]
        return int(next(s["pid"] for s in sessions if s["id"] == sid))


Flow = Callable[[Session, Path], Awaitable[tuple[float, float, float]]]


async def test_flow(call: Session, folder: Path, spare: int | None) -> tuple[float, float, float]:
    """run_tests(debug=True) to its first stop: (wall, debuggee CPU, server CPU)."""
    body = line(TEST, "total += price(i)")
    spare_cpu = cpu_of(spare) if spare else 0.0
    server_cpu = cpu_of(call.server)
    start = time.perf_counter()
    stop = await call(
        "run_tests",
        args=[*FAST, "test_total.py"],
        debug=True,
        breakpoints=[{"file": "test_total.py", "line": body, "condition": "i == 3"}],
    )
    wall = time.perf_counter() - start
    assert stop["reason"] == "breakpoint", stop["text"]
    pid = await call.pid(stop["sessionId"])
    assert spare is None or pid == spare, "the run did not start in the spare"
    cpu = cpu_of(pid) - spare_cpu, cpu_of(call.server) - server_cpu
    await call("close_debug_session", session_id=stop["sessionId"])
    return wall, *cpu


async def script_flow(call: Session, folder: Path, spare: int | None) -> tuple[float, float, float]:
    """create_debug_session, set_breakpoint, start_debugging to its first stop."""
    body = line(SCRIPT, "total += price(i)")
    server_cpu = cpu_of(call.server)
    start = time.perf_counter()
    sid = (await call("create_debug_session", name="loop"))["sessionId"]
    await call("set_breakpoint", session_id=sid, file="loop.py", line=body, condition="i == 7")
    spare_cpu = cpu_of(spare) if spare else 0.0
    stop = await call("start_debugging", session_id=sid, script_path="loop.py")
    wall = time.perf_counter() - start
    assert stop["reason"] == "breakpoint", stop["text"]
    pid = await call.pid(sid)
    assert spare is None or pid == spare, "the script did not start in the spare"
    cpu = cpu_of(pid) - spare_cpu, cpu_of(call.server) - server_cpu
    await call("close_debug_session", session_id=sid)
    return wall, *cpu


async def measure(folder: Path, spare: bool, repeats: int) -> dict[str, list[tuple[float, float, float]]]:
    (folder / "test_total.py").write_text(TEST)
    (folder / "loop.py").write_text(SCRIPT)
    mcpdebug = MCPDEBUG
    args = ["serve", "--log-level", "warning", *([] if spare or not SPARES else ["--no-debug-spare"])]
    results: dict[str, list[tuple[float, float, float]]] = {"test run": [], "script": []}
    async with Client(StdioServerParameters(command=mcpdebug, args=args, cwd=str(folder))) as client:
        call = Session(client, server_pid())
        for i in range(repeats + 1):  # the first of each is a warm-up (and, with spares, a cold one)
            for name, flow in (("test run", test_flow), ("script", script_flow)):
                kind = "tests" if name == "test run" else "script"
                ready = await idle_spare(call.server, kind) if spare and i > 0 else None
                assert not (spare and i > 0 and ready is None), f"no idle {kind} spare"
                measured = await flow(call, folder, ready)
                if i > 0:
                    results[name].append(measured)
                print(
                    f"  {'spare' if spare else 'fresh'} {name}: {measured[0] * 1000:.0f} ms", file=sys.stderr
                )
    return results


# 2. The breakdown ------------------------------------------------------------------------------------


async def breakdown(folder: Path, repeats: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
    from mcpdebug.debug import dap, debuggee
    from mcpdebug.debug import session as session_module
    from mcpdebug.debug.manager import Debugger
    from mcpdebug.ingest.websocket import IngestServer
    from mcpdebug.live.sessions import Sessions
    from mcpdebug.processes.test_runs import Runner
    from mcpdebug.store import Store

    marks: list[tuple[str, float, float | None]] = []

    def mark(name: str) -> None:
        marks.append((f"server: {name}", time.time(), None))

    read_report = debuggee.read_report

    async def timed_report(fd: int, timeout: float | None) -> dict[str, Any] | None:
        report = await read_report(fd, timeout)
        mark("report read")
        return report

    debuggee.read_report = timed_report  # type: ignore[assignment]
    request = dap.DapClient.request

    async def timed_request(self: Any, command: str, arguments: Any = None, timeout: float = 30.0) -> Any:
        answer = await request(self, command, arguments, timeout)
        mark(f"{command} answered")
        return answer

    dap.DapClient.request = timed_request  # type: ignore[method-assign]
    on_event = session_module.DebugSession._on_event

    def timed_event(self: Any, name: str, body: dict[str, Any]) -> None:
        if name in ("initialized", "stopped"):
            mark(f"{name} event")
        on_event(self, name, body)

    session_module.DebugSession._on_event = timed_event  # type: ignore[method-assign]

    (folder / "test_total.py").write_text(TEST)
    (folder / "bench_marks.py").write_text(MARKS)
    store = Store(folder / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    for spare in (False, True):
        debugger = Debugger(store, sessions, runner, root=folder, spare=spare)
        print(
            f"\n{'With the spare' if spare else 'A fresh process'} (ms since run_tests; CPU of the debuggee):"
        )
        for i in range(repeats + 1):
            if spare:
                debugger.prepare("tests")
                with_pid = None
                while with_pid is None:
                    await asyncio.sleep(0.05)
                    process = debugger.spares.process("tests")
                    with_pid = process.pid if process is not None else None
                while not Path(f"/proc/{with_pid}/wchan").read_text().endswith("pipe_read"):
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.3)
            job_cpu = cpu_of(with_pid) if spare and with_pid is not None else 0.0
            out = folder / "marks.txt"
            out.unlink(missing_ok=True)
            marks.clear()
            start = time.time()
            mark("run_tests(debug=True)")
            session = await debugger.start_tests(
                [*FAST, "-p", "bench_marks", "test_total.py"],
                str(folder),
                {"BENCH_MARKS": str(out)},
                [{"file": "test_total.py", "line": line(TEST, "total += price(i)"), "condition": "i == 3"}],
                stop_on_entry=False,
            )
            await session.wait(0, 60)
            mark("stop captured (the reply)")
            for text in out.read_text().splitlines():
                name, wall, cpu = text.rsplit(" ", 2)
                marks.append((f"debuggee: {name}", float(wall), float(cpu) - job_cpu))
            await debugger.close(session.id)
            if i == 0:
                continue  # a warm-up
            previous = start
            print(f"run {i}, load {os.getloadavg()[0]:.1f}:")
            for name, at, cpu in sorted(marks, key=lambda m: m[1]):
                cpu_text = f"  (CPU {cpu * 1000:.0f} ms)" if cpu is not None else ""
                print(f"  {(at - start) * 1000:7.1f} (+{(at - previous) * 1000:6.1f})  {name}{cpu_text}")
                previous = at
        await debugger.shutdown()
    await runner.close()
    await ingest.close()
    store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--breakdown", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcpdebug-bench-") as tmp:
        env = bytecode_env(clean_env(), Path(tmp) / "pycache")  # servers and debuggees inherit it
        os.environ.clear()
        os.environ.update(env)
        print(f"### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {sys.version.split()[0]}")
        if args.breakdown:
            (Path(tmp) / "breakdown").mkdir()
            asyncio.run(breakdown(Path(tmp) / "breakdown", args.breakdown))
            return 0
        load_before = os.getloadavg()
        rows = []
        for spare in (False, True) if SPARES else (False,):
            (Path(tmp) / f"spare-{spare}").mkdir()
            results = asyncio.run(measure(Path(tmp) / f"spare-{spare}", spare, args.repeats))
            for name, values in results.items():
                walls = [v[0] for v in values]
                rows.append(
                    f"| {name} | {'spare' if spare else 'fresh process'} | "
                    f"**{statistics.median(walls) * 1000:.0f} ms** | "
                    f"{', '.join(f'{w * 1000:.0f}' for w in walls)} | "
                    f"{statistics.median(v[1] for v in values) * 1000:.0f} ms | "
                    f"{statistics.median(v[2] for v in values) * 1000:.0f} ms |"
                )
        load_after = os.getloadavg()
        print(
            f"\nStart to first stop through MCP over stdio (median of {args.repeats}), "
            f"nproc {os.cpu_count()}, "
        )
        print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after:\n")
        print("| Flow | Debuggee | Median wall | Walls (ms) | Debuggee CPU | Server CPU |")
        print("| --- | --- | --- | --- | --- | --- |")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
