"""Hangs across processes: how long after the deadline the diagnosis is out, with 0, 1, 4 and 16 children.

A test starts N Python children that deadlock on a lock (each prints a line once it is stuck), then
waits for the first one (``procs[0].wait()``). With ``--mcp-debug-timeout=T`` the watchdog lists the
test's descendants with psutil and dumps each with py-spy (in parallel) before the report leaves.
The delay is the stored hang's ``detected`` minus the test's ``started`` minus T: the watchdog's
wake-up, the report, the survey of the children and the event's way into the spool. N=0 is the
same test waiting on a thread instead, the baseline.

Usage: cd benchmarks && python hang_children.py [--runs 3] [--children 0,1,4,16] [--timeout 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from mcpdebug.ingest.spool import ingest_spool  # noqa: E402
from mcpdebug.store import Store  # noqa: E402

CHILD = """\
import threading
lock = threading.Lock()
lock.acquire()
print('stuck', flush=True)
lock.acquire()
"""

TEST = """
import subprocess
import sys
import threading
from pathlib import Path

N = {n}


def test_waits_on_children():
    script = str(Path(__file__).with_name("child.py"))
    procs = [subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE) for _ in range(N)]
    try:
        for p in procs:
            p.stdout.readline()  # stuck now
        if procs:
            procs[0].wait()
        else:
            threading.Event().wait()
    finally:
        for p in procs:
            p.kill()
            p.wait()
"""


def one(n: int, timeout: float) -> tuple[float, str]:
    with tempfile.TemporaryDirectory(prefix="mcpdebug-children-") as scratch:
        folder = Path(scratch)
        (folder / "child.py").write_text(CHILD)
        (folder / "test_children.py").write_text(textwrap.dedent(TEST.format(n=n)))
        (folder / "pytest.ini").write_text("[pytest]\n")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--mcp-debug-timeout={timeout:g}",
            ],
            cwd=folder,
            capture_output=True,
            timeout=120,
            check=False,
        )
        store = Store(folder / ".mcpdebug")
        ingest_spool(store)
        run = store.db.execute("SELECT run_id FROM runs").fetchone()[0]
        test = store.db.execute("SELECT started FROM tests WHERE run_id=?", (run,)).fetchone()[0]
        hang = store.hangs(run)[0]
        delay = hang["detected"] - test - timeout
        return delay, hang["summary"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--children", default="0,1,4,16")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{when}, timeout {args.timeout:g} s, {args.runs} runs")
    print("| children | median | max | headline |\n| ---: | ---: | ---: | --- |")
    for n in (int(x) for x in args.children.split(",")):
        delays, summary = [], ""
        for _ in range(args.runs):
            delay, summary = one(n, args.timeout)
            delays.append(delay)
        print(f"| {n} | {statistics.median(delays):.3f} s | {max(delays):.3f} s | {summary[:90]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
