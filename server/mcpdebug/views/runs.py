"""Plain-text views of stored runs, shared by the MCP tools and the CLI.

Each view is complete on its own (an agent may see only this text) and bounded: long parts keep
their tail and say what was left out and how to get it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from mcpdebug.views.failure_history import failure_notes

if TYPE_CHECKING:
    from mcpdebug.store import Store

MAX_REPLY_CHARS = 30_000
LONGREPR_CHARS = 12_000

_EXIT_MEANINGS = {
    0: "all tests passed",
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}
_LABELS = {
    "failed": "FAILED",
    "error": "ERROR",
    "passed": "passed",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "xpassed": "XPASS",
    "running": "RUNNING",
}
_COUNT_ORDER = ("failed", "error", "passed", "skipped", "xfailed", "xpassed", "running")


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}s" if value < 60 else f"{int(value // 60)}m{value % 60:04.1f}s"


def counts_text(counts: dict[str, int]) -> str:
    parts = [f"{counts[k]} {k}" for k in _COUNT_ORDER if counts.get(k)]
    parts += [f"{n} {k}" for k, n in counts.items() if k not in _COUNT_ORDER and n]
    return ", ".join(parts) or "no tests"


def status_text(run: dict[str, Any]) -> str:
    status = str(run["status"])
    if run.get("kind") == "process":  # a process session: its command's status, not pytest's
        return status + (
            f", last exit status {run['exit_status']}" if run.get("exit_status") is not None else ""
        )
    if run.get("exit_status") is not None:
        meaning = _EXIT_MEANINGS.get(run["exit_status"], "") if run.get("kind", "pytest") == "pytest" else ""
        status += f", exit status {run['exit_status']}" + (f" ({meaning})" if meaning else "")
    elif status == "crashed":
        status += " (its process died without finishing the run)"
    return status


def run_duration(run: dict[str, Any]) -> float | None:
    if run.get("duration") is not None:
        return float(run["duration"])
    end = float(run["last_event"]) if run["status"] != "running" else time.time()
    return end - float(run["started"])


def sessions(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "No sessions recorded yet. Run `pytest --mcp-debug` (or the run_tests tool) to record one."
    lines = [f"{len(runs)} session{'s' if len(runs) != 1 else ''}, newest first:"]
    for run in runs:
        tests = sum(run["counts"].values())
        lines.append(
            f"- {run['run_id']}  [{run['kind']}] {status_text(run)}; started {when(run['started'])}, "
            f"{seconds(run_duration(run))}; {tests} test{'s' if tests != 1 else ''}: "
            f"{counts_text(run['counts'])}"
            + (f"; {run['collection_errors']} collection error(s)" if run["collection_errors"] else "")
        )
        if run["label"]:
            lines.append(f"    {run['label']}")
    return bound("\n".join(lines))


def summary(store: Store, run: dict[str, Any]) -> str:
    """`run_summary` of a stored run, with its failures, collection errors, running tests and hangs."""
    if run.get("kind") == "process":
        from mcpdebug.views import processes  # imports this module

        return processes.summary(store, run)
    rid = run["run_id"]
    problems = store.problems(rid)
    return run_summary(
        run,
        problems,
        store.collection_errors(rid),
        store.tests(rid, ("running",)),
        store.hangs(rid),
        failure_notes(store, rid, [p["nodeid"] for p in problems]),
    )


def run_summary(
    run: dict[str, Any],
    problems: list[dict[str, Any]],
    collect_errors: list[dict[str, Any]],
    running: list[dict[str, Any]],
    hangs: list[dict[str, Any]] | None = None,
    notes: dict[str, str] | None = None,
) -> str:
    """``notes``: each failing test's history (new, known flaky, failing since), by node id."""
    rid = run["run_id"]
    lines = [
        f"Run {rid} ({run['kind']}): {status_text(run)}",
        f"Command: {run['label'] or '(not yet known)'}",
        f"Directory: {run['rootdir'] or '-'}; Python {run['python'] or '?'}, "
        f"pytest {run['pytest_version'] or '?'}"
        f", host {run['host'] or '?'}" + (f", {run['workers']} xdist workers" if run["workers"] else ""),
        f"Started {when(run['started'])}; "
        + (
            f"took {seconds(run_duration(run))}"
            if run["status"] != "running"
            else f"running for {seconds(run_duration(run))}"
        ),
        f"Tests: {run['collected'] if run['collected'] is not None else '?'} collected; "
        f"{counts_text(run['counts'])}",
    ]
    if problems:
        lines += ["", f"Failures and errors ({len(problems)}):"]
        for p in problems:
            label = "FAILED" if p["phase"] == "call" else "ERROR"
            lines.append(f"- {label} {p['nodeid']} ({p['phase']}): {p['message'] or '(no message)'}")
            if notes and p["nodeid"] in notes:
                lines.append(f"    history: {notes[p['nodeid']]}")
    if collect_errors:
        lines += ["", f"Collection errors ({len(collect_errors)}):"]
        lines += [f"- ERROR {e['nodeid']}: {e['message']}" for e in collect_errors]
    if running:
        lines += [
            "",
            f"{'Running' if run['status'] == 'running' else 'Was running when it ended'} ({len(running)}):",
        ]
        lines += [f"- {t['nodeid']} (worker {t['worker']}, since {when(t['started'])})" for t in running]
    if hangs:
        lines += ["", f"Hangs and stops ({len(hangs)}):"]
        lines += [f"- {h['nodeid'] or '(the run)'} [{h['kind']}]: {h['summary']}" for h in hangs]
        lines += [f'  get_hang(run_id="{rid}", test=...) gives every thread\'s stack and the locals.']
    if problems:
        lines += [
            "",
            f'Next: get_failure(run_id="{rid}", test="{problems[0]["nodeid"]}") for the failing frames '
            "with their locals and source; get_test(...) for pytest's traceback text; "
            "search_output(pattern=...) searches every test's output.",
        ]
    elif not collect_errors:
        lines += ["", f'Next: list_tests(run_id="{rid}") lists every test.']
    return bound("\n".join(lines))


