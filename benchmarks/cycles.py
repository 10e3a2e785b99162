"""What `pytest --mcp-debug` costs in counted work, not seconds: valgrind's callgrind, run by run.

`overhead.py` and `in_loop.py` time runs, and on a shared 2-core machine two runs of the same code
differ by 1-2%, as much as what is left to find. Counted work does not move with the machine:
callgrind runs the whole process on a simulated CPU and counts the instructions executed and the
first-level cache misses (instruction and data) and last-level ones, the same for the same code and
input whatever else the machine does. From them comes the rough cycle estimate KCachegrind shows,
``Ir + 10 x (L1 misses) + 100 x (LL misses)``: a recording's cost is as much in the cache lines its
code and objects take from pytest's own (its hooks run cold between pytest's work) as in its
instructions.

Only the test thread (pytest's main thread) is counted. Under valgrind a run takes ~50 times as long,
so the recording's sender thread, which wakes every 0.1 s, would wake ~50 times as often as in a real
run of the same tests, and how often would depend on how long the run took (~45M of the estimate at
2,000 tests, where a real run spends ~1M). Its evictions of the test thread's cache lines still count,
so the miss counts move by a few percent between runs of the same code; the instructions do not.

Each mode runs the suite of N trivial tests and a one-test suite, plain pytest too; the figures are
the mode's extra over plain: at start-up (the one-test run) and a test (the difference of the two,
over N - 1). Two runs go at once (one per core: the counts do not depend on it). ``--tree DIR``
counts another checkout's recording beside this one's (an A/B of two commits: a `git worktree`).

Usage: python benchmarks/cycles.py [--tests 2000] [--modes pytest-timeout,mcpdebug-spool] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# Run as `python benchmarks/cycles.py`: the script's folder is on sys.path, so these resolve.
from gen_suite import generate
from overhead import MODE_ARGS, BenchmarkError, bytecode_env, clean_env

MODES = ("pytest-timeout", "mcpdebug-spool")
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


@dataclass(frozen=True)
class Counts:
    ir: int
    i1: int
    d1: int
    ll: int

    @property
    def estimate(self) -> int:
        """KCachegrind's rough cycle estimate."""
        return self.ir + 10 * (self.i1 + self.d1) + 100 * self.ll

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.ir - other.ir, self.i1 - other.i1, self.d1 - other.d1, self.ll - other.ll)


def parse(profile: str) -> Counts:
    """The totals of a callgrind profile (one thread's)."""
    names = re.search(r"^events:(.*)$", profile, re.MULTILINE)
    totals = re.search(r"^(?:summary|totals):(.*)$", profile, re.MULTILINE)
    if names is None or totals is None:
        raise BenchmarkError(f"no events or totals in callgrind's profile:\n{profile[:2000]}")
    found = dict(zip(names.group(1).split(), map(int, totals.group(1).split()), strict=True))
    if missing := [event for event in EVENTS if event not in found]:
        raise BenchmarkError(f"callgrind counted no {', '.join(missing)} (was --cache-sim=yes dropped?)")
    first_level = found["D1mr"] + found["D1mw"]
    last_level = found["ILmr"] + found["DLmr"] + found["DLmw"]
    return Counts(found["Ir"], found["I1mr"], first_level, last_level)


def counted(suite: Path, mode: str, env: dict[str, str], work: Path, label: str) -> Counts:
    """The test thread's counts of one run of ``suite`` in ``mode`` under callgrind (after one run
    outside it, for the bytecode); ``label`` names its files."""
    home = work / f"home-{label}"
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODE_ARGS[mode]]
    pytest_cmd.append(str(suite))
    run_env = {**env, "MCPDEBUG_DIR": str(home)}
    profile = work / f"callgrind-{label}.out"
    valgrind = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--separate-threads=yes"]
    valgrind += [f"--callgrind-out-file={profile}", f"--log-file={work / f'callgrind-{label}.log'}"]
    for cmd in (pytest_cmd, [*valgrind, *pytest_cmd]):
        shutil.rmtree(home, ignore_errors=True)
        done = subprocess.run(cmd, cwd=suite, env=run_env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or "failed" in done.stdout or " passed" not in done.stdout:
            output = done.stdout[-2000:] + done.stderr[-2000:]
            raise BenchmarkError(f"{label} failed:\n{output}")
    return parse(Path(f"{profile}-01").read_text())  # the first thread: pytest's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--modes", default=",".join(MODES), help=f"compared with plain ({', '.join(MODES)})")
    parser.add_argument("--tree", type=Path, help="also count this checkout's recording (mcpdebug-spool)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="mcpdebug-cycles-") as tmp:
        work = Path(tmp)
        suites = {n: work / f"suite-{n}" for n in (1, args.tests)}
        for n, folder in suites.items():
            generate(n, folder)
        env = bytecode_env(clean_env(), work / "pycache")

        def first_on_path(tree: Path) -> dict[str, str]:
            """Every run has one checkout first on its path: an entry more is a lookup more for every
            module the process imports (~10M at start-up), which must not differ between the trees."""
            return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))}

        here = first_on_path(Path(__file__).resolve().parent.parent)
        runs: dict[str, tuple[str, dict[str, str]]] = {mode: (mode, here) for mode in ["plain", *modes]}
        if args.tree is not None:
            runs[f"mcpdebug-spool ({args.tree})"] = ("mcpdebug-spool", first_on_path(args.tree.resolve()))

        def count(job: tuple[str, int]) -> Counts:
            name, n = job
            mode, run_env = runs[name]
            return counted(suites[n], mode, run_env, work, f"job{jobs.index(job)}")

        jobs = [(name, n) for name in runs for n in suites]
        print(f"{len(jobs)} runs under callgrind, two at a time (2,000 tests: ~3 min)", file=sys.stderr)
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(zip(jobs, pool.map(count, jobs), strict=True))
    print("| mode | start-up, est. cycles (M) | a test, est. cycles (K) | a test: instr., L1 misses (K) |")
    print("| --- | ---: | ---: | ---: |")
    n = args.tests
    for name in runs:
        if name == "plain":
            continue
        start = results[name, 1] - results["plain", 1]
        per_test = (results[name, n] - results["plain", n]) - start
        each = n - 1
        print(
            f"| {name} | {start.estimate / 1e6:.1f} | {per_test.estimate / each / 1e3:.1f} | "
            f"{per_test.ir / each / 1e3:.1f}, {(per_test.i1 + per_test.d1) / each / 1e3:.2f} |"
        )


if __name__ == "__main__":
    main()
