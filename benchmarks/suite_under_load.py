"""The project's own suite, two copies at once, round after round: does it hold under load?

Each round starts the whole suite (`python -m pytest -q -p no:randomly`, README command 2) in this
checkout and in a second one at the same moment, each with a basetemp of its own, waits for both,
and prints one row: each copy's counts and wall time, and the load average at the start, the most
seen during the round (sampled every 5 s) and at the end. It stops at the first round in which
either copy fails (``--keep-going`` runs them all), and says where that copy's output is.

The second checkout (``--twin``, default /tmp/mcpdebug-twin) is a clone of this one with its own
virtualenv: created on first use (``git clone``, ``python3 -m venv``, ``pip install -e .[dev]``)
and moved to this checkout's commit (its uncommitted changes are not copied) before the rounds.

Usage: python benchmarks/suite_under_load.py [--rounds 5] [--twin DIR] [--keep-going] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^=* ?(?P<counts>\d+ \w+.*) in (?P<seconds>[\d.]+)s", re.MULTILINE)


def prepare_twin(twin: Path) -> None:
    """A clone of this checkout at its commit, with a virtualenv of its own."""
    if not (twin / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(twin)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(["git", "-C", str(twin), "fetch", "--quiet", str(ROOT), commit], check=True)
    subprocess.run(["git", "-C", str(twin), "checkout", "--quiet", "--detach", commit], check=True)
    python = twin / ".venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(twin / ".venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{twin}[dev]"], check=True)


def counts_of(output: str) -> str:
    found = list(SUMMARY.finditer(output))
    return found[-1]["counts"].strip() if found else "no summary (see the log)"


def run_round(number: int, copies: list[Path], logs: Path, extra: list[str]) -> tuple[bool, list[str]]:
    """Both copies at once; whether both passed, and the row's cells."""
    peak = [os.getloadavg()[0]]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5):
            peak.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    start_load = os.getloadavg()[0]
    sampler.start()
    started = []
    for index, copy in enumerate(copies):
        log = logs / f"round{number}-copy{index + 1}.log"
        basetemp = logs / f"basetemp-round{number}-copy{index + 1}"
        command = [str(copy / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:randomly"]
        command += [f"--basetemp={basetemp}", *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPDEBUG")}
        with open(log, "wb") as out:
            process = subprocess.Popen(command, cwd=copy, stdout=out, stderr=subprocess.STDOUT, env=env)
        started.append((process, log, time.monotonic()))
    cells, passed = [], True
    for process, log, began in started:
        status = process.wait()
        wall = time.monotonic() - began
        passed = passed and status == 0
        cells.append(
            f"{counts_of(log.read_text(errors='replace'))}, {wall / 60:.1f} min"
            + ("" if status == 0 else f" (exit {status}: {log})")
        )
    done.set()
    cells.append(f"{start_load:.1f} / {max(peak):.1f} / {os.getloadavg()[0]:.1f}")
    return passed, cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--twin", type=Path, default=Path("/tmp/mcpdebug-twin"))
    parser.add_argument("--logs", type=Path, default=Path("/tmp/mcpdebug-suite-under-load"))
    parser.add_argument("--keep-going", action="store_true", help="run every round even after a failure")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for both copies' pytest")
    options = parser.parse_args()
    prepare_twin(options.twin)
    options.logs.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}: {ROOT} and {options.twin}, {os.cpu_count()} CPUs")
    print("| round | copy 1 | copy 2 | load average: start / peak / end |")
    print("| ---: | --- | --- | --- |", flush=True)
    failed = 0
    for number in range(1, options.rounds + 1):
        passed, cells = run_round(number, [ROOT, options.twin], options.logs, options.pytest_args)
        print(f"| {number} | " + " | ".join(cells) + " |", flush=True)
        if not passed:
            failed += 1
            if not options.keep_going:
                break
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
