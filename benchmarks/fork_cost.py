"""What a fork costs a test under the recorder (`pytest_mcpdebug.forks`): CPU time of the parent and of
each child, per fork, for plain pytest, ``--mcp-debug`` and ``--mcp-debug-timeout``.

A test forks ``--forks`` children that exit at once (``os._exit``); the children's CPU comes from
``os.times()`` after reaping them, the parent's from its own. Whole inner pytest processes, the
configurations alternating, the median of ``--rounds`` rounds; bytecode cached (FIELD-NOTES).

    python benchmarks/fork_cost.py --forks 200 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = """
import os, time

def test_forks():
    c0 = os.times()
    for _ in range({forks}):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    c1 = os.times()
    child = (c1.children_user + c1.children_system - c0.children_user - c0.children_system) / {forks}
    parent = (c1.user + c1.system - c0.user - c0.system) / {forks}
    print("FORKCOST", child * 1e6, parent * 1e6)
"""

CONFIGS = {
    "plain": [],
    "--mcp-debug": ["--mcp-debug"],
    "--mcp-debug-timeout=600": ["--mcp-debug-timeout=600"],
}


def one(folder: Path, args: list[str]) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTHONDONTWRITEBYTECODE"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args, "test_forks.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("FORKCOST"))
    _, child, parent = line.split()
    return float(child), float(parent)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--forks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_forks.py").write_text(TEST.format(forks=options.forks))
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
        for _ in range(options.rounds):
            for name, args in CONFIGS.items():
                results[name].append(one(folder, args))
    load = os.getloadavg()[0]
    table = {
        name: {
            "child_us": round(statistics.median(c for c, _ in rows)),
            "parent_us": round(statistics.median(p for _, p in rows)),
        }
        for name, rows in results.items()
    }
    print(
        json.dumps(
            {"forks": options.forks, "rounds": options.rounds, "load": load, "per_fork": table}, indent=2
        )
    )


if __name__ == "__main__":
    main()
