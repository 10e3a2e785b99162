"""What a garbage spool file costs `mcpdebug show`: the first look (which reads it and sets it aside)
and the looks after.

Records a small run with `pytest --mcp-debug`, drops a file of NUL bytes of the given size into
`.mcpdebug/spool/` (what a crash on some file systems leaves), then runs `mcpdebug show` a few times,
each a fresh process, and reports its wall time and peak RSS (wait4's rusage of that process alone).

Usage: python benchmarks/damaged_spool.py [--mb 300] [--looks 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stderr) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{cmd} failed ({proc.returncode}): {err}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024, err


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="size of the NUL file in MB (300)")
    parser.add_argument("--looks", type=int, default=4, help="`mcpdebug show` runs (4)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_small.py").write_text(
            "def test_a():\n    print('hi')\n\ndef test_b():\n    assert 0\n"
        )
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mcp-debug"],
            cwd=project,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        timed([str(BIN / "mcpdebug"), "show"], project)  # the run's own spool ingested: a normal store
        base = timed([str(BIN / "mcpdebug"), "show"], project)
        garbage = project / ".mcpdebug" / "spool" / "20261124-000000-dead00.main-1.jsonl"
        with open(garbage, "wb") as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(args.mb):
                fh.write(chunk)
        print("| look | seconds | peak RSS (MB) |\n| --- | ---: | ---: |")
        print(f"| without the garbage file | {base[0]:.2f} | {base[1]:.0f} |")
        for look in range(1, args.looks + 1):
            seconds, rss, err = timed([str(BIN / "mcpdebug"), "show"], project)
            print(f"| {look} with a {args.mb} MB NUL file | {seconds:.2f} | {rss:.0f} |")
            if err.strip():
                print(f"  stderr: {err.strip()}", file=sys.stderr)
        aside = list((project / ".mcpdebug" / "spool" / "damaged").iterdir())
        print(f"\nset aside: {[p.name for p in aside]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
