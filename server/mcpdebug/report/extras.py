"""The report's optional sections: coverage suspects and flaky history, shown when the data exists.

HOOK (issue 15): per-test coverage (`--mcp-debug-coverage`) and the flaky history are added by
another change (`mcpdebug.views.suspects`, `mcpdebug.views.flaky`). Until it is merged those modules
do not exist and these sections are left out; once merged, a run recorded with coverage shows its
suspects and a test that both passed and failed on one code version shows in the flaky section.
They are looked up by name so this module works on either side of that merge; if their functions
change, only the two calls below change.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from mcpdebug.store import Store
from mcpdebug.views import lookup

log = logging.getLogger("mcpdebug.report")
SUSPECTS: int = 15
FLAKY: int = 50


def _view(name: str) -> Any:
    try:
        return importlib.import_module(f"mcpdebug.views.{name}")
    except ImportError:
        return None


def coverage_suspects(store: Store, run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's most suspicious lines (Ochiai over per-test coverage), or None without coverage."""
    view = _view("suspects")
    if view is None or not any(t in ("failed", "error") for t in run["counts"] if run["counts"][t]):
        return None
    try:
        reply = view.suspects(store, run, top=SUSPECTS)
    except lookup.NotFound:
        return None  # recorded without --mcp-debug-coverage
    except Exception:  # an optional section never costs the report
        log.warning("coverage suspects left out of the report", exc_info=True)
        return None
    rows = [row.model_dump() for row in reply.suspects]
    return {"rows": rows, "failing": reply.failing_tests, "passing": reply.passing_tests} if rows else None


def flaky_history(store: Store, run: dict[str, Any], nodeids: set[str]) -> list[dict[str, Any]] | None:
    """Tests of this run that both passed and failed in the recorded history, or None."""
    view = _view("flaky")
    if view is None:
        return None
    try:
        found = view.flaky_list(store, runs=FLAKY)
    except Exception:
        log.warning("flaky history left out of the report", exc_info=True)
        return None
    rows = [entry.model_dump() for entry in found.flaky if entry.test in nodeids]
    return rows or None
