"""Plain-text views of stored runs, shared by the MCP tools and the CLI.

Each view is complete on its own (an agent may see only this text) and bounded: long parts keep
their tail and say what was left out and how to get it.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from mcpdebug.replies import PhaseRow, Problem, RunSummary, SessionRow, TestDetail, TestList, TestRow
from mcpdebug.views.calls import call, in_terminal, pytest_command
from mcpdebug.views.failure_history import failure_notes
from mcpdebug.views.time_text import seconds, when

if TYPE_CHECKING:
    from mcpdebug.store import Store

MAX_REPLY_CHARS = 30_000
LONGREPR_CHARS = 12_000
MAX_PROBLEMS = 50
"""Failures a run summary lists; the rest are a list_tests call away."""
MESSAGE_CHARS = 120
"""A failure's one-line message as the typed fields carry it (the text has twice as much)."""

_EXIT_MEANINGS = {
    0: "all tests passed",
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}
LABELS = {
    "failed": "FAILED",
    "error": "ERROR",
    "passed": "passed",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "xpassed": "XPASS",
    "running": "RUNNING",
}
WITH_MESSAGE = ("failed", "error", "skipped", "xfailed")
_COUNT_ORDER = ("failed", "error", "passed", "skipped", "xfailed", "xpassed", "running")


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


def session_rows(runs: list[dict[str, Any]]) -> list[SessionRow]:
    return [
        SessionRow(
            run_id=run["run_id"],
            kind=run["kind"],
            label=run["label"] or "",
            status=run["status"],
            exit_status=run.get("exit_status"),
            started=dt.datetime.fromtimestamp(run["started"]).isoformat(timespec="seconds"),
            duration=round(d, 3) if (d := run_duration(run)) is not None else None,
            counts=run["counts"],
        )
        for run in runs
    ]


