"""What reading the machine's facts adds to a run's start (`pytest_mcpdebug.recording.machine`).

Usage: python benchmarks/machine_facts.py [--repeats 21]

The controlling process reads them once, with its environment, in the thread that asks git for the
code version (`ci_environment.context`): the test thread does not wait for them. Measured:

1. Cold, in a fresh interpreter that has imported what a recording pytest process already has
   (`pytest`, the plugin's `ci_environment`): importing `machine` and its first `facts()` (bytecode
   cached, as an installed package has it; ``pwd`` is imported then), the median of ``--repeats``.
2. Warm: one more `facts()` in the same process, and `context()` with and without it.
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

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, time, timeit
import pytest, _pytest.terminal  # what a recording run has loaded already
from pytest_mcpdebug.recording import ci_environment
t0 = time.perf_counter()
from pytest_mcpdebug.recording import machine
found = machine.facts()
cold = time.perf_counter() - t0
warm = min(timeit.repeat(machine.facts, number=200, repeat=5)) / 200
ci_environment.environment(), ci_environment.ci_metadata()
without = min(
    timeit.repeat(lambda: (ci_environment.environment(), ci_environment.ci_metadata()), number=200, repeat=5)
) / 200
with_it = min(timeit.repeat(ci_environment.context, number=200, repeat=5)) / 200
print(json.dumps({"cold": cold, "warm": warm, "without": without, "with": with_it, "facts": found}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache, "PYTHONPATH": str(ROOT)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        rounds = []
        for n in range(args.repeats + 1):  # the first writes the bytecode: not counted
            out = subprocess.run(
                [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
            ).stdout
            if n:
                rounds.append(json.loads(out))
    us = {k: statistics.median(r[k] for r in rounds) * 1e6 for k in ("cold", "warm", "without", "with")}
    print(f"load average {os.getloadavg()[0]:.1f}; {args.repeats} fresh interpreters, medians")
    print(f"import machine + first facts(): {us['cold']:.0f} us (the code-version thread, once a run)")
    print(f"facts() again:                  {us['warm']:.0f} us")
    print(f"context() without / with facts: {us['without']:.0f} us / {us['with']:.0f} us")
    print("facts here:", json.dumps(rounds[-1]["facts"]))


if __name__ == "__main__":
    main()
