"""What the HTML report shows of a run, read from the store as the MCP tools read it, and bounded.

Every list has a limit, so a 10,000-test run makes a report of a few megabytes: failures and hangs
in full up to `FAILURES` and `HANGS` (the rest named), each test's output cut to its tail, the
output of tests that passed within one budget for the whole report, and the test table as compact
rows the page's script filters.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

from mcpdebug.report import extras
from mcpdebug.store import Store, output_query
from mcpdebug.views import hang as hang_view
from mcpdebug.views import runs as runs_view
from mcpdebug.views import time_text
from pytest_mcpdebug.protocol import HangReport, HangThread, Snapshot, SnapshotVar

# Limits
FAILURES: Final = 200
"""Failures shown in full; the rest are listed with their first line."""
HANGS: Final = 50
LOCALS: Final = 60
"""Locals shown for one frame."""
TAIL_LINES: Final = 200
"""Output lines kept for a failing or hung test (the tail)."""
LINE_CHARS: Final = 400
PASSED_OUTPUT_LINES: Final = 40
PASSED_OUTPUT_BUDGET: Final = 400_000
"""Characters of output kept for all the tests that did not fail, together."""
TESTS: Final = 50_000
"""Rows of the test table; beyond that, the tests that did not pass and the slowest."""
SLOWEST: Final = 25
BUCKETS: Final = ("<1 ms", "1-10 ms", "10-100 ms", "0.1-1 s", "1-10 s", "10-100 s", ">=100 s")

PROBLEMS: Final = ("failed", "error", "crashed", "hung", "interrupted")


def build(store: Store, run: dict[str, Any]) -> dict[str, Any]:
    """The report's data for ``run`` (a row of `Store.run`)."""
    rid = run["run_id"]
    tests = store.tests(rid)
    units = {u["unit"]: u for u in output_query.units(store.db, rid)}
    failures = store.failures(rid)
    hangs = store.hangs(rid)
    budget = [PASSED_OUTPUT_BUDGET]
    rows = _rows(store, run, tests, units, budget)
    durations = [t["duration"] for t in tests if t["duration"] is not None]
    return {
        "run": _run(run),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "counts": sorted(run["counts"].items(), key=lambda kv: (kv[0] not in PROBLEMS, kv[0])),
        "problems": store.problems(rid),
        "collection_errors": store.collection_errors(rid),
        "failures": [_failure(store, run, f, units) for f in failures[:FAILURES]],
        "failures_more": [
            {"nodeid": f["nodeid"], "phase": f["phase"], "message": _first(f["snapshot"].exception.message)}
            for f in failures[FAILURES:]
        ],
        "hangs": [_hang(store, run, h, units) for h in hangs[:HANGS]],
        "hangs_more": [{"nodeid": h["nodeid"], "summary": h["summary"]} for h in hangs[HANGS:]],
        "tests": rows,
        "tests_total": len(tests),
        "slowest": [
            {"nodeid": t["nodeid"], "duration": t["duration"], "status": t["status"]}
            for t in sorted(tests, key=lambda t: -(t["duration"] or 0))[:SLOWEST]
            if t["duration"] is not None
        ],
        "histogram": _histogram(durations),
        "total_duration": sum(durations),
        "suspects": extras.coverage_suspects(store, run),
        "flaky": extras.flaky_history(store, run, {t["nodeid"] for t in tests}),
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


def _failure(
    store: Store, run: dict[str, Any], failure: dict[str, Any], units: dict[str, Any]
) -> dict[str, Any]:
    snap: Snapshot = failure["snapshot"]
    frames = []
    user = [f for f in snap.frames if not f.library]
    with_source = {id(f) for f in user[:2]} | ({id(user[-1])} if user else set())
    for number, frame in enumerate(snap.frames):
        if frame.library:
            continue
        frames.append(
            {
                "number": number,
                "file": _relative(frame.file, run),
                "line": frame.line,
                "function": frame.function,
                "source": [{"n": n, "text": t, "at": n == frame.line} for n, t in frame.source]
                if id(frame) in with_source or len(user) <= 4
                else [],
                "locals": _locals(frame.locals),
                "open": id(frame) in with_source,
            }
        )
    return {
        "nodeid": failure["nodeid"],
        "phase": failure["phase"],
        "kind": "FAILED" if failure["phase"] == "call" else "ERROR",
        "type": snap.exception.type,
        "message": snap.exception.message,
        "assertion": snap.assertion,
        "chain": [{"type": c.type, "message": _first(c.message), "relation": c.relation} for c in snap.chain],
        "notes": snap.notes,
        "frames": frames,
        "library_frames": len(snap.frames) - len(user),
        "frames_dropped": snap.frames_dropped,
        "output": _tail(store, run, units.get(failure["nodeid"]), TAIL_LINES),
        "anchor": _anchor("f", failure["nodeid"], failure["phase"]),
    }


def _hang(store: Store, run: dict[str, Any], hang: dict[str, Any], units: dict[str, Any]) -> dict[str, Any]:
    report: HangReport = hang["report"]
    marked = set(report.lines or [report.line])
    return {
        "nodeid": hang["nodeid"] or "(the run)",
        "phase": hang["phase"],
        "summary": report.summary,
        "kind": hang_view.KINDS.get(report.kind, report.kind),
        "kind_code": report.kind,
        "timing": _timing(report),
        "action": hang_view.ACTIONS.get(report.action, report.action) if report.action else "",
        "where": f"{_relative(report.file, run)}:{report.line} in {report.function}()"
        if report.file and report.line
        else "",
        "source": [{"n": n, "text": t, "at": n in marked} for n, t in report.source],
        "locals": _locals(report.locals),
        "locals_frame": report.locals_frame,
        "threads": [_thread(t, run) for t in report.threads],
        "tasks": [
            {
                "name": t.name,
                "coro": t.coro,
                "state": t.state,
                "awaiting": t.awaiting,
                "where": next(
                    (f"{f.file}:{f.line} in {f.function}()" for f in t.frames if not f.library), ""
                ),
            }
            for t in report.tasks[:30]
        ],
        "processes": [
            {
                "pid": p.pid,
                "status": p.status,
                "command": p.command[:200],
                "what": p.summary if p.python else (p.error or "not read"),
            }
            for p in report.processes[:30]
        ],
        "before": [_cut(line) for line in report.output[-TAIL_LINES:]],
        "samples": f"{report.samples} samples every {report.interval:g} s" if report.samples else "",
        "output": _tail(store, run, units.get(hang["nodeid"]), TAIL_LINES) if hang["nodeid"] else None,
        "anchor": _anchor("h", hang["nodeid"] or "run", hang["phase"] or ""),
    }


def _timing(report: HangReport) -> str:
    parts = []
    if report.timeout:
        parts.append(f"timeout {report.timeout:g} s, reported after {report.elapsed:.1f} s")
    if report.cpu is not None and report.elapsed > 0:
        parts.append(
            f"{report.cpu:.2f} s of CPU in {report.elapsed:.1f} s ({report.cpu / report.elapsed:.0%})"
        )
    return "; ".join(parts)


def _thread(thread: HangThread, run: dict[str, Any]) -> dict[str, Any]:
    """A thread's frames as the text view shows them: library frames past the third are counted."""
    frames = [
        {"number": n, "where": f"{_relative(f.file, run)}:{f.line} in {f.function}()", "code": f.code}
        | {"library": f.library}
        for n, f in enumerate(thread.frames)
        if not f.library or n <= 2
    ]
    return {
        "name": thread.name,
        "test": thread.test,
        "daemon": thread.daemon,
        "cpu": f"{thread.cpu:.2f} s" if thread.cpu is not None else "",
        "summary": thread.summary,
        "frames": frames[:60],
        "hidden": len(thread.frames) - len(frames[:60]),
    }


def _locals(variables: list[SnapshotVar]) -> list[dict[str, str]]:
    return [{"name": v.name, "type": v.type, "value": v.value} for v in variables[:LOCALS]]


def _tail(
    store: Store, run: dict[str, Any], unit: dict[str, Any] | None, lines: int
) -> dict[str, Any] | None:
    """The last ``lines`` lines of a unit's combined output: [stream, number, text] rows and the total."""
    if unit is None or not unit["lines"]:
        return None
    view = output_query.build_view(store.outputs, store.db, run["run_id"], unit)
    start = max(view.total - lines + 1, 1)
    rows = [
        [line.stream, line.number, _cut(line.text)]
        if line.number is not None
        else ["gap", None, line.gap_text()]
        for line in view.lines(start, view.total)
    ]
    return {"rows": rows, "total": view.total, "omitted": start - 1}


def _rows(
    store: Store, run: dict[str, Any], tests: list[dict[str, Any]], units: dict[str, Any], budget: list[int]
) -> list[list[Any]]:
    """[nodeid, status, duration, worker, output or None] for the test table (bounded)."""
    chosen = tests
    if len(tests) > TESTS:
        chosen = [t for t in tests if t["status"] != "passed"]
        chosen += sorted((t for t in tests if t["status"] == "passed"), key=lambda t: -(t["duration"] or 0))
        chosen = chosen[:TESTS]
    rows = []
    for t in chosen:
        output = None
        unit = units.get(t["nodeid"])
        if unit is not None and unit["lines"] and budget[0] > 0 and t["status"] not in PROBLEMS:
            output = _tail(store, run, unit, PASSED_OUTPUT_LINES)
            if output is not None:
                budget[0] -= sum(len(r[2]) + 8 for r in output["rows"])
        rows.append([t["nodeid"], t["status"], t["duration"], t["worker"] or "", output])
    return rows


def _histogram(durations: list[float]) -> list[dict[str, Any]]:
    counts = [0] * len(BUCKETS)
    for d in durations:
        index = 0 if d < 0.001 else min(math.floor(math.log10(d)) + 4, len(BUCKETS) - 1)
        counts[max(index, 0)] += 1
    top = max(counts) or 1
    return [{"label": b, "count": c, "share": c / top} for b, c in zip(BUCKETS, counts, strict=True)]


def _relative(path: str, run: dict[str, Any]) -> str:
    """A file of the project relative to the run's rootdir, as pytest shows it."""
    root = (run.get("rootdir") or "").rstrip("/")
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def _first(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return _cut(line, 300)


def _cut(text: str, limit: int = LINE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _anchor(prefix: str, nodeid: str, phase: str) -> str:
    import hashlib

    return prefix + hashlib.blake2s(f"{nodeid}\0{phase}".encode(), digest_size=6).hexdigest()
