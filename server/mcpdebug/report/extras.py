"""The report's optional sections: coverage suspects and flaky history, shown when the data exists.

The same views as the MCP tools `get_suspects` and `list_flaky_tests`: suspects when the run was
recorded with `--mcp-debug-coverage` and has failing tests; flaky history for this run's tests that
both passed and failed on one code version in the recorded runs. An optional section never costs
the report: whatever goes wrong in one is logged and the section left out.
"""

from __future__ import annotations

import logging
from typing import Any

from mcpdebug.store import Store
from mcpdebug.views import flaky as flaky_view
from mcpdebug.views import suspects as suspects_view

log = logging.getLogger("mcpdebug.report")
SUSPECTS = 15
FLAKY_RUNS = 50


def coverage_suspects(store: Store, run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's most suspicious lines (Ochiai over per-test coverage), or None without coverage."""
    if not (run["counts"].get("failed") or run["counts"].get("error")):
        return None
    try:
        reply = suspects_view.suspects(store, run, top=SUSPECTS)  # no rows without coverage
    except Exception:
        log.warning("coverage suspects left out of the report", exc_info=True)
        return None
    rows = [row.model_dump() for row in reply.suspects]
    return {"rows": rows, "failing": reply.failing_tests, "passing": reply.passing_tests} if rows else None


def flaky_history(store: Store, run: dict[str, Any], nodeids: set[str]) -> list[dict[str, Any]] | None:
    """Tests of this run that both passed and failed in the recorded history, or None."""
    try:
        found = flaky_view.flaky_list(store, runs=FLAKY_RUNS)
    except Exception:
        log.warning("flaky history left out of the report", exc_info=True)
        return None
    rows = [entry.model_dump() for entry in found.flaky if entry.test in nodeids]
    return rows or None
