"""The HTML report's cards: one per test that failed or hung, holding all of that test's problems.

A test's failures (each phase: a call that failed, a teardown that errored) and its hangs share one
card, so a hung test appears once: its card holds the hang's diagnosis, and the interruption's
traceback (the `HangTimeout` the watchdog raised in the same phase) as a collapsed part of it. The
card's body carries the test's anchor (`anchor`), which every link to the test uses: the table, the
slowest tests, the named-only lists. A link into a closed `<details>` opens it in Chromium without
any script; the page's script does the same in other browsers.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from mcpdebug.store import Store, output_query
from mcpdebug.views import hang as hang_view
from pytest_mcpdebug.protocol import HangReport, HangThread, Snapshot, SnapshotVar

# Limits
LOCALS: Final = 60
"""Locals shown for one frame."""
TAIL_LINES: Final = 200
"""Output lines kept for a failing or hung test (the tail)."""
LINE_CHARS: Final = 400
THREAD_FRAMES: Final = 60
TASKS: Final = 30
PROCESSES: Final = 30


def cards(
    store: Store,
    run: dict[str, Any],
    failures: list[dict[str, Any]],
    hangs: list[dict[str, Any]],
    units: dict[str, Any],
) -> list[dict[str, Any]]:
    """One card per test of ``failures`` and ``hangs`` (rows of the store), in the order of the first
    problem of each; a hang of the run itself (no test) is a card of its own."""
    by_test: dict[str, dict[str, Any]] = {}
    for hang in hangs:
        card = by_test.setdefault(hang["nodeid"] or "", _card(hang["nodeid"] or ""))
        card["hangs"].append(_hang(hang, run))
    for failure in failures:
        card = by_test.setdefault(failure["nodeid"], _card(failure["nodeid"]))
        card["failures"].append(_failure(failure, run))
    for card in by_test.values():
        hung = {h["phase"] for h in card["hangs"]}
        for failure in card["failures"]:
            failure["interruption"] = failure["phase"] in hung  # the watchdog's HangTimeout
        first = card["hangs"][0] if card["hangs"] else card["failures"][0]
        card["kind"] = "HANG" if card["hangs"] else first["kind"]
        card["phase"] = first["phase"]
        card["why"] = first["summary"] if card["hangs"] else first["why"]
        card["also"] = [
            f"{f['kind']} in {f['phase']}: {f['why']}"
            for f in card["failures"]
            if not f["interruption"] and f is not first
        ]
        unit = units.get(card["nodeid"]) if card["nodeid"] else None
        card["output"] = tail(store, run, unit, TAIL_LINES)
    return list(by_test.values())


def _card(nodeid: str) -> dict[str, Any]:
    return {
        "nodeid": nodeid or "(the run)",
        "test": bool(nodeid),
        "anchor": anchor(nodeid) if nodeid else "t-run",
        "row": row_anchor(nodeid) if nodeid else "",
        "hangs": [],
        "failures": [],
    }


def anchor(nodeid: str) -> str:
    """The test's one stable anchor (the same in every report): its card, or its table row if none."""
    return "t-" + _digest(nodeid)


def row_anchor(nodeid: str) -> str:
    """The table row of a test whose anchor is its card."""
    return "r-" + _digest(nodeid)


def slow_anchor(nodeid: str) -> str:
    return "s-" + _digest(nodeid)


def _digest(nodeid: str) -> str:
    return hashlib.blake2s(nodeid.encode(), digest_size=6).hexdigest()


def _failure(failure: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
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
                "file": relative(frame.file, run),
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
        "phase": failure["phase"],
        "kind": "FAILED" if failure["phase"] == "call" else "ERROR",
        "type": snap.exception.type,
        "message": snap.exception.message,
        "why": f"{snap.exception.type}: {first(snap.exception.message)}",
        "assertion": snap.assertion,
        "chain": [{"type": c.type, "message": first(c.message), "relation": c.relation} for c in snap.chain],
        "notes": snap.notes,
        "frames": frames,
        "library_frames": len(snap.frames) - len(user),
        "frames_dropped": snap.frames_dropped,
    }


def _hang(hang: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    report: HangReport = hang["report"]
    marked = set(report.lines or [report.line])
    return {
        "phase": hang["phase"] or "",
        "summary": report.summary,
        "kind": hang_view.KINDS.get(report.kind, report.kind),
        "kind_code": report.kind,
        "timing": _timing(report),
        "action": hang_view.ACTIONS.get(report.action, report.action) if report.action else "",
        "where": f"{relative(report.file, run)}:{report.line} in {report.function}()"
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
            for t in report.tasks[:TASKS]
        ],
        "processes": [
            {
                "pid": p.pid,
                "status": p.status,
                "command": p.command[:200],
                "what": p.summary if p.python else (p.error or "not read"),
            }
            for p in report.processes[:PROCESSES]
        ],
        "before": [cut(line) for line in report.output[-TAIL_LINES:]],
        "samples": f"{report.samples} samples every {report.interval:g} s" if report.samples else "",
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
        {"number": n, "where": f"{relative(f.file, run)}:{f.line} in {f.function}()", "code": f.code}
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
        "frames": frames[:THREAD_FRAMES],
        "hidden": len(thread.frames) - len(frames[:THREAD_FRAMES]),
    }


def _locals(variables: list[SnapshotVar]) -> list[dict[str, str]]:
    return [{"name": v.name, "type": v.type, "value": v.value} for v in variables[:LOCALS]]


def tail(store: Store, run: dict[str, Any], unit: dict[str, Any] | None, lines: int) -> dict[str, Any] | None:
    """The last ``lines`` lines of a unit's combined output: [stream, number, text] rows and the total."""
    if unit is None or not unit["lines"]:
        return None
    view = output_query.build_view(store.outputs, store.db, run["run_id"], unit)
    start = max(view.total - lines + 1, 1)
    rows = [
        [line.stream, line.number, cut(line.text)]
        if line.number is not None
        else ["gap", None, line.gap_text()]
        for line in view.lines(start, view.total)
    ]
    return {"rows": rows, "total": view.total, "omitted": start - 1}


def relative(path: str, run: dict[str, Any]) -> str:
    """A file of the project relative to the run's rootdir, as pytest shows it."""
    root = (run.get("rootdir") or "").rstrip("/")
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def first(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return cut(line, 300)


def cut(text: str, limit: int = LINE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
