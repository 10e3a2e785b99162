"""What the HTML report shows of a run, read from the store as the MCP tools read it, and bounded.

Every list has a limit, so a 10,000-test run makes a report of a few megabytes: failures and hangs
in full up to `FAILURES` and `HANGS` (the rest named), grouped into one card per test
(`html_cards`); each test's output cut to its tail; the output of tests that passed within one
budget for the whole report; the test table as compact rows, written in the page (it reads without
JavaScript), problems first.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final, NamedTuple

from mcpdebug.report import extras, html_cards
from mcpdebug.store import Store, output_query
from mcpdebug.views import environment, time_text
from mcpdebug.views import runs as runs_view

# Limits
FAILURES: Final = 200
"""Failures shown in full; the rest are listed with their first line."""
HANGS: Final = 50
OPEN_CARDS: Final = 5
"""Cards open when the page loads (the first, failures before hangs); the rest show one line each."""
MESSAGE_CHARS: Final = 200
"""A test's message in the table (its first line)."""
PASSED_OUTPUT_LINES: Final = 40
PASSED_OUTPUT_BUDGET: Final = 400_000
"""Characters of output kept for all the tests that did not fail, together."""
TESTS: Final = 50_000
"""Rows of the test table; beyond that, the tests that did not pass and the slowest."""
SLOWEST: Final = 25
BUCKETS: Final = ("<1 ms", "1-10 ms", "10-100 ms", "0.1-1 s", "1-10 s", "10-100 s", ">=100 s")

PROBLEMS: Final = ("failed", "error", "crashed", "hung", "interrupted")


class Row(NamedTuple):
    """A row of the test table (a tuple: the template reads 50,000 of them by attribute, quickly)."""

    nodeid: str
    status: str
    duration: float | None
    worker: str
    message: str
    card: bool
    """The test has a card, which its row links to."""
    anchor: str
    row: str
    output: dict[str, Any] | None


def build(store: Store, run: dict[str, Any]) -> dict[str, Any]:
    """The report's data for ``run`` (a row of `Store.run`)."""
    rid = run["run_id"]
    tests = store.tests(rid)
    units = {u["unit"]: u for u in output_query.units(store.db, rid)}
    failures = store.failures(rid)
    hangs = store.hangs(rid)
    cards = html_cards.cards(store, run, failures[:FAILURES], hangs[:HANGS], units)
    failing = [c for c in cards if not c["hangs"]]
    hung = [c for c in cards if c["hangs"]]
    for number, card in enumerate(failing + hung):
        card["open"] = number < OPEN_CARDS
    slowest = [
        t for t in sorted(tests, key=lambda t: -(t["duration"] or 0))[:SLOWEST] if t["duration"] is not None
    ]
    ranks = {t["nodeid"]: n for n, t in enumerate(slowest, 1)}
    carded = {c["nodeid"] for c in cards if c["test"]}
    rows = _rows(store, run, tests, units, carded)
    in_table = {r.nodeid for r in rows}

    def link(nodeid: str | None) -> str:
        """The anchor of a test that has one in this page (a card or a row), else ""."""
        return html_cards.anchor(nodeid) if nodeid and (nodeid in carded or nodeid in in_table) else ""

    for card in cards:
        card["in_table"] = card["nodeid"] in in_table
        card["slowest"] = ranks.get(card["nodeid"])
        card["slow_anchor"] = html_cards.slow_anchor(card["nodeid"])
    durations = [t["duration"] for t in tests if t["duration"] is not None]
    counts = sorted(run["counts"].items(), key=lambda kv: (kv[0] not in PROBLEMS, kv[0]))
    flaky = extras.flaky_history(store, run, {t["nodeid"] for t in tests})
    for entry in flaky or []:
        entry["anchor"] = link(entry["test"])
    shards = store.shards(rid)
    return {
        "run": _run(run),
        "ci": environment.ci_text(next((s["ci"] for s in shards if s["ci"]), {})),
        "shards": [
            {
                "label": s["label"] or "(no label)",
                "host": s["host"] or "?",
                "counts": runs_view.counts_text(s["counts"]) if s["counts"] else s["status"],
                "exit": s["exit_status"],
            }
            for s in shards
        ]
        if len(shards) > 1
        else [],
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "counts": counts,
        "hang_count": len(hangs),
        "collection_errors": store.collection_errors(rid),
        "failures": failing,
        "failures_more": [
            {
                "nodeid": f["nodeid"],
                "anchor": link(f["nodeid"]),
                "phase": f["phase"],
                "message": html_cards.first(f["snapshot"].exception.message),
            }
            for f in failures[FAILURES:]
        ],
        "hangs": hung,
        "hangs_more": [
            {
                "nodeid": h["nodeid"] or "(the run)",
                "anchor": link(h["nodeid"]),
                "summary": h["summary"],
            }
            for h in hangs[HANGS:]
        ],
        "tests": rows,
        "tests_total": len(tests),
        "slowest": [
            {
                "nodeid": t["nodeid"],
                "duration": t["duration"],
                "status": t["status"],
                "anchor": link(t["nodeid"]),
                "id": html_cards.slow_anchor(t["nodeid"]),
            }
            for t in slowest
        ],
        "histogram": _histogram(durations),
        "total_duration": sum(durations),
        "suspects": extras.coverage_suspects(store, run),
        "flaky": flaky,
    }


