"""The suspects the first `get_failure` reply lists, for real: a run recorded with coverage, read
through the MCP server in memory: the first five with why, the next places up to the tenth one line
each, a function's tied lines on one line; the calls followed down from the failing stack say so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from helpers import recorded, run_inner
from mcpdebug.app import build_server

pytestmark = pytest.mark.anyio

ORDERS = """
def fee(amount):
    if amount > 100:  # the bug: the fee starts at 100
        return 5
    return 0


def total(amounts):
    subtotal = sum(amounts)
    return subtotal + fee(subtotal)


def report(amounts):
    return f"total {total(amounts)}"


def spread(values):
    low = min(values)
    high = max(values)
    width = high - low
    middle = low + width // 2
    count = len(values)
    mean = sum(values) // count
    skew = mean - middle
    return width, skew
"""

TESTS = """
from orders import report, spread


def test_small():
    assert report([10, 20]) == "total 30"


def test_large():
    assert report([100, 50]) == "total 155"


def test_exactly_100():
    assert spread([60, 40]) == (20, 0)
    assert report([60, 40]) == "total 105"
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def record(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(orders=ORDERS, test_orders=TESTS)
    run_inner(pytester, "--mcp-debug-coverage").assert_outcomes(failed=1, passed=2)
    return pytester.path / ".mcpdebug"


async def test_the_first_failure_lists_ten_places_ties_grouped(pytester: pytest.Pytester) -> None:
    store = recorded(record(pytester))
    async with Client(build_server(store)) as client:
        failure = (await client.call_tool("get_failure", {})).content[0].text
        ranked = (await client.call_tool("get_suspects", {"top": 20})).structured_content
    store.close()
    assert ranked is not None
    rows = {row["line"]: row for row in ranked["suspects"]}
    suspects = failure[failure.index("Suspects (") :]
    # spread() ran only in the failing test: its return first, its seven assignments tied 2-8
    assert "     1. orders.py:24 in spread: return width, skew\n        why: ran in 1/1" in suspects
    assert suspects.count("   2-8. orders.py:") == 5 and suspects.count("        why: ") == 5
    assert "  then (why: get_suspects):\n   2-8. orders.py:21, 22, 23 in spread (tied)\n" in suspects
    assert "     9. orders.py:4 in fee: return 0\n" in suspects
    assert f"    10. orders.py:13 in report: {rows[13]['source']}\n" in suspects
    assert "orders.py:2 in fee" not in suspects and rows[2]["rank"] == "12"  # the bug, past the tenth
    # what the failing line calls, and what that calls in turn, each a step farther from the assert
    assert "in report(), called by test_orders.py:14" in rows[13]["why"]
    assert "in total(), called by report() (orders.py:13)" in rows[9]["why"]
    assert "in fee(), called by total() (orders.py:9)" in rows[2]["why"]


def test_mcpdebug_failure_lists_the_suspects_as_get_failure_does(pytester: pytest.Pytester) -> None:
    """The CLI's `failure` is get_failure in a terminal: the same suspects, its hints as commands."""
    record(pytester)
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("mcpdebug")), "failure"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "     1. orders.py:24 in spread: return width, skew\n" in shown
    assert "mcpdebug suspects " in shown and "mcpdebug localize " in shown  # commands, not tool calls
    assert "get_suspects(" not in shown and "localize(" not in shown
