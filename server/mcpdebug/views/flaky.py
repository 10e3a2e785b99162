"""`get_test_history`, `list_flaky` and the history note of each failure in `get_run_summary`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpdebug.replies.diagnosis import FlakyEntry, FlakyList, HistoryEntry, TestHistory
from mcpdebug.views.failure_history import VERDICT_WINDOW
from mcpdebug.views.lookup import LISTED, NotFound, quoted
from mcpdebug.views.runs import bound
from mcpdebug.views.time_text import seconds, when
from pytest_mcpdebug.diagnosis.flaky import Entry, classify, describe_version, flaky_tests

if TYPE_CHECKING:
    from mcpdebug.store import Store


def resolve_test(store: Store, query: str) -> str:
    """A node id of the history: exact, or the one history node id containing ``query``."""
    if not query:
        raise NotFound("Name a test: a node id from list_tests, or part of one.")
    if store.test_history(query, 1):
        return query
    matches = store.history_nodeids(query)
    if len(matches) > 1:
        named = [m for m in matches if m.endswith("::" + query) or m.split("::")[-1].split("[")[0] == query]
        matches = named if len(named) == 1 else matches
    if len(matches) == 1:
        return matches[0]
    if matches:
        listing = "\n".join(f"  {m}" for m in matches[:LISTED])
        raise NotFound(f"{quoted(query)} matches several tests in the history; give one of:\n{listing}")
    raise NotFound(
        f"No recorded run has a test matching {quoted(query)}; list_tests(run_id=...) lists a run's tests."
    )


def test_history(store: Store, query: str, limit: int = 20) -> TestHistory:
    nodeid = resolve_test(store, query)
    rows = store.test_history(nodeid, limit)
    entries = [
        HistoryEntry(
            run_id=r["run_id"],
            finished=when(r["finished"]),
            outcome=r["outcome"],
            attempt=r["attempt"],
            duration=round(r["duration"], 4),
            phase=r["phase"],
            message=r["message"],
            commit=r["commit_id"][:10],
            uncommitted_changes=bool(r["changes"]),
        )
        for r in rows
    ]
    lines = [f"History of {nodeid}: the last {len(rows)} record(s), newest first."]
    for r in rows:
        attempt = f" (attempt {r['attempt']})" if r["attempt"] > 1 or r["outcome"] == "rerun" else ""
        version = describe_version(r["commit_id"], r["changes"]) if r["commit_id"] else r["version_note"]
        outcome = r["outcome"].upper() if r["outcome"] != "passed" else "passed"
        line = f"- {when(r['finished'])}  {outcome:8}{attempt} "
        line += f"{seconds(r['duration']):>7}  run {r['run_id']}  {version}"
        if r["message"]:
            line += f"\n    {r['phase'] or 'call'}: {r['message']}"
        lines.append(line)
    verdict = None
    latest = [Entry.of({**r, "nodeid": nodeid}) for r in store.test_history(nodeid, VERDICT_WINDOW)]
    if latest and latest[0].failed:
        judged = classify(latest[0], [e for e in latest[1:] if e.run_id != latest[0].run_id])
        verdict = judged.kind
        lines.append(f"The latest failure: {judged.text}.")
    flaky = flaky_tests(latest)
    if flaky and flaky[0].versioned:
        lines.append(f"Flaky: it both passed and failed on {', '.join(flaky[0].versions[:3])}.")
    return TestHistory(text=bound("\n".join(lines)), test=nodeid, entries=entries, verdict=verdict)


def flaky_list(store: Store, runs: int = 50) -> FlakyList:
    run_ids = store.history_runs(runs)
    found = flaky_tests(Entry.of(r) for r in store.history_of_runs(run_ids))
    rows = [_flaky_entry(f) for f in found]
    versioned = [r for r in rows if r.versioned]
    lines = [
        f"Flaky tests over the last {len(run_ids)} recorded run(s): {len(versioned)} passed and failed on "
        "the "
        "same code version (commit + uncommitted changes)."
    ]
    for r in versioned[:100]:
        lines.append(
            f"- {r.test}: {r.failures} failure(s), {r.passes} pass(es) in {r.runs} run(s), on "
            f"{', '.join(r.versions[:2])}; last failed in run {r.last_failure_run}"
            + (f": {r.last_failure}" if r.last_failure else "")
        )
    unversioned = [r for r in rows if not r.versioned]
    if unversioned:
        lines.append(
            f"{len(unversioned)} more passed and failed on runs without a known code version (no git), "
            "so they may be flaky or may have changed: " + ", ".join(r.test for r in unversioned[:10])
        )
    if not rows:
        lines.append("None: no test both passed and failed on one code version in these runs.")
    else:
        lines.append("Next: get_test_history(test=...) lists a test's runs with their outcomes and commits.")
    return FlakyList(text=bound("\n".join(lines)), runs=len(run_ids), flaky=rows)


def _flaky_entry(f: Any) -> FlakyEntry:
    last = f.last_failure
    return FlakyEntry(
        test=f.nodeid,
        passes=f.passes,
        failures=f.failures,
        runs=len(f.runs),
        versions=f.versions,
        last_failure_run=last.run_id if last else None,
        last_failure=last.message if last else None,
        versioned=f.versioned,
    )
