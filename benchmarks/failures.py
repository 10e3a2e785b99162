"""Failure snapshots: how soon a failure is readable through MCP, what 500 failures with large locals
cost, and how big a snapshot gets.

Usage: python benchmarks/failures.py [--tests 500] [--repeats 5] [--latency-runs 10]

1. Latency: a test records the time just before it fails, then the next test sleeps; the benchmark
   asks get_failure (an in-memory MCP client over the running server's store) every 5 ms until the
   failure is there. Reported: readable time minus failure time.
2. Cost: N tests that each fail with large locals (a 1 MB string, 10,000 dicts, a nested object),
   plain pytest vs `--mcp-debug` (spool) vs streaming to `mcpdebug serve`, interleaved.
3. The largest stored snapshot, in bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from mcp import Client
from overhead import bytecode_env, clean_env, running_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from mcpdebug.app import build_server
from mcpdebug.store import Store

LARGE = """
class Node:
    def __init__(self, depth):
        self.name = "node" * 50
        self.children = [Node(depth - 1) for _ in range(3)] if depth else []

def test_large_{i}():
    blob = "x" * 1_000_000
    rows = [{{"id": n, "name": f"row {{n}}", "tags": ["a", "b", "c"]}} for n in range(10_000)]
    tree = Node(4)
    password = "hunter2"
    assert len(rows) == {i} + 1
"""


def write_suite(folder: Path, tests: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per_file = 50
    for f in range(0, tests, per_file):
        body = "".join(LARGE.format(i=i) for i in range(f, min(f + per_file, tests)))
        (folder / f"test_large_{f // per_file:03d}.py").write_text(body)
    (folder / "pytest.ini").write_text("[pytest]\n")


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    import subprocess

    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def cost(workdir: Path, tests: int, repeats: int) -> dict[str, list[float]]:
    suite = workdir / "suite"
    write_suite(suite, tests)
    env = bytecode_env(clean_env(), workdir / "pycache")
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    times: dict[str, list[float]] = {"plain": [], "spool": [], "stream": []}
    with running_server(workdir / "served", workdir / "serve.log"):
        for round_ in range(repeats + 1):
            for mode in times:
                cmd = base + ([] if mode == "plain" else ["--mcp-debug"])
                run_env = dict(env)
                if mode == "spool":
                    run_env["MCPDEBUG_DIR"] = str(workdir / f"spool-{round_}")
                elif mode == "stream":
                    run_env["MCPDEBUG_DIR"] = str(workdir / "served")
                took = run(cmd, suite, run_env)
                if round_:  # the first round warms caches
                    times[mode].append(took)
                print(f"  round {round_}/{repeats} {mode:7} {took:6.2f} s", file=sys.stderr)
    store = Store(workdir / "served" / ".mcpdebug")  # where `mcpdebug serve --dir served` keeps it
    largest = store.db.execute("SELECT max(length(snapshot)), count(*) FROM failures").fetchone()
    store.close()
    times["largest_snapshot_bytes"] = [float(largest[0] or 0)]
    times["snapshots"] = [float(largest[1] or 0)]
    return times


LATENCY_TEST = textwrap.dedent(
    """
    import time, pathlib

    def test_fails():
        pathlib.Path("failed-at").write_text(repr(time.time()))
        values = list(range(1000))
        assert sum(values) == 0

    def test_then_waits():
        time.sleep(2)
    """
)


async def latency_once(project: Path, served: Path, env: dict[str, str]) -> float:
    import subprocess

    (project / "failed-at").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mcp-debug"],
        cwd=project,
        env={**env, "MCPDEBUG_DIR": str(served)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = Store(served / ".mcpdebug")
    try:
        async with Client(build_server(store)) as client:
            while not (project / "failed-at").exists() or not (project / "failed-at").read_text():
                await asyncio.sleep(0.001)
            failed_at = float((project / "failed-at").read_text())
            while True:
                runs = store.runs(1)
                if runs and runs[0]["run_id"]:
                    result = await client.call_tool("get_failure", {"run_id": runs[0]["run_id"]})
                    if not result.is_error:
                        readable = time.time()
                        break
                await asyncio.sleep(0.005)
    finally:
        proc.wait()
        store.close()
    return readable - failed_at


def latency(workdir: Path, runs: int) -> list[float]:
    project = workdir / "latency"
    project.mkdir(parents=True, exist_ok=True)
    (project / "test_latency.py").write_text(LATENCY_TEST)
    (project / "pytest.ini").write_text("[pytest]\n")
    env = bytecode_env(clean_env(), workdir / "pycache")
    served = workdir / "served-latency"
    out = []
    with running_server(served, workdir / "serve-latency.log"):
        for i in range(runs):
            took = asyncio.run(latency_once(project, served, env))
            print(f"  latency run {i + 1}/{runs}: {took * 1000:.1f} ms", file=sys.stderr)
            out.append(took)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency-runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpdebug-failbench-") as tmp:
        workdir = Path(tmp)
        lat = latency(workdir, args.latency_runs)
        times = cost(workdir, args.tests, args.repeats)
    plain = statistics.median(times["plain"])
    print(
        f"\nfailure -> readable through get_failure: median {statistics.median(lat) * 1000:.1f} ms, "
        f"max {max(lat) * 1000:.1f} ms over {len(lat)} runs (target <= 100 ms)"
    )
    print("\n| mode | runs | median (s) | min (s) | vs plain |\n| --- | ---: | ---: | ---: | ---: |")
    for mode in ("plain", "spool", "stream"):
        values = times[mode]
        print(
            f"| {mode} | {len(values)} | {statistics.median(values):.2f} | {min(values):.2f} | "
            f"{statistics.median(values) / plain:.2f}x |"
        )
    print(
        f"\nlargest snapshot: {int(times['largest_snapshot_bytes'][0]):,} bytes "
        f"({int(times['snapshots'][0])} snapshots stored by the streamed runs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
