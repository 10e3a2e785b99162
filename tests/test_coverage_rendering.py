"""Coverage ends where the failure is raised: what runs to *show* a failure (pytest's assertion
introspection, unittest's messages, the report and the snapshot) is kept apart from what the test ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import recorded, run_inner
from pytest_mcpdebug.coverage.data import find_files, load

MONEY = """
class Money:
    def __init__(self, cents):
        self.cents = cents

    def __eq__(self, other):
        return isinstance(other, Money) and self.cents == other.cents

    def __repr__(self):
        return f"Money({self.cents})"


def add(a, b):
    return Money(a.cents + b.cents + 1)
"""

TESTS = """
import unittest

from money import Money, add


def test_add():
    assert add(Money(1), Money(2)) == Money(3)


def test_same():
    assert Money(1) == Money(1)


def test_caught():
    try:
        assert Money(1) == Money(2)
    except AssertionError:
        pass
    assert repr(Money(5)) == "Money(5)"  # the test's own repr: its execution


class TestUnit(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(Money(1), Money(2)), Money(3))

    def test_list(self):
        self.assertListEqual([add(Money(1), Money(2))], [Money(3)])
"""


def lines_of(pytester: pytest.Pytester) -> tuple[dict[int, set[str]], dict[int, set[str]]]:
    store = recorded(pytester.path / ".mcpdebug")
    rid = store.run_ids(1)[0]
    coverage = load(find_files(store.dir, rid, store.coverage_files(rid))[0])
    name = str(pytester.path / "money.py")
    tests = {
        line: {t.split("::", 1)[1] for t in ran} for (f, line), ran in coverage.lines.items() if f == name
    }
    shown = {
        line: {t.split("::", 1)[1] for t in ran} for (f, line), ran in coverage.rendered.items() if f == name
    }
    return tests, shown


@pytest.mark.parametrize("extra", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_repr_run_only_to_show_the_failure_is_not_the_tests(pytester: pytest.Pytester, extra) -> None:
    pytester.makepyfile(money=MONEY, test_money=TESTS)
    result = run_inner(pytester, "--mcp-debug-coverage", *extra)
    result.assert_outcomes(failed=3, passed=2)
    tests, shown = lines_of(pytester)
    source = (pytester.path / "money.py").read_text().splitlines()
    eq, rep = source.index("    def __eq__(self, other):") + 2, source.index("    def __repr__(self):") + 2
    # __eq__ decides the assertion: every test that compares ran it
    assert tests[eq] == {"test_add", "test_same", "test_caught", "TestUnit::test_add", "TestUnit::test_list"}
    # __repr__ ran only to explain failures, and in test_caught's own code: only that counts
    assert tests[rep] == {"test_caught"}
    assert shown[rep] >= {"test_add", "TestUnit::test_add", "TestUnit::test_list"}


def test_the_helpers_are_put_back_after_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        money=MONEY,
        test_money=TESTS,
        conftest="""
import unittest.case
from _pytest.assertion import rewrite

ORIGINAL = (rewrite._saferepr, unittest.case.safe_repr, unittest.case.pprint)


def pytest_unconfigure(config):
    now = (rewrite._saferepr, unittest.case.safe_repr, unittest.case.pprint)
    assert now == ORIGINAL, now
    print("helpers restored")
""",
    )
    result = run_inner(pytester, "--mcp-debug-coverage", "-s")
    result.assert_outcomes(failed=3, passed=2)
    assert "helpers restored" in result.stdout.str()
    assert Path(pytester.path / ".mcpdebug").is_dir()
