"""The timeout marker, and finding the tests that carry it in a collection of thousands."""

from __future__ import annotations

from typing import Final

import pytest

MARKER: Final = "mcpdebug_timeout"


def marked(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests that carry the marker (their own, or their class's or module's), without
    `get_closest_marker`'s walk up the tree for each of thousands of unmarked tests: each parent is
    looked at once."""
    parents: dict[int, bool] = {}

    def carries(node: pytest.Item | pytest.Collector | None) -> bool:
        if node is None:
            return False
        found = parents.get(id(node))
        if found is None:
            found = any(m.name == MARKER for m in node.own_markers) or carries(node.parent)
            parents[id(node)] = found
        return found

    return [item for item in items if any(m.name == MARKER for m in item.own_markers) or carries(item.parent)]