def _run(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": run["run_id"],
        "label": run["label"] or "pytest",
        "status": runs_view.status_text(run),
        "ok": run["status"] == "finished" and not any(run["counts"].get(k) for k in PROBLEMS),
        "started": time_text.when(run["started"]),
        "duration": time_text.seconds(runs_view.run_duration(run)),
        "counts": runs_view.counts_text(run["counts"]),
        "command": " ".join(["pytest", *run.get("args", [])]) if run["kind"] == "pytest" else run["label"],
        "where": run.get("rootdir") or run.get("cwd") or "",
        "python": run.get("python") or "",
        "host": run.get("host") or "",
        "kind": run["kind"],
    }


def _rows(
    store: Store,
    run: dict[str, Any],
    tests: list[dict[str, Any]],
    units: dict[str, Any],
    carded: set[str],
) -> list[Row]:
    """The test table's rows (bounded), problems first, each in the order the tests ran.

    A test with a card links to it (its own anchor is the card's); any other test's anchor is its
    row, which holds its output when it has some (within `PASSED_OUTPUT_BUDGET`)."""
    chosen = tests
    if len(tests) > TESTS:
        chosen = [t for t in tests if t["status"] != "passed"]
        chosen += sorted((t for t in tests if t["status"] == "passed"), key=lambda t: -(t["duration"] or 0))
        chosen = chosen[:TESTS]
    chosen = sorted(chosen, key=lambda t: t["status"] not in PROBLEMS)  # stable: run order within
    budget = PASSED_OUTPUT_BUDGET
    rows = []
    for t in chosen:
        nodeid = t["nodeid"]
        output = None
        unit = units.get(nodeid)
        if unit is not None and unit["lines"] and budget > 0 and nodeid not in carded:
            output = html_cards.tail(store, run, unit, PASSED_OUTPUT_LINES)
            if output is not None:
                budget -= sum(len(r[2]) + 8 for r in output["rows"])
        message = t.get("message") or ""
        rows.append(
            Row(
                nodeid=nodeid,
                status=t["status"],
                duration=t["duration"],
                worker=t["worker"] or "",
                message=html_cards.cut(message.strip().split("\n", 1)[0], MESSAGE_CHARS)
                if message.strip()
                else "",
                card=nodeid in carded,
                anchor=html_cards.anchor(nodeid),
                row=html_cards.row_anchor(nodeid),
                output=output,
            )
        )
    return rows


def _histogram(durations: list[float]) -> list[dict[str, Any]]:
    counts = [0] * len(BUCKETS)
    for d in durations:
        index = 0 if d < 0.001 else min(math.floor(math.log10(d)) + 4, len(BUCKETS) - 1)
        counts[max(index, 0)] += 1
    top = max(counts) or 1
    return [{"label": b, "count": c, "share": c / top} for b, c in zip(BUCKETS, counts, strict=True)]
