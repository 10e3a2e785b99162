"""What ``--mcp-debug-coverage`` costs real suites, per Python: against plain pytest, in alternation.

Usage: python benchmarks/localize/coverage_cost.py --python /path/to/venv/bin/python [--python ...]
       [--suites toolz,boltons,cachetools] [--rounds 7]

Each Python must have this project installed (``pip install -e .``); the suites are the sdists of
`subjects.py`, unpacked into the cache outside the repository. For each suite and Python the modes
run in turn, round after round (so drift and other jobs touch every mode alike): plain pytest
(``-p no:mcpdebug``), ``--mcp-debug``, ``--mcp-debug-coverage`` (sys.monitoring on 3.12+), and on
3.12+ ``--mcp-debug-coverage`` with ``MCPDEBUG_COVERAGE_CORE=ctrace`` (coverage.py's C tracer, as
before). The figure is the median of the child's CPU time (user + system), and its ratio to plain's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tarfile
import time
from pathlib import Path

from subjects import DEV, HELDOUT, OPTIONS, Subject, cache_dir, sdist

SUBJECTS = {s.name: s for s in (*DEV, *HELDOUT)}


def unpacked(subject: Subject, cache: Path) -> Path:
    target = cache / "localize" / "cost" / subject.name
    if not target.exists():
        with tarfile.open(sdist(subject, cache)) as archive:
            top = archive.getnames()[0].split("/")[0]
            archive.extractall(target.parent, filter="data")
        (target.parent / top).rename(target)
    return target


def cpu(python: str, folder: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", *OPTIONS, "-q", *args], cwd=folder, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, wall, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]


def _cell(times: dict[str, list[float]], mode: str, plain: float) -> str:
    if mode not in times:
        return "-"
    value = statistics.median(times[mode])
    return f"{value:.2f} ({value / plain:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", action="append", required=True)
    parser.add_argument("--suites", default="toolz,boltons,cachetools")
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    cache = cache_dir()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {options.rounds} rounds, median CPU s")
    print("\n| Python | suite | plain | `--mcp-debug` | `--mcp-debug-coverage` | C tracer (3.12+) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for python in options.python:
        version = subprocess.run(
            [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
        ).stdout.strip()
        store = cache / "localize" / f"cost-store-{version}"  # one per Python: they may run side by side
        for name in options.suites.split(","):
            subject = SUBJECTS[name]
            folder = unpacked(subject, cache)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(cache / "localize" / "pycache" / version)
            if subject.pythonpath:
                env["PYTHONPATH"] = str(folder / subject.pythonpath)
            modes: dict[str, tuple[list[str], dict[str, str]]] = {
                "plain": (["-p", "no:mcpdebug"], env),
                "record": (["--mcp-debug", "--mcp-debug-dir", str(store)], env),
                "coverage": (["--mcp-debug-coverage", "--mcp-debug-dir", str(store)], env),
            }
            if version >= "3.12":
                modes["ctrace"] = (modes["coverage"][0], {**env, "MCPDEBUG_COVERAGE_CORE": "ctrace"})
            times: dict[str, list[float]] = {m: [] for m in modes}
            last = ""
            for args, mode_env in modes.values():  # a warm-up: bytecode compiled, files in the page cache
                cpu(python, folder, [*args, *subject.tests], mode_env)
            for _ in range(options.rounds):
                for mode, (args, mode_env) in modes.items():
                    used, _, last = cpu(python, folder, [*args, *subject.tests], mode_env)
                    times[mode].append(used)
                shutil.rmtree(store, ignore_errors=True)
            plain = statistics.median(times["plain"])
            cells = [_cell(times, mode, plain) for mode in ("record", "coverage", "ctrace")]
            print(f"| {version} | {name} ({last}) | {plain:.2f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
