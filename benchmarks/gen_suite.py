"""Generate a suite of N trivial passing tests, so plugin overhead is not hidden by test work.

Usage: python benchmarks/gen_suite.py N OUTDIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

TESTS_PER_FILE = 100
FILE_GLOB = "test_gen_*.py"


def generate(n: int, outdir: str | Path) -> list[Path]:
    """Write N tests into OUTDIR (100 per file) plus a bare pytest.ini; return the test files.

    The pytest.ini makes OUTDIR its own rootdir so an enclosing project's settings don't leak in.
    Old generated files are removed first so a smaller N never leaves stale tests behind.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(FILE_GLOB):
        old.unlink()
    (out / "pytest.ini").write_text("[pytest]\n")

    width = max(6, len(str(max(n - 1, 0))))
    files: list[Path] = []
    for file_no, start in enumerate(range(0, n, TESTS_PER_FILE)):
        stop = min(start + TESTS_PER_FILE, n)
        body = "".join(f"def test_{i:0{width}d}():\n    assert True\n\n\n" for i in range(start, stop))
        path = out / f"test_gen_{file_no:04d}.py"
        path.write_text(body.rstrip("\n") + "\n")
        files.append(path)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, help="number of tests")
    parser.add_argument("outdir", type=Path, help="directory to write the suite into")
    args = parser.parse_args(argv)
    files = generate(args.n, args.outdir)
    print(f"wrote {args.n} tests in {len(files)} files to {args.outdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
