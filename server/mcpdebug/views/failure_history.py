"""The history note of each failure in `get_run_summary`: new, known flaky, or failing since."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mcpdebug.diagnosis.flaky import Entry, Verdict, classify

if TYPE_CHECKING:
    from mcpdebug.store import Store

VERDICT_WINDOW = 200
"""Earlier entries a failure is compared with."""


def verdicts(store: Store, run_id: str, nodeids: list[str]) -> dict[str, Verdict]:
    """For each failed test of a run: new, known flaky, failing since, or first record."""
    found: dict[str, Verdict] = {}
    for nodeid in nodeids:
        entries = [Entry.of(r) for r in store.test_history(nodeid, VERDICT_WINDOW)]
        current = next((e for e in entries if e.run_id == run_id and e.failed), None)
        if current is None:
            continue
        earlier = [e for e in entries if e.finished < current.finished and e.run_id != run_id]
        found[nodeid] = classify(current, earlier)
    return found


def failure_notes(store: Store, run_id: str, nodeids: list[str]) -> dict[str, str]:
    """The one-line history note of each failure, for the run summary."""
    return {nodeid: v.text for nodeid, v in verdicts(store, run_id, list(dict.fromkeys(nodeids))).items()}
