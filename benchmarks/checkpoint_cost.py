"""What the per-test checkpoint costs the test thread: a `Sender` spooling with and without it.

Each "test" queues 3 events (as a passing test does: start, finish, and one more); with ``cp`` the
loop then calls `Sender.checkpoint` as the reporter does at each test's end (one ``write``). The
figure is the whole loop plus closing the sender, per test, so the sender thread's own batching
(what runs without checkpoints) is counted on both sides.

Usage: python benchmarks/checkpoint_cost.py [--tests 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mcpdebug import protocol  # noqa: E402
from pytest_mcpdebug.recording.sender import Sender  # noqa: E402


def per_test(tests: int, checkpoint: bool) -> float:
    folder = Path(tempfile.mkdtemp())
    hello = protocol.Hello(
        protocol=protocol.PROTOCOL_VERSION, run_id="r", process="p", worker="main", pid=os.getpid()
    )
    sender = Sender(hello=hello, spool_path=folder / "spool" / "r.p.jsonl", discover=lambda: None)
    sender.start()
    seq = 0
    start = time.perf_counter()
    for i in range(tests):
        for _ in range(3):
            seq += 1
            sender.send(
                protocol.TestStarted(
                    run_id="r", process="p", seq=seq, ts=time.time(), nodeid=f"t.py::test_{i}", worker="main"
                )
            )
        if checkpoint:
            sender.checkpoint()
    sender.close()
    return (time.perf_counter() - start) / tests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with_cp, without = [], []
    for _ in range(args.rounds):
        with_cp.append(per_test(args.tests, True))
        without.append(per_test(args.tests, False))
    print(f"with a checkpoint per test: {statistics.median(with_cp):.1f} us/test (median of {args.rounds})")
    print(f"without (sender thread only): {statistics.median(without):.1f} us/test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
