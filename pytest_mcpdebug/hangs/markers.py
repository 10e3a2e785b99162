"""The timeout marker: finding the tests that carry it in a collection of thousands, and reading it."""

from __future__ import annotations

from typing import Final

import pytest

from pytest_mcpdebug.settings import parse_seconds

MARKER: Final = "mcpdebug_timeout"


def marked(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests that carry the marker (their own, or their class's or module's), without
    `get_closest_marker`'s walk up the tree for each of thousands of unmarked tests: each parent is
    looked at once, and an item of the same parent as the one before, without markers of its own,
    costs two attribute reads and a comparison."""
    parents: dict[int, bool] = {}

    def carries(node: pytest.Item | pytest.Collector | None) -> bool:
        if node is None:
            return False
        found = parents.get(id(node))
        if found is None:
            found = _own(node) or carries(node.parent)
            parents[id(node)] = found
        return found

    found = []
    last: pytest.Item | pytest.Collector | None = None
    inherited = False
    for item in items:  # a module's or class's tests come one after another: one look per parent
        parent = item.parent
        if parent is not last:
            last, inherited = parent, carries(parent)
        if inherited or (item.own_markers and _own(item)):
            found.append(item)
    return found


def _own(node: pytest.Item | pytest.Collector) -> bool:
    return any(m.name == MARKER for m in node.own_markers)


def timeout_of(item: pytest.Item, timeout: float | None, func_only: bool) -> tuple[float | None, bool]:
    """(timeout, func_only) of a test: its marker's, else the run's (``timeout``, ``func_only``).
    A marker without a number of seconds, or with a bad one, is a usage error naming the test."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return timeout, func_only
    where = f"@pytest.mark.{MARKER} on {item.nodeid}"
    raw = marker.args[0] if marker.args else marker.kwargs.get("seconds", marker.kwargs.get("timeout"))
    if raw is None:
        raise pytest.UsageError(f"mcpdebug: {where} needs a number of seconds, e.g. ({MARKER}(30))")
    timeout = parse_seconds(raw, where, example=f"{MARKER}(30)", zero=True)
    if "func_only" in marker.kwargs:
        func_only = bool(marker.kwargs["func_only"])
    return timeout, func_only
