"""On Python 3.12+ per-test coverage is recorded with sys.monitoring (`coverage.monitor`): each test's
lines are the ones coverage.py's C tracer records, and what is shown of a failure stays apart."""

from __future__ import annotations

import os
import sys

import pytest

from helpers import recorded, run_inner
from pytest_mcpdebug.coverage.data import find_files, load

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is Python 3.12+")

CODE = """
import threading


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)
        return self

    def pop(self):
        if not self.items:
            raise IndexError("empty")
        return self.items.pop()

    def __repr__(self):
        return f"Stack({self.items})"

    def __eq__(self, other):
        return isinstance(other, Stack) and self.items == other.items


def evens(n):
    for i in range(n):
        if i % 2 == 0:
            yield i


def total(values):
    result = sum(
        v
        for v in values
    )
    return result


def in_thread(n):
    found = []

    def work():
        found.extend(evens(n))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return found


def safe_pop(stack):
    try:
        return stack.pop()
    except IndexError:
        return None
"""

TESTS = """
import pytest

from stackcode import Stack, evens, in_thread, safe_pop, total


def test_push():
    assert Stack().push(1).push(2) == Stack().push(1).push(2)


def test_pop_empty():
    assert safe_pop(Stack()) is None


def test_evens():
    assert list(evens(5)) == [0, 2, 4]


def test_total_wrong():
    assert total(evens(6)) == 7


def test_thread():
    assert in_thread(4) == [0, 2]


def test_stack_differs():
    assert Stack().push(1) == Stack().push(2)


@pytest.mark.parametrize("n", [1, 3])
def test_each(n):
    assert len(list(evens(n))) >= 1
"""


def per_test(pytester: pytest.Pytester, core: str) -> tuple[dict, dict]:
    env = {"MCPDEBUG_COVERAGE_CORE": core} if core else {}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = run_inner(pytester, "--mcp-debug-coverage")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result.assert_outcomes(failed=2, passed=6)
    store = recorded(pytester.path / ".mcpdebug")
    rid = store.run_ids(1)[0]
    coverage = load(find_files(store.dir, rid, store.coverage_files(rid))[0])
    store.close()
    return dict(coverage.lines), dict(coverage.rendered)


def test_sys_monitoring_records_the_lines_the_c_tracer_records(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(stackcode=CODE, test_code=TESTS)
    traced, traced_shown = per_test(pytester, "ctrace")
    monitored, monitored_shown = per_test(pytester, "")
    assert traced and monitored == traced
    assert monitored_shown.keys() == traced_shown.keys()  # the __repr__ of the failing comparisons
    repr_line = next(
        key
        for key in monitored_shown
        if key[1] == CODE.lstrip("\n").splitlines().index('        return f"Stack({self.items})"') + 1
    )
    assert repr_line not in monitored  # shown only, never run by a test