def test_list(
    run: dict[str, Any], tests: list[dict[str, Any]], total: int, outcome: str | None, offset: int, limit: int
) -> str:
    shown = tests[offset : offset + limit]
    what = f" with outcome {outcome}" if outcome else ""
    lines = [
        f"Run {run['run_id']}: {len(tests)} of {total} tests{what}"
        + (f", showing {offset + 1}-{offset + len(shown)}" if len(shown) < len(tests) else "")
        + ":"
    ]
    for t in shown:
        label = _LABELS.get(t["status"], t["status"])
        line = f"{label:8} {seconds(t['duration']):>8}  {t['worker']:10} {t['nodeid']}"
        if t["message"] and t["status"] in ("failed", "error", "skipped", "xfailed"):
            line += f" - {t['message']}"
        lines.append(line)
    if offset + len(shown) < len(tests):
        lines.append(
            f'... {len(tests) - offset - len(shown)} more: list_tests(run_id="{run["run_id"]}"'
            + (f', outcome="{outcome}"' if outcome else "")
            + f", offset={offset + len(shown)})"
        )
    return bound("\n".join(lines))


def test_detail(run: dict[str, Any], test: dict[str, Any], phases: list[dict[str, Any]], output: str) -> str:
    """``output``: the tail of the test's captured output, as `outview.output_tail` renders it."""
    rid = run["run_id"]
    lines = [
        f"{test['nodeid']}: {_LABELS.get(test['status'], test['status'])} "
        f"(run {rid}, worker {test['worker'] or '-'}, {seconds(test['duration'])})",
    ]
    if test["file"]:
        lines.append(f"Location: {test['file']}" + (f":{test['line']}" if test["line"] else ""))
    if test["status"] == "running":
        lines.append(
            f"Started {when(test['started'])}; "
            + (
                "still running."
                if run["status"] == "running"
                else f"never finished: the run is {run['status']}."
            )
        )
    if phases:
        lines.append(
            "Phases: "
            + "; ".join(
                f"{p['phase']} {p['outcome']}"
                + (" (xfail)" if p["wasxfail"] is not None else "")
                + f" {seconds(p['duration'])}"
                for p in phases
            )
        )
    for p in phases:
        if p["outcome"] == "failed":
            text = p["longrepr"]
            lines += ["", f"--- {p['phase']} failed: {p['message']} ---"]
            if len(text) > LONGREPR_CHARS:
                lines.append(f"[first {len(text) - LONGREPR_CHARS} characters omitted]")
                text = text[-LONGREPR_CHARS:]
            lines.append(text)
        elif p["outcome"] == "skipped" and p["message"]:
            lines += ["", f"--- {p['phase']} skipped: {p['message']} ---"]
    lines += ["", output]
    return bound("\n".join(lines))


def bound(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    """Keep a reply under the size agents can take in, keeping its head and its end."""
    if len(text) <= limit:
        return text
    head = limit // 3
    rest = limit - head - 200
    omitted = len(text) - head - rest
    return (
        f"{text[:head]}\n[... {omitted} characters omitted to keep this reply under {limit}; "
        f"ask for less (e.g. a smaller tail_lines or an outcome filter) ...]\n{text[-rest:]}"
    )
