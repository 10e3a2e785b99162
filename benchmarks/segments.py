"""Where a whole run's extra time goes: each phase of pytest's run timed from inside, against plain pytest.

`overhead.py` times whole processes; this splits them. A small plugin (`-p`) stamps the wall clock
and the test thread's CPU time at the boundaries pytest's hooks mark (configure, session start,
collection, the test loop, the session's end, unconfigure, the last ``atexit`` handler), and this
script adds the process's start and end as the parent sees them (the same monotonic clock). Modes run
in rotation with plain pytest, bytecode cached; each figure is the median over the rounds of the
mode's segment minus plain's in the same round, in milliseconds: wall, and the test thread's CPU.
A segment whose wall time grows without its thread's CPU time is waiting; one whose CPU time grows
with no more calls (count them with ``sys.setprofile``) is being slowed by something beside it, or
holds a garbage collection that plain pytest ran in another segment: a full collection (15-25 ms
here) falls where the allocations cross its threshold, and a recording's few thousand objects move
it (the recording's 20-test collection reads +20 ms for that reason, its session's end -17 ms). Read
the segments' sum, and the segments of runs long enough to hold several collections.

The 2,000-test suite shows what the loop and collection cost, the one-test suite (``--tests 1``) what
start-up does. "the session's end" runs from the last ``pytest_sessionfinish`` to ``pytest_unconfigure``
and holds the recording's close and pytest's summary.

Usage: python benchmarks/segments.py [--tests 2000] [--rounds 21] [--modes pytest-timeout,spool,stream]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as `python benchmarks/segments.py`: the script's folder is on sys.path, so these resolve.
from gen_suite import generate
from overhead import bytecode_env, clean_env, running_server

PROBE = """
import atexit, os, time
import pytest

_marks = []

def mark(name):
    _marks.append((name, time.perf_counter(), time.thread_time()))

mark("probe imported")

class _First:
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session): mark("collection")
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session): mark("test loop")
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session): mark("session's end")

class _Last:
    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config): mark("unconfigure")

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    mark("configure")  # the first trylast: the recording's own configure comes after it
    config.pluginmanager.register(_First(), "segments-first")
    config.pluginmanager.register(_Last(), "segments-last")

def _write():
    mark("exit")
    with open(os.environ["SEGMENTS_OUT"], "w") as out:
        out.write("\\n".join(f"{n}\\t{w}\\t{t}" for n, w, t in _marks))

atexit.register(_write)  # registered first, so it runs last
"""

MODES: dict[str, list[str]] = {
    "plain": ["-p", "no:mcpdebug"],
    "pytest-timeout": ["-p", "no:mcpdebug", "--timeout=60"],
    "spool": ["--mcp-debug"],
    "stream": ["--mcp-debug"],
}
SEGMENTS = (
    ("start", "probe imported", "the interpreter's start, pytest's import, plugins loaded"),
    ("probe imported", "configure", "options, ini, other plugins' configure"),
    ("configure", "collection", "the recording's configure and session start"),
    ("collection", "test loop", "collection"),
    ("test loop", "session's end", "the test loop"),
    ("session's end", "unconfigure", "the session's end: closing, pytest's summary"),
    ("unconfigure", "exit", "unconfigure, atexit handlers"),
    ("exit", "end", "the interpreter's finalization and the process's end"),
)


Marks = dict[str, tuple[float, float]]
"""A run's phase boundaries: name -> (wall clock, the test thread's CPU time), both in seconds."""


def read_marks(path: Path, started: float, ended: float) -> Marks:
    """The boundaries the probe wrote to ``path``, with the process's start and end as its parent saw
    them (the same monotonic clock)."""
    marks: Marks = {"start": (started, 0.0), "end": (ended, 0.0)}
    for line in path.read_text().splitlines():
        name, wall, cpu = line.split("\t")
        marks[name] = (float(wall), float(cpu))
    return marks


def phase_table(pairs: dict[str, list[tuple[Marks, Marks]]], title: str = "segment") -> list[str]:
    """Markdown rows: per segment, plain's median and each mode's median of per-pair differences from
    plain (wall / the test thread's CPU, ms); ``pairs``: per mode, (plain's marks, the mode's)."""
    modes = list(pairs)
    columns = " | ".join(f"{m}: wall / thread CPU (ms)" for m in modes)
    rows = [
        f"| {title} | plain (ms) | {columns} |",
        "| --- | ---: | " + " | ".join("---:" for _ in modes) + " |",
    ]
    totals = dict.fromkeys(modes, 0.0)
    for a, b, label in SEGMENTS:
        plain_ms = [(p[b][0] - p[a][0]) * 1e3 for p, _ in pairs[modes[0]]]
        cells = []
        for mode in modes:
            wall = [(m[b][0] - m[a][0] - p[b][0] + p[a][0]) * 1e3 for p, m in pairs[mode]]
            cpu = []
            if a != "start" and b != "end":  # the test thread's CPU time, read inside the process
                cpu = [(m[b][1] - m[a][1] - p[b][1] + p[a][1]) * 1e3 for p, m in pairs[mode]]
            totals[mode] += statistics.median(wall)
            thread = f"{statistics.median(cpu):+.1f}" if cpu else "n/a"
            cells.append(f"{statistics.median(wall):+.1f} / {thread}")
        rows.append(f"| {label} | {statistics.median(plain_ms):.1f} | " + " | ".join(cells) + " |")
    rows.append("| sum of the medians | | " + " | ".join(f"{totals[m]:+.1f}" for m in modes) + " |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--modes", default="pytest-timeout,spool,stream")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    known = [m for m in MODES if m != "plain"]
    unknown = sorted(set(modes) - set(known))
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}")
    with tempfile.TemporaryDirectory(prefix="mcpdebug-segments-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        suite, plugins = work / "suite", work / "plugins"
        generate(args.tests, suite)
        plugins.mkdir()
        (plugins / "segments_probe.py").write_text(PROBE)
        env = bytecode_env(clean_env(), work / "pycache")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH", "")]))
        server_home = work / "server"
        if "stream" in modes:
            stack.enter_context(running_server(server_home, work / "server.log"))
        out = work / "marks.txt"

        def run(mode: str) -> dict[str, tuple[float, float]]:
            home = server_home if mode == "stream" else Path(tempfile.mkdtemp(dir=work))
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "segments_probe"]
                + MODES[mode],
                cwd=suite,
                env={**env, "SEGMENTS_OUT": str(out), "MCPDEBUG_DIR": str(home)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            return read_marks(out, started, time.perf_counter())

        order = ["plain", *modes]
        for mode in order:  # warm-up: bytecode, page cache
            run(mode)
        pairs: dict[str, list[tuple[Marks, Marks]]] = {m: [] for m in modes}
        for i in range(args.rounds):
            marks = {m: run(m) for m in order[i % len(order) :] + order[: i % len(order)]}
            for m in modes:
                pairs[m].append((marks["plain"], marks[m]))
            print(f"round {i + 1}/{args.rounds}", file=sys.stderr)

    print("\n".join(phase_table(pairs)))
    print(f"\n{args.rounds} rounds, {args.tests} tests; medians of per-round differences from plain pytest.")


if __name__ == "__main__":
    main()
