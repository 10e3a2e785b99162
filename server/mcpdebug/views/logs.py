"""`get_logs` (seed 004): the newest lines of several sessions merged in time order, and the
``logs/list`` resources (seed 003)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Final

from mcpdebug.replies import LogLine, Logs
from mcpdebug.store import Store, output_query
from mcpdebug.store.output_files import Segment
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import lookup
from mcpdebug.views.output_window import LINE_CHARS, MAX_REPLY_CHARS, parse_time, uri
from pytest_mcpdebug.redaction import redact

MAX_LOG_LINES: Final = 10_000
"""Most lines `get_logs` collects per session (a reply shows far fewer; this bounds memory)."""


Entry = tuple[float, int, int, str, str, str, str]
"""A line of a session: ts, unit, line, session (run id), test, stream, text."""


@dataclass
class _Found:
    queried: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    """run id -> how its lines are tagged: a process session's label."""


def get_logs(
    store: Store,
    labels: list[str],
    *,
    lines: int = 100,
    since: str | None = None,
    stream: str = "both",
    pattern: str | None = None,
    max_results: int = 1000,
) -> Logs:
    """Seed 004's multi-session query: the last ``lines`` lines of each session, merged by time."""
    _check(labels, stream, lines, max_results)
    lines, max_results = min(lines, MAX_LOG_LINES), min(max_results, MAX_LOG_LINES)
    start_time = parse_time(since, "since")
    finder = output_query.compile_search(pattern) if pattern else None
    found = _collect(store, labels, lines, start_time, stream, finder)
    processes = list(dict.fromkeys(s["label"] for s in store.process_sessions()))[:10]
    known = [*store.run_ids(10), *processes]
    if not found.queried:
        raise OutputError(
            ErrorType.LOG_NOT_FOUND,
            f"No session matches {lookup.listing([lookup.quoted(label) for label in labels], 5)}; known "
            f"sessions (newest first): {', '.join(known) or 'none yet'}. Labels are run ids, "
            "\"latest\", a run's command or a process session's label, as list_sessions shows them.",
        )
    entries = sorted(found.entries, key=lambda e: e[:3])  # time, unit, line: a batch shares one time
    total = len(entries)
    truncated = total > max_results
    entries = entries[-max_results:]
    reply = Logs(
        total_results=total,
        truncated=truncated,
        sessions_queried=found.queried,
        sessions_not_found=found.missing,
        time_range=f"oldest {_iso(entries[0][0])}, newest {_iso(entries[-1][0])}" if entries else None,
        known_sessions=known if found.missing else None,
        lines=[],
    )
    cut = _add_lines(reply, entries, found.names)
    if cut:
        note = (
            f" (reply size limit: showing the newest {len(reply.lines)} of {total}; "
            "narrow with since= or pattern=)"
        )
    else:
        note = f" (kept the newest {max_results})" if truncated else ""
    return reply.with_text(_text(reply, note, empty=not entries))


def _check(labels: list[str], stream: str, lines: int, max_results: int) -> None:
    if not labels:
        raise OutputError(
            ErrorType.INVALID_ARGUMENT,
            'labels is empty; name at least one run id, session label or "latest".',
        )
    if stream not in ("stdout", "stderr", "log", "warnings", "both"):
        raise OutputError(
            ErrorType.INVALID_ARGUMENT,
            f"stream={stream!r} is not valid; use stdout, stderr, log, warnings or both.",
        )
    if lines < 1 or max_results < 1:
        raise OutputError(ErrorType.INVALID_ARGUMENT, "lines and max_results must be at least 1.")


def _collect(
    store: Store,
    labels: list[str],
    lines: int,
    start_time: float | None,
    stream: str,
    finder: output_query.Finder | None,
) -> _Found:
    """The newest ``lines`` lines of each session named, and which names matched none."""
    found = _Found()
    for label in labels:
        run_id = store.resolve_run(label)
        if run_id is None:
            found.missing.append(label)
            continue
        found.queried.append(label)
        process = store.process_sessions(run_id)
        if process:
            found.names[run_id] = process[0]["label"]
        entries = session_lines(store, run_id, lines, start_time, stream, finder)
        if not process and stream == "both":  # its failures count among its newest lines
            entries = sorted(entries + failure_entries(store, run_id, start_time, finder))[-lines:]
        found.entries += entries
    return found


def _add_lines(reply: Logs, entries: list[Entry], names: dict[str, str]) -> bool:
    """The newest entries that fit in a reply, oldest first; True if the size limit cut some."""
    budget = MAX_REPLY_CHARS - 2_000
    size = 0
    cut = False
    for ts, _, _, session, test, st, text in reversed(entries):
        text = text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " [...]"
        line = LogLine(
            time=_iso(ts),
            session=names.get(session, session),
            test=test or None,
            stream=st,
            text=text,
            process=session in names,
        )
        size += len(text) + len(test) + len(session) + 100  # its line in the JSON, the larger form
        if size > budget:
            reply.truncated = cut = True
            break
        reply.lines.append(line)
    reply.lines.reverse()
    return cut


