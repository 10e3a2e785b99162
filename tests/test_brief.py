"""What a failure adds to pytest's own output, after its summary: real inner runs, read as an agent
reads them (the last lines of the terminal)."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import SuiteCopier
from helpers import run_inner

SECTION = "mcpdebug: beyond the traceback"


def brief_of(result: pytest.RunResult) -> list[str]:
    """The block's lines: from its separator to pytest's closing counts."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if SECTION in line)
    end = next(
        i
        for i in range(start + 1, len(lines))
        if re.match(r"^=+ .* in [\d.]+s", lines[i]) or re.match(r"^\d+ (failed|passed|error)", lines[i])
    )
    return lines[start + 1 : end]


HELPER = """
def subtotal(prices):
    total = 0
    for price in prices:
        total += price
    return total - 1  # the bug

def test_sum():
    prices = [2, 3]
    assert subtotal(prices) == 5

def test_ok():
    assert 1 + 1 == 2
"""


def test_each_failure_gets_its_locals_and_the_command_that_shows_more(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shop=HELPER)
    result = run_inner(pytester, "--mcp-debug", "-q")
    result.assert_outcomes(failed=1, passed=1)
    header, evidence, more = brief_of(result)
    assert header == "FAILED test_shop.py::test_sum"
    assert evidence == "  locals of test_sum() at test_shop.py:9: prices = [2, 3]"
    command = re.fullmatch(r"  more: `(.+)` \(MCP: get_failure\)", more)
    assert command, more
    # the command works as pasted where pytest was started, and shows the whole failure
    shown = subprocess.run(command.group(1), shell=True, cwd=pytester.path, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "assert 4 == 5" in shown.stdout and "prices (list) = [2, 3]" in shown.stdout
    # the block is the last thing before pytest's counts
    assert result.outlines[-1].startswith("1 failed, 1 passed")
    assert SECTION in result.outlines[-5]


def test_a_passing_run_and_locals_pytest_shows_add_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shop=HELPER)
    passing = run_inner(pytester, "--mcp-debug", "-k", "ok")
    passing.assert_outcomes(passed=1)
    assert SECTION not in passing.stdout.str()
    shown = run_inner(pytester, "--mcp-debug", "-l", "-k", "sum")
    assert [line for line in brief_of(shown) if "locals of" in line] == []


def test_coverage_names_the_suspects_of_each_failure_also_under_xdist(
    pytester: pytest.Pytester, suite: SuiteCopier
) -> None:
    suite("suspects")
    for args in ((), ("-n", "2")):
        result = run_inner(pytester, "--mcp-debug-coverage", *args)
        result.assert_outcomes(failed=2, passed=8)
        lines = brief_of(result)
        assert len(lines) == 6, lines
        blocks = {lines[i]: lines[i + 1] for i in range(0, 6, 3)}
        for header, evidence in blocks.items():
            assert header.startswith("FAILED tests/"), header
            assert evidence.startswith("  suspects: shop/pricing.py:16 in discount (1.00"), evidence
        assert all("(MCP: get_failure, get_suspects)" in lines[i] for i in (2, 5))


def test_a_traced_failure_says_where_its_value_came_from(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shop=HELPER)
    result = run_inner(pytester, "--mcp-debug-trace", "-k", "sum")
    _, evidence, more = brief_of(result)
    assert evidence.startswith("  value: "), evidence
    assert "set at test_shop.py:" in evidence or "returned by subtotal() at test_shop.py:6" in evidence
    assert more.endswith("(MCP: get_failure, get_history)")


def test_a_hung_test_is_named_with_its_diagnosis(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_hang="""
        import threading

        def test_waits():
            gate = threading.Event()
            gate.wait()
        """
    )
    result = run_inner(pytester, "--mcp-debug-timeout=1")
    header, *_, more = brief_of(result)
    assert header.startswith(
        "HANG test_hang.py::test_waits: blocked in threading.Condition.wait / Event.wait at line 5 of test_waits()"
    )
    assert more.endswith("(MCP: get_hang)")


def test_many_failures_stay_within_thirty_lines(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_many="""
        import pytest

        @pytest.mark.parametrize("n", range(14))
        def test_n(n):
            assert n < 0
        """
    )
    result = run_inner(pytester, "--mcp-debug", "-q")
    lines = brief_of(result)
    assert len(lines) <= 31
    assert lines[-1].startswith("... and 4 more failed tests: `") and " show " in lines[-1]
    assert sum(line.startswith("FAILED ") for line in lines) == 10
