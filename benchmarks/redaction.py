"""What redaction costs (issue 43 item 5): importing the rule set, compiling it on first use, and each
value and line it is run on; and, for comparison, what detect-secrets would have cost.

Usage: python benchmarks/redaction.py [--repeats 20] [--detect-secrets PYTHON]

1. Import: `import pytest_mcpdebug.redaction` in a fresh interpreter with bytecode cached (what a run
   with a timeout pays: `pytest_mcpdebug.values` imports it), the median of ``--repeats``.
2. First use: compiling the keyword search, then one rule's regex (both on first use only).
3. Per value and per line: `render` (the value of a snapshot's local) and `redact` (a line of output or
   of the server log) on ordinary values and on values holding secrets, in microseconds.
4. With ``--detect-secrets PYTHON`` (an interpreter where `pip install detect-secrets` was run, outside
   this project): its import and `scan_line` on the same texts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_mcpdebug import redaction  # noqa: E402
from pytest_mcpdebug.values import VarBuilder, render  # noqa: E402

TEXTS = {
    "int (repr '3')": "3",
    "short string ('ada')": "ada",
    "sentence, 60 chars": "the quick brown fox jumps over the lazy dog again and again",
    "dict repr, 200 chars": repr(
        {"user": "ada", "host": "db.example.com", "port": 5432, "items": list(range(30))}
    )[:200],
    "log line, 120 chars": "2026-01-01 12:00:00 INFO connecting to db.example.com:5432 as ada "
    "(pool=5, timeout=30, retries=3)",
    "URL with a password": "postgres://admin:S3cretPassw0rd@db.example.com:5432/app",
    "headers with a Bearer token": "{'Authorization': 'Bearer abc.def.ghi', 'Accept': 'application/json'}",
    "GitHub token in a sentence": "cloning with ghp_" + "R2d2C3po" * 4 + "ab12 into /tmp/repo",
    "server log reply, 400 chars": ("session_id=20260101-000000-abcdef tool=get_failure passed=3 " * 8)[:400],
    "failure text, 4,000 chars": ("    assert total == expected, f'{order!r} has {len(items)} items'\n" * 70)[
        :4000
    ],
}


def per_call(func: object, arg: object, number: int) -> float:
    """Microseconds a call, the best of 5 rounds (the machine is shared: the least disturbed)."""
    return min(timeit.repeat(lambda: func(arg), number=number, repeat=5)) / number * 1e6  # type: ignore[operator]


def import_ms(repeats: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = (
        "import time, re, functools, itertools, typing, collections.abc; t = time.perf_counter(); "
        "import pytest_mcpdebug.redaction; print((time.perf_counter() - t) * 1000)"
    )
    times = []
    for _ in range(repeats + 1):  # the first writes the bytecode
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
        times.append(float(out.stdout))
    return statistics.median(times[1:])


def first_use_ms() -> tuple[float, float]:
    code = (
        "import time, re; re.compile(r'warm(?:ed)? up [a-z]+$'); "  # the regex compiler's own first use
        "import pytest_mcpdebug.redaction as r; t = time.perf_counter(); "
        "r.redact('x=1 -q'); "
        "a = time.perf_counter(); r.redact('postgres://a:b@c'); b = time.perf_counter(); "
        "print((a - t) * 1000, (b - a) * 1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    gate, rule = (float(x) for x in out.stdout.split())
    return gate, rule


DETECT_SECRETS = """
import sys, time, timeit, json
t = time.perf_counter()
from detect_secrets.core.scan import scan_line
from detect_secrets.settings import default_settings
imported = (time.perf_counter() - t) * 1000
texts = json.loads(sys.stdin.read())
out = {"import ms": imported, "modules": len(sys.modules)}
with default_settings():
    list(scan_line("warm up"))
    for name, text in texts.items():
        out[name] = min(timeit.repeat(lambda: list(scan_line(text)), number=50, repeat=3)) / 50 * 1e6
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--detect-secrets", metavar="PYTHON", help="an interpreter with detect-secrets installed"
    )
    args = parser.parse_args()
    print(f"import pytest_mcpdebug.redaction: {import_ms(args.repeats):.2f} ms (median of {args.repeats})")
    gate, rule = first_use_ms()
    print(f"first use: keyword search compiled in {gate:.2f} ms, a rule's regex in {rule:.2f} ms")
    print(f"{'text':32} {'redact us':>10} {'render us':>10}  shown")
    for name, text in TEXTS.items():
        value: object = int(text) if text.isdigit() else text
        red = per_call(redaction.redact, text, 2000)
        ren = per_call(render, value, 2000)
        print(f"{name:32} {red:10.2f} {ren:10.2f}  {render(value)[:60]}")
    redaction.is_secret_name.cache_clear()
    names = [f"name_{i}_value" for i in range(5000)]
    cold = min(timeit.repeat(lambda: [redaction.is_secret_name(n) for n in names], number=1, repeat=1)) / 5000
    warm = per_call(redaction.is_secret_name, "max_passengers", 20000)
    print(f"is_secret_name: {cold * 1e6:.2f} us a new name, {warm:.2f} us a name seen before (cached)")
    local_values = {f"v{i}": v for i, v in enumerate([3, "ada", [1, 2, 3], {"a": 1}, 2.5] * 20)}

    def snapshot_locals(values: dict[str, object]) -> None:
        builder = VarBuilder()
        for k, v in values.items():
            builder.var(k, v, 0)

    cost = per_call(snapshot_locals, local_values, 200)
    print(f"100 ordinary locals of a failing frame (VarBuilder): {cost:.0f} us")
    if args.detect_secrets:
        import json

        out = subprocess.run(
            [args.detect_secrets, "-c", DETECT_SECRETS],
            input=json.dumps(TEXTS),
            capture_output=True,
            text=True,
            check=True,
        )
        found = json.loads(out.stdout)
        print(
            f"detect-secrets: import {found.pop('import ms'):.0f} ms, {found.pop('modules')} modules loaded"
        )
        for name, us in found.items():
            print(f"  scan_line {name:32} {us:8.0f} us")


if __name__ == "__main__":
    main()