def _text(reply: Logs, note: str, *, empty: bool) -> str:
    meta = [
        f"total_results: {reply.total_results}",
        f"truncated: {'true' if reply.truncated else 'false'}" + note,
        f"sessions_queried: {json.dumps(reply.sessions_queried)}",
        f"sessions_not_found: {json.dumps(reply.sessions_not_found)}",
    ]
    if reply.time_range:
        meta.append(f"time_range: {reply.time_range}")
    if reply.known_sessions:
        meta.append("known sessions (newest first): " + ", ".join(reply.known_sessions))
    body = [
        f"{ln.time} [{ln.session}] {ln.stream}| {ln.text}"
        if ln.process
        else f"{ln.time} [{ln.session}] {ln.test or '(outside tests)'} {ln.stream}| {ln.text}"
        for ln in reply.lines
    ]
    if empty and not reply.sessions_not_found:
        body = ["(no lines matched)"]
    return "\n".join([*meta, "", *body])


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).isoformat(timespec="milliseconds")


def session_lines(
    store: Store,
    run_id: str,
    wanted: int,
    since: float | None,
    stream: str,
    finder: output_query.Finder | None,
    *,
    until: float | None = None,
) -> list[Entry]:
    """The newest ``wanted`` matching lines of a run (written between ``since`` and ``until``), from
    all its units, newest segments first."""
    db = store.db
    units = {u["id"]: u for u in output_query.units(db, run_id)}
    sql = (
        "SELECT unit_id, first, count, stream, stream_first, phase, ts, times, block, offset, length "
        "FROM segments WHERE run_id=?"
    )
    params: list[Any] = [run_id]
    if stream != "both":
        sql += " AND stream=?"
        params.append(stream)
    if since is not None:
        sql += " AND ts >= ?"
        params.append(since)
    if until is not None:
        sql += " AND ts <= ?"
        params.append(until)
    sql += " ORDER BY ts DESC, first DESC"
    found: list[Entry] = []
    for row in db.execute(sql, params):
        unit = units.get(row[0])
        if unit is None:
            continue
        seg = Segment(*row[1:])
        data = store.outputs.read(run_id, unit["id"], seg)
        texts = data.split(b"\n")
        times = seg.line_times()
        indexes = list(finder(data)) if finder is not None else range(len(texts))
        for index in reversed(list(indexes)):
            ts = times[index] if times is not None and index < len(times) else seg.ts
            if since is not None and ts < since:
                continue
            text = redact(texts[index].decode("utf-8", "replace")) if index < len(texts) else ""
            found.append((ts, unit["id"], seg.first + index, run_id, unit["unit"], seg.stream, text))
            if len(found) >= wanted:
                return found
    return found


def failure_entries(
    store: Store, run_id: str, since: float | None, finder: output_query.Finder | None
) -> list[Entry]:
    """A test run's failed phases as lines of its log, at the time each failed (stream "failure"),
    so a service's error and the test that saw it line up in one timeline."""
    found = []
    for problem in store.problems(run_id):
        if since is not None and problem["finished"] < since:
            continue
        kind = "FAILED" if problem["phase"] == "call" else "ERROR"
        text = f"{kind} {problem['nodeid']} ({problem['phase']}): {problem['message'] or '(no message)'}"
        if finder is not None and not any(True for _ in finder(text.encode())):
            continue
        found.append((problem["finished"], 1 << 30, 0, run_id, problem["nodeid"], "failure", text))
    return found


def logs_list(store: Store, limit: int | None = None) -> str:
    """Seed 003's ``logs/list`` as JSON: stored outputs per run, newest runs first, bounded."""
    runs = store.runs(limit)
    listed = []
    total_size = 0
    total_count = 0
    for run in runs:
        units = output_query.units(store.db, run["run_id"])
        total_count += len(units)
        size = sum(u["bytes_stored"] for u in units)
        total_size += size
        units.sort(key=lambda u: -u["lines"])
        listed.append(
            {
                "run_id": run["run_id"],
                "label": run["label"],
                "status": run["status"],
                "timestamp": _iso(run["started"]),
                "size": size,
                "outputs": [
                    {
                        "test": u["unit"] or None,
                        "totalLines": u["lines"],
                        "size": u["bytes_stored"],
                        "uri": uri(run["run_id"], u["unit"]),
                    }
                    for u in units[:20]
                ],
                "more_outputs": max(len(units) - 20, 0),
            }
        )
    text = json.dumps({"runs": listed, "totalCount": total_count, "totalSize": total_size}, indent=1)
    while len(text) > MAX_REPLY_CHARS and listed:
        listed.pop()
        text = json.dumps(
            {"runs": listed, "totalCount": total_count, "totalSize": total_size, "truncated": True}, indent=1
        )
    return text
