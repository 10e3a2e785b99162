"""Issue 14's figures: what seed 000's log costs a tool call, and the HTML report of a 10,000-test run.

Usage: python benchmarks/seeing.py [--tests 10000] [--failures 100] [--calls 20000]

1. Log cost on the event loop: `entries.tool_call` + `entries.tool_response` (what `DebugServer`
   adds to each call) with the log open, timed in an asyncio task; the writer thread does the JSON
   and the disk. Also the whole in-memory MCP round trip of a cheap tool with and without the log.
2. The report: a generated suite of N tests of which F fail (each failure with locals and output,
   every test printing a line), run with `pytest --mcp-debug` (spool only), then
   `mcpdebug report --html` timed as a command and its file's size.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))


def log_cost(calls: int) -> None:
    from mcpdebug.report import entries, server_log

    with tempfile.TemporaryDirectory() as folder:
        written = server_log.open_log(Path(folder) / ".mcpdebug", server_log.LogSettings())
        arguments = {"run_id": "latest", "test": "tests/test_api.py::test_login[admin]", "tail_lines": 50}
        response = {"result": "FAILED tests/test_api.py::test_login[admin] (call) ... " * 40}

        async def loop() -> list[float]:
            spent = []
            for number in range(calls):
                started = time.perf_counter()
                entries.tool_call(number, "get_failure", arguments)
                entries.tool_response(number, "get_failure", arguments, response, 0.004)
                spent.append(time.perf_counter() - started)
                if number % 50 == 0:
                    await asyncio.sleep(0.01)  # calls come in bursts, the writer catches up between
            return spent

        spent = asyncio.run(loop())
        written.close()
        size = sum(f.stat().st_size for f in written.path.parent.iterdir())
        dropped = written.dropped
        flood = server_log.open_log(Path(folder) / "flood", server_log.LogSettings())
        started = time.perf_counter()
        for number in range(5_000):
            entries.tool_call(number, "get_failure", arguments)
            entries.tool_response(number, "get_failure", arguments, response, 0.004)
        flood.close()  # returns once the writer has written everything queued
        throughput = 10_000 / (time.perf_counter() - started)
    per_call = statistics.median(spent) * 1e6
    p99 = sorted(spent)[int(len(spent) * 0.99)] * 1e6
    print(
        "log, per tool call (call + response entries) on the event loop: "
        f"median {per_call:.1f} us, p99 {p99:.1f} us"
    )
    print(
        f"  {calls} calls wrote {size / 1e6:.1f} MB ({size / calls / 2:.0f} bytes an entry), "
        f"{dropped} dropped"
    )
    print(f"  the writer thread: {throughput:,.0f} entries/s (cleaning, JSON, disk)")
    round_trip(calls=2000)


def round_trip(calls: int) -> None:
    from mcp import Client

    from mcpdebug.app import build_server
    from mcpdebug.report import server_log
    from mcpdebug.store import Store

    async def run(folder: Path, logged: bool) -> float:
        store = Store(folder / ".mcpdebug")
        written = server_log.open_log(folder / ".mcpdebug", server_log.LogSettings()) if logged else None
        try:
            async with Client(build_server(store)) as client:
                started = time.perf_counter()
                for _ in range(calls):
                    await client.call_tool("list_sessions", {})
                return (time.perf_counter() - started) / calls
        finally:
            if written is not None:
                written.close()
            store.close()

    with tempfile.TemporaryDirectory() as folder:
        plain = min(asyncio.run(run(Path(folder), False)) for _ in range(3))
        logged = min(asyncio.run(run(Path(folder), True)) for _ in range(3))
    print(
        f"in-memory MCP round trip of list_sessions: {plain * 1e3:.3f} ms without the log, "
        f"{logged * 1e3:.3f} ms with it (+{(logged - plain) * 1e6:.0f} us)"
    )


FAILING = """
def compute(order, shipping):
    return {{"total": sum(order["items"]) + shipping, "items": order["items"]}}


def test_fail_{n}():
    order = {{"id": {n}, "customer": "c{n}@example.com", "items": [1, 2, 3]}}
    print("computing order", order["id"])
    actual = compute(order, shipping=1)
    assert actual == {{"total": 6, "items": [1, 2, 3]}}
"""


def generate(folder: Path, tests: int, failures: int) -> None:
    (folder / "pytest.ini").write_text("[pytest]\n")
    per_file = 100
    for file_no, start in enumerate(range(0, tests - failures, per_file)):
        stop = min(start + per_file, tests - failures)
        body = "".join(
            f"def test_{i:06d}():\n    print('test {i} ran')\n    assert True\n\n\n"
            for i in range(start, stop)
        )
        (folder / f"test_gen_{file_no:04d}.py").write_text(body)
    (folder / "test_failing.py").write_text("".join(FAILING.format(n=n) for n in range(failures)))


def report(tests: int, failures: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        generate(folder, tests, failures)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPDEBUG")}
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mcp-debug"],
            cwd=folder,
            env=env,
            capture_output=True,
            check=False,
        )
        print(f"report: {tests} tests, {failures} failing, recorded in {time.perf_counter() - started:.1f} s")
        out = folder / "report.html"
        # The first command also takes the spool into the store; the report alone is the next ones.
        for attempt in range(4):
            started = time.perf_counter()
            done = subprocess.run(
                [MCPDEBUG, "report", "--html", str(out), "--dir", str(folder / ".mcpdebug")],
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            spent = time.perf_counter() - started
            assert done.returncode == 0, done.stderr
            what = "with the spool taken in first" if attempt == 0 else "store already up to date"
            print(f"  mcpdebug report --html: {spent:.2f} s ({what}), {out.stat().st_size / 1e6:.2f} MB")
        shown = out.read_text().count('<details class="item"')
        print(f"  {shown} failures in full; the test table has all {tests} tests")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--failures", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    log_cost(args.calls)
    report(args.tests, args.failures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
