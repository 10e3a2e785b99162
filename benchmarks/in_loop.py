"""What a passing test costs inside the run, without start-up: microseconds a test, in alternating pairs.

`overhead.py` times whole processes, where a few milliseconds of start-up and a server's share of
the two cores blur a per-test cost of tens of microseconds. Here a small plugin (`-p`) in each run
times the test loop alone, from ``pytest_collection_finish`` to ``pytest_sessionfinish`` (wall and
process CPU), and each mode is run right after a plain run in the same pair, alternating its order;
the figure is the median over the pairs of (mode - plain) / tests. Bytecode is cached, as in
`overhead.py`.

Usage: python benchmarks/in_loop.py [--tests 2000] [--pairs 9] [--modes spool,stream,timed,pytest-timeout]
    [--tree DIR]
(``floor``: `floor_plugin.py`, the least a recording can do a test, to measure against; ``--tree``: also
run each of the spool and stream modes asked for (spool if neither is) with another checkout's
recording, e.g. a `git worktree` of an earlier commit, an A/B of two commits in the same pairs. Every
run then has one checkout first on its path.) The whole process's wall time is shown too, as the
median of its per-pair difference with plain, in milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as `python benchmarks/in_loop.py`: the script's folder is on sys.path, so these resolve.
from gen_suite import generate
from overhead import bytecode_env, clean_env, running_server

PLUGIN = """
import os, time, pytest
_start = {}
@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    _start["wall"], _start["cpu"] = time.perf_counter(), time.process_time()
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    with open(os.environ["IN_LOOP_OUT"], "w") as out:
        out.write(f"{time.perf_counter() - _start['wall']} {time.process_time() - _start['cpu']}")
"""
MODES: dict[str, list[str]] = {
    "pytest-timeout": ["-p", "no:mcpdebug", "--timeout=60"],
    "spool": ["--mcp-debug"],
    "stream": ["--mcp-debug"],
    "timed": ["--mcp-debug", "--mcp-debug-timeout=60"],
    "floor": ["-p", "no:mcpdebug", "-p", "floor_plugin"],  # `floor_plugin.py`: the least a test can cost
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--modes", default="spool,stream,timed,pytest-timeout")
    parser.add_argument("--tree", type=Path, help="also spool/stream with this checkout's recording")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - MODES.keys())
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    base = {m: m for m in modes}  # a ``--tree`` mode runs its twin's arguments with the other checkout
    if args.tree is not None:
        for twin in [m for m in modes if m in ("spool", "stream")] or ["spool"]:
            base[f"{twin} ({args.tree})"] = twin
        modes = list(base)
    with tempfile.TemporaryDirectory(prefix="mcpdebug-in-loop-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        suite, plugins = work / "suite", work / "plugins"
        generate(args.tests, suite)
        plugins.mkdir()
        (plugins / "in_loop_timer.py").write_text(PLUGIN)
        shutil.copy(Path(__file__).with_name("floor_plugin.py"), plugins)  # not the benchmarks' folder
        env = bytecode_env(clean_env(), work / "pycache")
        checkouts = {m: str(Path(__file__).resolve().parent.parent) for m in ["plain", *modes]}
        for mode in modes:
            if base[mode] != mode:
                checkouts[mode] = str(args.tree.resolve())
        paths = {
            m: os.pathsep.join(filter(None, [str(plugins), c, env.get("PYTHONPATH", "")]))
            for m, c in checkouts.items()
        }
        spool_home = work / "spool"
        server_home = work / "server"
        if "stream" in base.values():
            stack.enter_context(running_server(server_home, work / "server.log"))

        def run(mode: str) -> tuple[float, float, float]:
            shutil.rmtree(spool_home, ignore_errors=True)
            home = server_home if base.get(mode) == "stream" else spool_home
            out = work / "loop.txt"
            out.unlink(missing_ok=True)
            extra = ["-p", "no:mcpdebug"] if mode == "plain" else MODES[base[mode]]
            pytest_args = ["-q", "-p", "no:cacheprovider", "-p", "in_loop_timer", *extra]
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "pytest", *pytest_args],
                cwd=suite,
                env={**env, "PYTHONPATH": paths[mode], "IN_LOOP_OUT": str(out), "MCPDEBUG_DIR": str(home)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            whole = time.perf_counter() - started
            wall, cpu = out.read_text().split()
            return float(wall), float(cpu), whole

        for mode in ["plain", *modes]:  # warm-up: bytecode, page cache
            run(mode)
        walls: dict[str, list[float]] = {m: [] for m in modes}
        cpus: dict[str, list[float]] = {m: [] for m in modes}
        wholes: dict[str, list[float]] = {m: [] for m in modes}
        for pair in range(args.pairs):
            plain_wall, plain_cpu, plain_whole = run("plain")
            for mode in modes if pair % 2 == 0 else modes[::-1]:
                wall, cpu, whole = run(mode)
                walls[mode].append((wall - plain_wall) / args.tests * 1e6)
                cpus[mode].append((cpu - plain_cpu) / args.tests * 1e6)
                wholes[mode].append((whole - plain_whole) * 1e3)
                print(f"  pair {pair + 1}/{args.pairs} {mode:15s} {walls[mode][-1]:6.1f} us", file=sys.stderr)
    print(f"| mode | us a test, wall (median of {args.pairs}) | CPU | whole run, ms | all pairs (wall) |")
    print("| --- | ---: | ---: | ---: | --- |")
    for mode in modes:
        every = ", ".join(f"{w:.0f}" for w in walls[mode])
        wall, cpu = statistics.median(walls[mode]), statistics.median(cpus[mode])
        print(f"| {mode} | {wall:.1f} | {cpu:.1f} | {statistics.median(wholes[mode]):+.0f} | {every} |")


if __name__ == "__main__":
    main()
