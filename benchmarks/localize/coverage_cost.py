"""What ``--mcp-debug-coverage`` costs real suites, per Python: against plain pytest, in alternation.

Usage: python benchmarks/localize/coverage_cost.py --python /path/to/venv/bin/python [--python ...]
       [--suites toolz,boltons,cachetools] [--rounds 9]

Each Python must have this project installed (``pip install -e .``); the suites are the sdists of
`subjects.py`, unpacked into the cache outside the repository. Whole processes, bytecode cached
(``PYTHONDONTWRITEBYTECODE`` unset, a pycache per Python), one warm-up run of each mode first. For
each suite and Python the modes run in turn, round after round, the order reversed every other
round (so drift and other jobs touch every mode alike): plain pytest (``-p no:mcpdebug``),
``--mcp-debug``, ``--mcp-debug-coverage`` (sys.monitoring on 3.12+, coverage.py's C tracer before),
and on 3.12+ ``--mcp-debug-coverage`` with ``MCPDEBUG_COVERAGE_CORE=ctrace`` (coverage.py's C tracer,
as before). Each round pairs every mode with that round's plain run; the figure is the median of
those per-pair ratios, for the child's CPU time (user + system: the steadier figure on a shared
machine) and beside it for wall time. The load average is printed before and after.
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
MODES = ("record", "coverage", "ctrace")


def unpacked(subject: Subject, cache: Path) -> Path:
    target = cache / "localize" / "cost" / subject.name
    if not target.exists():
        with tarfile.open(sdist(subject, cache)) as archive:
            top = archive.getnames()[0].split("/")[0]
            archive.extractall(target.parent, filter="data")
        (target.parent / top).rename(target)
    return target


def measure(python: str, folder: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU s, wall s, pytest's last line) of one whole pytest process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", *OPTIONS, "-q", *args], cwd=folder, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, wall, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]


def _cell(ratios: dict[str, list[float]], mode: str) -> str:
    if not ratios.get(mode):
        return "-"
    values = ratios[mode]
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _version(python: str) -> tuple[str, tuple[int, ...]]:
    found = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return found, tuple(int(p) for p in found.split(".")[:2])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", action="append", required=True)
    parser.add_argument("--suites", default="toolz,boltons,cachetools")
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args()
    cache = cache_dir()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {options.rounds} rounds, "
        f"load average {_load()}; median of per-round ratios to plain (range)"
    )
    print(
        "\n| Python | suite | plain CPU / wall s | `--mcp-debug` CPU | `--mcp-debug-coverage` CPU | wall "
        "| C tracer (3.12+) CPU | wall |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for python in options.python:
        version, numbers = _version(python)
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
            if numbers >= (3, 12):
                modes["ctrace"] = (modes["coverage"][0], {**env, "MCPDEBUG_COVERAGE_CORE": "ctrace"})
            cpu: dict[str, list[float]] = {m: [] for m in MODES}
            wall: dict[str, list[float]] = {m: [] for m in MODES}
            plains: list[tuple[float, float]] = []
            last = ""
            for args, mode_env in modes.values():  # a warm-up: bytecode compiled, files in the page cache
                measure(python, folder, [*args, *subject.tests], mode_env)
            for round_ in range(options.rounds):
                order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
                seen: dict[str, tuple[float, float]] = {}
                for mode in order:
                    args, mode_env = modes[mode]
                    used, elapsed, last = measure(python, folder, [*args, *subject.tests], mode_env)
                    seen[mode] = (used, elapsed)
                shutil.rmtree(store, ignore_errors=True)
                plain = seen.pop("plain")
                plains.append(plain)
                for mode, (used, elapsed) in seen.items():
                    cpu[mode].append(used / plain[0])
                    wall[mode].append(elapsed / plain[1])
            plain_cpu = statistics.median(p[0] for p in plains)
            plain_wall = statistics.median(p[1] for p in plains)
            cells = [
                _cell(cpu, "record"),
                _cell(cpu, "coverage"),
                _cell(wall, "coverage"),
                _cell(cpu, "ctrace"),
                _cell(wall, "ctrace"),
            ]
            print(
                f"| {version} | {name} ({last}) | {plain_cpu:.2f} / {plain_wall:.2f} | "
                + " | ".join(cells)
                + " |",
                flush=True,
            )
    print(f"\nload average at the end {_load()}")


if __name__ == "__main__":
    main()
