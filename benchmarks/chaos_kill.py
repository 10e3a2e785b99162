"""Chaos: SIGKILL an xdist worker, pytest itself or the server at random moments, then audit the store.

Each round runs `pytest --mcp-debug` on a generated suite in a fresh folder (spooling, or streaming to
a `mcpdebug serve`) and SIGKILLs one process at a random moment:

- ``worker``: one xdist worker of a `-n 2` run (xdist replaces it and the run goes on);
- ``pytest``: the pytest process itself, with or without xdist;
- ``server``: the server a `-n 2` run streams to (a new one is started a moment later).

Every test appends "<pid> <node id>" to a ledger as its first act, so a test is known to have
*finished* when a later test started in the same process (or the process ended on its own). After
the round the store is read as `mcpdebug show` reads it, and the audit counts:

- finished tests whose record is incomplete: not stored, still "running", or missing any of the
  lines they printed (target 0);
- runs left "running" once every process has gone (target 0).

Usage: python benchmarks/chaos_kill.py [--rounds 20] [--tests 40] [--seed 1]
(``--rounds`` per target: 3 targets, so 20 rounds make 60 kills.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "server"))

from mcpdebug.store import Store  # noqa: E402
from mcpdebug.views import lookup  # noqa: E402
from mcpdebug.views import output as output_view  # noqa: E402

LINES = 5
SUITE = """
import os, time, pytest

@pytest.mark.parametrize("i", range({tests}))
def test_step(i, request):
    with open(os.environ["CHAOS_LEDGER"], "a") as ledger:
        ledger.write(f"{{os.getpid()}} {{request.node.nodeid}}\\n")
    for n in range({lines}):
        print(f"{{request.node.nodeid}} says {{n}}")
    time.sleep((i * 7919 % 40) / 1000)
"""
BIN = Path(sys.executable).parent


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_tests(ledger: Path, count: int, run: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while run.poll() is None and time.monotonic() < deadline:
        try:
            if ledger.read_text().count("\n") >= count:
                return
        except OSError:
            pass
        time.sleep(0.002)


def start_server(directory: Path) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "server.json").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [str(BIN / "mcpdebug"), "serve", "--http", "--port", "0", "--dir", str(directory)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if json.loads((directory / "server.json").read_text())["pid"] == proc.pid:
                return proc
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mcpdebug serve did not start")


def one_round(target: str, project: Path, rng: random.Random, tests: int) -> dict[str, int]:
    directory = project / ".mcpdebug"
    ledger = project / "ledger.txt"
    ledger.unlink(missing_ok=True)
    xdist = ["-n", "2"] if target in ("worker", "server") or rng.random() < 0.5 else []
    server = start_server(directory) if target == "server" or rng.random() < 0.3 else None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}
    env["CHAOS_LEDGER"] = str(ledger)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mcp-debug", *xdist],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if target != "worker" and rng.random() < 0.2:
        time.sleep(rng.uniform(0.2, 1.5))  # anywhere, start-up included
    else:  # mid-run: once a random number of tests have started
        wait_for_tests(ledger, rng.randint(1, tests - 3), run)
    killed = 0
    if target == "worker":
        workers = children(run.pid)
        if not workers:
            print(
                f"  no worker to kill (run {'ended' if run.poll() is not None else 'alive'})", file=sys.stderr
            )
        if workers:
            os.kill(rng.choice(workers), signal.SIGKILL)
            killed = 1
    elif target == "pytest":
        run.kill()
        killed = 1
    elif server is not None:
        server.kill()
        killed = 1
        server.wait()
        time.sleep(rng.uniform(0.1, 0.5))
        server = start_server(directory)
    run.wait(120)
    deadline = time.monotonic() + 30
    while group_alive(run.pid) and time.monotonic() < deadline:  # orphaned workers finish their test
        time.sleep(0.05)
    if group_alive(run.pid):
        os.killpg(run.pid, signal.SIGKILL)
    if server is not None:
        server.terminate()
        server.wait(20)
    return {"kills": killed, **audit(directory, ledger, alive=set())}


def audit(directory: Path, ledger: Path, alive: set[int]) -> dict[str, int]:
    started: dict[int, list[str]] = defaultdict(list)
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        pid, _, nodeid = line.partition(" ")
        started[int(pid)].append(nodeid)
    finished = [n for ids in started.values() for n in ids[:-1]]  # the last of each process may have died
    store = Store(directory)
    lookup.refresh(store)
    runs = store.runs()
    incomplete = 0
    if runs:
        run = runs[0]
        for nodeid in finished:
            test = store.test(run["run_id"], nodeid)
            output = output_view.output_tail(store, run, nodeid, LINES + 5) if test else ""
            complete = test is not None and test["status"] != "running"
            if not complete or not all(f"{nodeid} says {n}" in output for n in range(LINES)):
                incomplete += 1
                print(f"  incomplete: {nodeid} ({test['status'] if test else 'not stored'})", file=sys.stderr)
    else:
        incomplete = len(finished)
    store.close()
    return {
        "finished": len(finished),
        "incomplete": incomplete,
        "runs": len(runs),
        "running": sum(r["status"] == "running" for r in runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds per target (20)")
    parser.add_argument("--tests", type=int, default=40, help="tests in the suite (40)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    totals: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            for target in ("worker", "pytest", "server"):
                project = Path(tmp) / f"{target}-{number}"
                project.mkdir()
                (project / "test_chaos.py").write_text(SUITE.format(tests=args.tests, lines=LINES))
                result = one_round(target, project, rng, args.tests)
                total = totals.setdefault(target, defaultdict(int))
                for key, value in result.items():
                    total[key] += value
                print(f"{target:6s} round {number + 1}: {result}", flush=True)
    print("\n| killed | kills | finished tests | incomplete records | runs | left running |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for target, t in totals.items():
        cells = (target, t["kills"], t["finished"], t["incomplete"], t["runs"], t["running"])
        print("| " + " | ".join(map(str, cells)) + " |")
    bad = sum(t["incomplete"] + t["running"] for t in totals.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