def sessions(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return (
            f"No sessions recorded yet. Run {pytest_command(['--mcp-debug'], None)} in the project"
            + (" (or call run_tests)" if not in_terminal() else "")
            + " to record one."
        )
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


def summary(store: Store, run: dict[str, Any]) -> RunSummary:
    """The run's summary, with its failures, collection errors, running tests and hangs; a process
    session's speaks of its process."""
    if run.get("kind") == "process":
        from mcpdebug.views import processes

        return RunSummary(
            text=processes.summary(store, run),
            run_id=run["run_id"],
            status=run["status"],
            exit_status=run.get("exit_status"),
            counts=run["counts"],
            failures=[],
            next_call=call("get_logs", labels=[run["label"] or run["run_id"]]),
        )
    from mcpdebug.views import environment  # (it reads this module's helpers)

    rid = run["run_id"]
    problems = store.problems(rid)
    text = run_summary(
        run,
        problems,
        store.collection_errors(rid),
        store.tests(rid, ("running",)),
        store.hangs(rid),
        failure_notes(store, rid, [p["nodeid"] for p in problems]),
        environment.context_lines(store, run),
    )
    return RunSummary(
        text=text,
        run_id=rid,
        status=run["status"],
        exit_status=run.get("exit_status"),
        counts=run["counts"],
        failures=[
            Problem(
                test=p["nodeid"],
                outcome="failed" if p["phase"] == "call" else "error",
                phase=p["phase"],
                message=_cut(p["message"] or "", MESSAGE_CHARS),
            )
            for p in problems[:MAX_PROBLEMS]
        ],
        next_call=_next_call(rid, problems),
    )


def _next_call(rid: str, problems: list[dict[str, Any]]) -> str:
    if problems:
        return call("get_failure", run_id=rid, test=problems[0]["nodeid"])
    return call("list_tests", run_id=rid)


def run_summary(
    run: dict[str, Any],
    problems: list[dict[str, Any]],
    collect_errors: list[dict[str, Any]],
    running: list[dict[str, Any]],
    hangs: list[dict[str, Any]] | None = None,
    notes: dict[str, str] | None = None,
    context: list[str] | None = None,
) -> str:
    """``notes``: each failing test's history (new, known flaky, failing since), by node id;
    ``context``: what it ran in (its shards, its CI job: `environment.context_lines`)."""
    rid = run["run_id"]
    lines = [
        f"Run {rid} ({run['kind']}): {status_text(run)}",
        f"Command: {run['label'] or '(not yet known)'}",
        f"Directory: {run['rootdir'] or '-'}; Python {run['python'] or '?'}, "
        f"pytest {run['pytest_version'] or '?'}"
        f", host {run['host'] or '?'}" + (f", {run['workers']} xdist workers" if run["workers"] else ""),
        f"Started {when(run['started'])}; "
        + (
            f'took {seconds(run_duration(run))} (collection and tests; pytest\'s "in ...s" also counts '
            "printing its report)"
            if run["status"] != "running"
            else f"running for {seconds(run_duration(run))}"
        ),
        f"Tests: {run['collected'] if run['collected'] is not None else '?'} collected; "
        f"{counts_text(run['counts'])}",
        *(context or []),
    ]
    if problems:
        lines += ["", f"Failures and errors ({len(problems)}):"]
        for p in problems[:MAX_PROBLEMS]:
            label = "FAILED" if p["phase"] == "call" else "ERROR"
            message = _cut(p["message"] or "(no message)", 2 * MESSAGE_CHARS)
            lines.append(f"- {label} {p['nodeid']} ({p['phase']}): {message}")
            if notes and p["nodeid"] in notes:
                lines.append(f"    history: {notes[p['nodeid']]}")
        if len(problems) > MAX_PROBLEMS:
            more = call("list_tests", run_id=rid, outcome="failed,error", offset=MAX_PROBLEMS)
            lines.append(f"- ... and {len(problems) - MAX_PROBLEMS} more: {more}")
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
        one = hangs[0]["nodeid"] if len(hangs) == 1 and hangs[0]["nodeid"] else "..."  # or to fill in
        lines += [f"  {call('get_hang', run_id=rid, test=one)} gives every thread's stack and the locals."]
    if problems:
        first = problems[0]["nodeid"]
        lines += [
            "",
            f"Next: {call('get_failure', run_id=rid, test=first)} for the failing frames with their locals "
            f"and source; {call('get_test', run_id=rid, test=first)} for pytest's traceback text; "
            f"{call('search_output', run_id=rid, pattern='...')} searches every test's output.",
        ]
    elif not collect_errors:
        lines += ["", f"Next: {call('list_tests', run_id=rid)} lists every test."]
    return bound("\n".join(lines))


def test_list(
    run: dict[str, Any], tests: list[dict[str, Any]], total: int, outcome: str | None, offset: int, limit: int
) -> TestList:
    """A page of ``tests`` from ``offset``: at most ``limit`` of them, fewer if more would not fit in
    a reply (its text, or its JSON: each row is in both), with the call for the next page."""
    rid = run["run_id"]
    reply = TestList(run_id=rid, total=total, matching=len(tests), offset=offset, tests=[])
    lines: list[str] = []
    size = 0
    for t in tests[offset : offset + limit]:
        row = TestRow(
            test=t["nodeid"],
            outcome=t["status"],
            duration=round(t["duration"], 4) if t["duration"] is not None else None,
            worker=t["worker"] or "",
            message=_cut(t["message"], 2 * MESSAGE_CHARS)
            if t["message"] and t["status"] in WITH_MESSAGE
            else None,
        )
        line = test_line(t)
        size += len(line) + len(row.model_dump_json(exclude_none=True)) + 2
        if size > MAX_REPLY_CHARS - 2_000 and reply.tests:
            break
        reply.tests.append(row)
        lines.append(line)
    shown = len(reply.tests)
    what = f" with outcome {outcome}" if outcome else ""
    head = f"Run {rid}: {len(tests)} of {total} tests{what}"
    head += f", showing {offset + 1}-{offset + shown}" if shown < len(tests) else ""
    if offset + shown < len(tests):
        reply.next_call = call("list_tests", run_id=rid, outcome=outcome, offset=offset + shown)
        lines.append(f"... {len(tests) - offset - shown} more: {reply.next_call}")
    return reply.with_text("\n".join([head + ":", *lines]))


def test_line(t: dict[str, Any]) -> str:
    """One test as `test_list` shows it: outcome, duration, worker, node id, message."""
    label = LABELS.get(t["status"], t["status"])
    line = f"{label:8} {seconds(t['duration']):>8}  {t['worker'] or '-':10} {t['nodeid']}"
    if t["message"] and t["status"] in WITH_MESSAGE:
        line += f" - {t['message']}"
    return line


def test_detail(
    run: dict[str, Any], test: dict[str, Any], phases: list[dict[str, Any]], output: str
) -> TestDetail:
    """``output``: the tail of the test's captured output, as `outview.output_tail` renders it."""
    rid = run["run_id"]
    lines = [
        f"{test['nodeid']}: {LABELS.get(test['status'], test['status'])} "
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
            text = _indented(p["longrepr"])
            lines += ["", f"--- {p['phase']} failed: {p['message']} ---"]
            if len(text) > LONGREPR_CHARS:
                lines.append(f"[first {len(text) - LONGREPR_CHARS} characters omitted]")
                text = text[-LONGREPR_CHARS:]
            lines.append(text)
        elif p["outcome"] == "skipped" and p["message"]:
            lines += ["", f"--- {p['phase']} skipped: {p['message']} ---"]
    lines += ["", output]
    return TestDetail(
        text=bound("\n".join(lines)),
        run_id=rid,
        test=test["nodeid"],
        outcome=test["status"],
        file=test["file"] or None,
        line=test["line"] or None,
        phases=[
            PhaseRow(
                phase=p["phase"],
                outcome=p["outcome"],
                duration=p["duration"],
                message=p["message"] or None,
            )
            for p in phases
        ],
    )


def _indented(longrepr: str) -> str:
    """pytest's text of a traceback with its first line indented as pytest prints it (``str()`` of
    a report strips the four spaces before the test's ``def``)."""
    first, _, rest = longrepr.partition("\n")
    if first.startswith(("def ", "async def ", "@", "class ")) and rest.startswith("    "):
        return "    " + longrepr
    return longrepr


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
