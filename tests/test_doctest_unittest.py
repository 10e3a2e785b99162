"""Doctests and unittest suites: their failures read as well as a plain test's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client

from conftest import MCPDEBUG
from helpers import recorded, run_inner
from mcpdebug.app import build_server
from pytest_mcpdebug import protocol

DOCTESTS = '''
def add(a, b):
    """Add two numbers.

    >>> add(2, 2)
    5
    >>> add(1, 1)
    2
    """
    return a + b


def ratio(a, b):
    """A ratio.

    >>> ratio(1, 2)
    0.5
    >>> total = 0
    >>> ratio(3, total)
    inf
    """
    scaled = a * 1.0
    return scaled / b


def several():
    """
    >>> several()
    1
    >>> undefined_name
    2
    >>> 1 + 1
    3
    """
    return 1
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def line_of(path: Path, text: str) -> int:
    """The number of the first line of ``path`` that contains ``text``."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


async def failure(pytester: pytest.Pytester, test: str, tool: str = "get_failure", **args: object) -> str:
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        result = await client.call_tool(tool, {"test": test, **args})
    assert not result.is_error, result.content[0].text
    return str(result.content[0].text)


@pytest.mark.anyio
async def test_a_failing_doctest_shows_the_example_what_was_expected_and_what_came_out(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(calc=DOCTESTS)
    pytester.maketxtfile(guide=">>> print('a')\nb\n")
    result = run_inner(pytester, "--mcp-debug", "--doctest-modules", "--doctest-glob=*.txt")
    result.assert_outcomes(failed=4)
    calc = pytester.path / "calc.py"
    add, ratio, divide = (
        line_of(calc, ">>> add(2, 2)"),
        line_of(calc, ">>> ratio(3"),
        line_of(calc, "scaled / b"),
    )

    mismatch = await failure(pytester, "calc.py::calc.add")
    assert mismatch.startswith("FAILED calc.py::calc.add (call) in run ")
    assert f"doctest.DocTestFailure: line {add} of calc.py: add(2, 2) expected 5, got 4" in mismatch
    assert f"Doctest calc.add, example 1 of 2, at {calc}:{add}:\n    >>> add(2, 2)\n" in mismatch
    assert "  Expected:\n    5\n  Got:\n    4\n" in mismatch
    assert f"#0 {calc}:{add} in <doctest calc.add[0]>\n" in mismatch
    assert f"  > {add} |     >>> add(2, 2)" in mismatch
    assert "library frames" not in mismatch

    unexpected = await failure(pytester, "calc.ratio")
    assert "ZeroDivisionError: float division by zero" in unexpected.splitlines()[1]
    assert f"Doctest calc.ratio, example 3 of 3, at {calc}:{ratio}:\n    >>> ratio(3, total)\n" in unexpected
    assert (
        "  Expected:\n    inf\n  Raised instead:\n    ZeroDivisionError: float division by zero" in unexpected
    )
    # the frames the exception came through, with their locals, down to the example's line
    assert f"#0 {calc}:{divide} in ratio()" in unexpected
    assert "      b (int) = 0\n      scaled (float) = 3.0" in unexpected
    assert f"#1 {calc}:{ratio} in <doctest calc.ratio[2]>" in unexpected

    text_file = await failure(pytester, "guide.txt")
    assert f"Doctest guide.txt, example 1 of 1, at {pytester.path / 'guide.txt'}:1:" in text_file
    assert "    >>> print('a')\n  Expected:\n    b\n  Got:\n    a\n" in text_file

    # the run's summary says what went wrong in one line, for every doctest
    summary = await failure(pytester, "calc.py::calc.add", tool="get_test")
    assert f"line {add} of calc.py: expected 5, got 4" in summary
    cli = subprocess.run([MCPDEBUG, "show"], cwd=pytester.path, capture_output=True, text=True, timeout=60)
    assert (
        f"FAILED calc.py::calc.ratio (call): line {ratio} of calc.py: ZeroDivisionError: float division by zero"
        in (cli.stdout)
    )


@pytest.mark.anyio
async def test_continue_on_failure_records_every_failing_example(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(calc=DOCTESTS)
    run_inner(
        pytester, "--mcp-debug", "--doctest-modules", "--doctest-continue-on-failure", "calc.py::calc.several"
    ).assert_outcomes(failed=1)
    calc = pytester.path / "calc.py"
    reply = await failure(pytester, "several")
    # the first failing example raised: its exception heads the reply, then each failing example
    assert reply.splitlines()[1] == "NameError: name 'undefined_name' is not defined"
    assert (
        f"Doctest calc.several, example 2 of 3, at {calc}:{line_of(calc, '>>> undefined_name')}:\n    >>> undefined_name\n"
        in reply
    )
    assert "  Raised instead:\n    NameError: name 'undefined_name' is not defined" in reply
    assert (
        f"Doctest calc.several, example 3 of 3, at {calc}:{line_of(calc, '>>> 1 + 1')}:\n    >>> 1 + 1\n"
        in reply
    )
    assert "  Expected:\n    3\n  Got:\n    2\n" in reply


UNITTESTS = """
import unittest

def check(value, limit):
    ratio = value / limit
    assert ratio < 1, "too big"

class Orders(unittest.TestCase):
    def setUp(self):
        self.limit = 10

    def test_equal(self):
        items = [1, 2]
        total = 4
        self.assertEqual(sum(items), total)

    def test_helper(self):
        amount = 12
        check(amount, self.limit)

    def test_sub(self):
        for i in range(3):
            with self.subTest(i=i):
                doubled = i * 2
                self.assertLess(doubled, 3)

class Broken(unittest.TestCase):
    def setUp(self):
        connection = None
        connection.open()

    def test_never_runs(self):
        pass

class Async(unittest.IsolatedAsyncioTestCase):
    async def test_async(self):
        value = 5
        self.assertEqual(value, 6)
"""


@pytest.mark.anyio
async def test_unittest_failures_show_the_test_methods_locals(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_orders=UNITTESTS)
    result = run_inner(pytester, "--mcp-debug")
    assert result.parseoutcomes()["failed"] == 5  # (pytest 9 also counts test_sub's own call as passed)
    path = pytester.path / "test_orders.py"

    equal = await failure(pytester, "test_equal")
    assert "AssertionError: 3 != 4" in equal
    assert f"#2 {path}:{line_of(path, 'assertEqual(sum(items)')} in test_equal()" in equal
    assert "      items (list) = [1, 2] [ref" in equal and "      total (int) = 4" in equal
    assert "      self (test_orders.Orders) = <test_orders.Orders testMethod=test_equal> [ref" in equal

    helper = await failure(pytester, "test_helper")
    assert (
        f"#0 {path}:{line_of(path, 'assert ratio < 1')} in check()" in helper
        and "      ratio (float) = 1.2" in helper
    )
    assert (
        f"#1 {path}:{line_of(path, 'check(amount')} in test_helper()" in helper
        and "      amount (int) = 12" in helper
    )

    sub = await failure(pytester, "test_sub")
    assert "AssertionError: 4 not less than 3" in sub
    assert "      i (int) = 2\n      doubled (int) = 4" in sub

    setup = await failure(pytester, "test_never_runs")
    assert (
        f"Raised at {path}:{line_of(path, 'connection.open()')} in setUp()" in setup
        and "      connection (NoneType) = None" in setup
    )

    coroutine = await failure(pytester, "test_async")
    assert f"{path}:{line_of(path, 'assertEqual(value, 6)')} in test_async()" in coroutine
    assert "      value (int) = 5" in coroutine


def test_a_snapshot_stored_before_doctest_examples_existed_still_decodes() -> None:
    old = b'{"exception":{"type":"AssertionError","message":"x"},"frames":[{"file":"/a.py","line":3,"function":"t"}]}'
    snapshot = protocol.decode_snapshot(old)
    assert snapshot.doctest == [] and snapshot.frames[0].line == 3
    new = protocol.Snapshot(
        exception=snapshot.exception,
        doctest=[
            protocol.DoctestExample(file="/m.py", line=4, name="m.f", source="f()\n", want="5\n", got="4\n")
        ],
    )
    assert protocol.decode_snapshot(protocol.encode_value(new)) == new
