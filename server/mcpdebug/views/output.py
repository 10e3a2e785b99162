"""Text replies about stored output, shared by the MCP tools, resources and the CLI.

Every reply is bounded (`MAX_REPLY_CHARS`) and says what it left out and how to get it: the exact
follow-up call, the resource URI and the file on disk (seed 003's truncation message).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from mcpdebug.store import Store, output_query
from mcpdebug.store.output_files import Segment, is_run_unit
from mcpdebug.store.output_query import COMBINED, ErrorType, Hit, Line, OutputError, View
from mcpdebug.views import lookup

MAX_REPLY_CHARS: Final = 30_000
MAX_LOG_LINES: Final = 10_000
"""Most lines `get_logs` collects per session (a reply shows far fewer; this bounds memory)."""
LINE_CHARS: Final = 4_000
"""Longest line shown in a reply; the whole line is in the file."""


# Addressing -----------------------------------------------------------------------------------------


def resolve_unit(store: Store, run: dict[str, Any], test: str | None) -> dict[str, Any]:
    """The output unit a caller names: a test (node id or a unique part), "" or "@gw0" for run-level."""
    rid = run["run_id"]
    db = store.db
    if test is None or test == "" or test.startswith("@"):
        key = test or ""
        found = output_query.unit(db, rid, key)
        if found is None and key == "":
            run_units = [u for u in output_query.units(db, rid) if is_run_unit(u["unit"])]
            found = run_units[0] if run_units else None
        if found is None:
            return _empty_unit(key)
        return found
    row = lookup.test(store, run, test)
    found = output_query.unit(db, rid, row["nodeid"])
    return found if found is not None else _empty_unit(row["nodeid"])


def _empty_unit(key: str) -> dict[str, Any]:
    return {"unit": key, "id": 0, "lines": 0, "stream_lines": {}, "dropped_lines": 0, "bytes_stored": 0}


def describe_unit(key: str) -> str:
    if key == "":
        return "output outside tests (collection, session fixtures, warnings)"
    if key.startswith("@"):
        return f"worker {key[1:]}'s output outside tests"
    return key


def uri(run_id: str, key: str, suffix: str = "output") -> str:
    if key == "":
        return f"mcpdebug://runs/{run_id}/{suffix}"
    return f"mcpdebug://runs/{run_id}/tests/{quote(key, safe='')}/{suffix}"


def _call(name: str, **args: Any) -> str:
    shown = ", ".join(
        f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in args.items() if v is not None
    )
    return f"{name}({shown})".replace("'", '"')


def parse_time(value: str | None, what: str, now: float | None = None) -> float | None:
    """An ISO timestamp, seconds since the epoch, or a relative age like 30s, 5m, 2h, 1d."""
    if value is None or value == "":
        return None
    now = time.time() if now is None else now
    text = value.strip()
    rel = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)", text)
    if rel:
        return now - float(rel.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[rel.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OutputError(
            ErrorType.INVALID_ARGUMENT,
            f"{what}={value!r} is not a time; use an ISO timestamp (2026-11-21T10:30:00), seconds since "
            "the epoch, or an age such as 30s, 5m, 2h or 1d.",
        ) from None
    return parsed.timestamp()


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise OutputError(
            ErrorType.INVALID_ARGUMENT, f"{what}={value!r} is not valid; use one of {', '.join(choices)}."
        )
    return value


# get_output -------------------------------------------------------------------------------------------


@dataclass
class _Addr:
    """How to name this output in follow-up calls."""

    run_id: str
    key: str
    stream: str
    phase: str | None

    def call(self, name: str, **args: Any) -> str:
        test = None if self.key == "" else self.key
        stream = None if self.stream == COMBINED else self.stream
        return _call(name, run_id=self.run_id, test=test, stream=stream, phase=self.phase, **args)


def get_output(
    store: Store,
    run: dict[str, Any],
    test: str | None = None,
    *,
    stream: str = COMBINED,
    phase: str | None = None,
    start: int | None = None,
    end: int | None = None,
    since: str | None = None,
    until: str | None = None,
    line_numbers: bool = True,
    keep_end: bool = False,
) -> str:
    """``keep_end``: if the range does not fit in a reply, show its end rather than its start
    (always so without a range)."""
    _check_choice(stream, output_query.STREAM_CHOICES, "stream")
    if phase is not None:
        _check_choice(phase, output_query.PHASE_CHOICES, "phase")
    unit = resolve_unit(store, run, test)
    view = output_query.build_view(
        store.outputs,
        store.db,
        run["run_id"],
        unit,
        stream=stream,
        phase=phase,
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
    )
    addr = _Addr(run["run_id"], unit["unit"], stream, phase)
    what = _what(view)
    if view.total == 0 and start is None and end is None:
        return _no_output(store, run, unit, view, what)
    first, last = output_query.resolve_range(start, end, view.total)
    # a window counted from the end ("the last N lines") keeps its end when the reply limit cuts it
    tail = (
        keep_end or (start is None and end is None) or (start is not None and start < 0 and (end or -1) < 0)
    )
    rendered = _render(view, first, last, line_numbers, keep_end=tail)
    shown_first, shown_last = rendered.first, rendered.last
    header = f"Lines {shown_first}-{shown_last} of {view.total} ({what}):" if view.total else f"({what})"
    parts = [header, "", *rendered.lines]
    footer: list[str] = []
    whole = shown_first == 1 and shown_last == view.total
    if not whole:
        shown = shown_last - shown_first + 1
        footer.append(
            f"[Output truncated: Showing {'last ' if shown_last == view.total else ''}{shown} of "
            f"{view.total} lines{' (reply size limit)' if rendered.cut else ''}]"
        )
        footer.append(f"[{view.total - shown} lines omitted]")
        if shown_first > 1:
            before = max(shown_first - DEFAULT_WINDOW, 1)
            footer.append(f"[Earlier lines: {addr.call('get_output', start=before, end=shown_first - 1)}]")
        if shown_last < view.total:
            after = min(shown_last + DEFAULT_WINDOW, view.total)
            footer.append(f"[Later lines: {addr.call('get_output', start=shown_last + 1, end=after)}]")
        footer.append(f"[Search it: {addr.call('search_output', pattern='...')}]")
    footer += _where(store, run, unit)
    return _bounded("\n".join(parts + (["", *footer] if footer else [])))


DEFAULT_WINDOW: Final = 200


def output_tail(store: Store, run: dict[str, Any], nodeid: str, lines: int) -> str:
    """The last ``lines`` lines of a test's combined output, for a test's detail view."""
    unit = resolve_unit(store, run, nodeid)
    if not unit["lines"]:
        return "No captured output."
    if lines <= 0:
        return f"Captured output: {unit['lines']} lines: " + _call(
            "get_output", run_id=run["run_id"], test=nodeid
        )
    text = get_output(store, run, nodeid, start=-min(lines, unit["lines"]), end=-1, keep_end=True)
    return "--- captured output (stdout, stderr, log, warnings) ---\n" + text


def _what(view: View) -> str:
    parts = [describe_unit(view.unit["unit"]), f"run {view.run_id}"]
    parts.append("stdout, stderr, log and warnings interleaved" if view.stream == COMBINED else view.stream)
    if view.phase:
        parts.append(f"{view.phase} phase only")
    if view.since is not None or view.until is not None:
        parts.append("between " + _ts(view.since) + " and " + _ts(view.until))
    if view.narrowed:
        parts.append("line numbers are the whole output's")
    elif view.unit.get("dropped_lines"):
        parts.append(f"{view.unit['dropped_lines']} lines in the middle dropped: over max_test_output")
    return "; ".join(parts)


def _ts(value: float | None) -> str:
    if value is None:
        return "any time"
    return dt.datetime.fromtimestamp(value).isoformat(timespec="milliseconds")


def _where(store: Store, run: dict[str, Any], unit: dict[str, Any]) -> list[str]:
    lines = [f"[Access full output: {uri(run['run_id'], unit['unit'])}]"]
    if unit["id"]:
        lines.append(f"[On disk: {store.outputs.path(run['run_id'], unit['id'])}]")
    return lines


def _no_output(store: Store, run: dict[str, Any], unit: dict[str, Any], view: View, what: str) -> str:
    rid = run["run_id"]
    if view.narrowed and unit["lines"]:
        return f"No lines match these filters ({what}); the whole output has {unit['lines']} lines: " + _call(
            "get_output", run_id=rid, test=unit["unit"] or None
        )
    others = [u for u in output_query.units(store.db, rid) if u["unit"] != unit["unit"]]
    others.sort(key=lambda u: -u["lines"])
    text = f"No output stored for {describe_unit(unit['unit'])} in run {rid}"
    text += f" on {view.stream}." if view.stream != COMBINED else "."
    if others:
        listing = "\n".join(f"  {u['unit'] or '(outside tests)'}: {u['lines']} lines" for u in others[:10])
        more = f"\n  ... and {len(others) - 10} more" if len(others) > 10 else ""
        text += f"\nOutput exists for:\n{listing}{more}\n"
        text += f"Next: {_call('get_output', run_id=rid, test='<one of these>')}"
    else:
        text += " Nothing in this run wrote output (or it was captured with --capture=no)."
    return text


@dataclass
class _Rendered:
    lines: list[str]
    first: int
    last: int
    cut: bool


def _render(view: View, first: int, last: int, line_numbers: bool, *, keep_end: bool) -> _Rendered:
    """Positions first..last as text, shrunk from the far side to fit the reply budget.

    A tail is read backwards a window at a time, so showing the end of a huge output reads only
    what is shown.
    """
    budget = MAX_REPLY_CHARS - 2_500
    size = 0
    if keep_end:
        kept: list[tuple[int, str]] = []
        top = last
        while top >= first:
            lo = max(first, top - DEFAULT_WINDOW + 1)
            for line in reversed(list(view.lines(lo, top))):
                text = _line(line, view, line_numbers)
                if size + len(text) + 1 > budget and kept:
                    kept.reverse()
                    return _Rendered([t for _, t in kept], kept[0][0], last, True)
                kept.append((line.pos, text))
                size += len(text) + 1
            top = lo - 1
        kept.reverse()
        return _Rendered([t for _, t in kept], first, last, False)
    out: list[str] = []
    shown_last = first - 1
    for line in view.lines(first, last):
        text = _line(line, view, line_numbers)
        if size + len(text) + 1 > budget and out:
            return _Rendered(out, first, shown_last, True)
        out.append(text)
        size += len(text) + 1
        shown_last = line.last
    return _Rendered(out, first, last, False)


def _line(line: Line, view: View, line_numbers: bool) -> str:
    if line.number is None:
        return line.gap_text()
    text = line.text
    if len(text) > LINE_CHARS:
        text = (
            f"{text[:LINE_CHARS]} [... +{len(text) - LINE_CHARS} characters; the whole line is in the file]"
        )
    if view.stream == COMBINED and line.stream != "stdout":
        text = f"[{line.stream}] {text}"
    return f"{line.number}: {text}" if line_numbers else text


def _bounded(text: str) -> str:
    if len(text) <= MAX_REPLY_CHARS:
        return text
    return text[: MAX_REPLY_CHARS - 100] + "\n[... reply cut at 30,000 characters ...]"


# search_output --------------------------------------------------------------------------------------


def search_output(
    store: Store,
    run: dict[str, Any],
    pattern: str,
    test: str | None = None,
    *,
    stream: str = COMBINED,
    context: int = 3,
    occurrence: int = 1,
    ignore_case: bool = False,
    max_results: int = 20,
) -> str:
    _check_choice(stream, output_query.STREAM_CHOICES, "stream")
    if context < 0 or context > 50:
        raise OutputError(ErrorType.INVALID_ARGUMENT, f"context={context} must be between 0 and 50 lines.")
    if max_results < 1:
        raise OutputError(ErrorType.INVALID_ARGUMENT, f"max_results={max_results} must be at least 1.")
    max_results = min(max_results, 1000)  # more could never fit in one reply
    finder = output_query.compile_search(pattern, ignore_case)
    rid = run["run_id"]
    if test is None:
        units = output_query.units(store.db, rid)
        scope = f"all output of run {rid} ({len(units)} test{'s' if len(units) != 1 else ''} with output)"
    else:
        units = [resolve_unit(store, run, test)]
        scope = describe_unit(units[0]["unit"]) + f" (run {rid})"
    if occurrence < 1:
        raise OutputError(
            ErrorType.INVALID_OCCURRENCE,
            f"Invalid occurrence number: {occurrence}. Occurrences are numbered from 1.",
        )
    last_wanted = occurrence + max_results - 1
    total = 0
    hits: list[Hit] = []
    for unit in units:
        if not unit["id"]:
            continue
        view = output_query.build_view(store.outputs, store.db, rid, unit, stream=stream)
        count, found = output_query.search_view(view, finder, _ranks(total, occurrence, last_wanted))
        total += count
        hits += found
    flags = ", ignore_case=True" if ignore_case else ""
    if total == 0:
        raise OutputError(
            ErrorType.NO_MATCHES,
            f"No matches found for search pattern: {pattern!r} in {scope}"
            f"{' on ' + stream if stream != COMBINED else ''}."
            "\n\nTry:\n  - a different pattern (a Python regex, matched against each line)\n"
            + ("  - ignore_case=True\n" if not ignore_case else "")
            + f"  - reading the output: {_call('get_output', run_id=rid, test=test)}",
        )
    if occurrence > total:
        raise OutputError(
            ErrorType.INVALID_OCCURRENCE,
            f"Invalid occurrence number: {occurrence}. {pattern!r} has {total} occurrence"
            f"{'s' if total != 1 else ''} in {scope}: use occurrence=1 to {total}.",
        )
    plural = "s" if total != 1 else ""
    lines = [f'Search: "{pattern}" found {total} occurrence{plural} in {scope}{flags}']
    shown_last = occurrence + len(hits) - 1
    if len(hits) == 1:
        lines.append(f"Showing occurrence {occurrence} of {total} at line {hits[0].number}:")
    else:
        lines.append(f"Showing occurrences {occurrence}-{shown_last} of {total}:")
    budget = MAX_REPLY_CHARS - 2_000
    size = sum(map(len, lines))
    shown = 0
    for rank, hit in enumerate(hits, start=occurrence):
        block = _hit_block(hit, rank, context, test is None or len(hits) > 1)
        if size + len(block) > budget and shown:
            break
        lines += ["", block]
        size += len(block) + 1
        shown += 1
    next_occurrence = occurrence + shown
    if next_occurrence <= total:
        test_arg = test
        lines += [
            "",
            f"Use occurrence={next_occurrence} for next match: "
            + _call(
                "search_output",
                pattern=pattern,
                run_id=rid,
                test=test_arg,
                stream=None if stream == COMBINED else stream,
                context=context if context != 3 else None,
                occurrence=next_occurrence,
                ignore_case=True if ignore_case else None,
            ),
        ]
    if test is not None and units[0]["id"]:
        lines.append(f"[Resource: {uri(rid, units[0]['unit'], 'search')}?q={quote(pattern, safe='')}]")
        lines += _where(store, run, units[0])
    return _bounded("\n".join(lines))


def _ranks(base: int, first: int, last: int) -> Callable[[int], bool]:
    """Which of a unit's hits to keep, given ``base`` hits in the units before it."""
    return lambda rank: first <= base + rank <= last


def _hit_block(hit: Hit, rank: int, context: int, name_test: bool) -> str:
    view = hit.view
    lo = max(hit.pos - context, 1)
    hi = min(hit.pos + context, view.total)
    out = []
    if name_test:
        out.append(f"Occurrence {rank} at line {hit.number} of {describe_unit(view.unit['unit'])}:")
    for line in view.lines(lo, hi):
        text = _line(line, view, True)
        out.append(f">>> {text} <<<" if line.pos == hit.pos and line.number is not None else text)
    return "\n".join(out)


# get_logs -------------------------------------------------------------------------------------------


def get_logs(
    store: Store,
    labels: list[str],
    *,
    lines: int = 100,
    since: str | None = None,
    stream: str = "both",
    pattern: str | None = None,
    max_results: int = 1000,
) -> str:
    """Seed 004's multi-session query: the last ``lines`` lines of each session, merged by time."""
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
    lines, max_results = min(lines, MAX_LOG_LINES), min(max_results, MAX_LOG_LINES)
    start_time = parse_time(since, "since")
    finder = output_query.compile_search(pattern) if pattern else None
    queried: list[str] = []
    missing: list[str] = []
    entries: list[
        tuple[float, int, int, str, str, str, str]
    ] = []  # ts, unit, line, session, test, stream, text
    for label in labels:
        run_id = _resolve_label(store, label)
        if run_id is None:
            missing.append(label)
            continue
        queried.append(label)
        entries += _session_lines(store, run_id, lines, start_time, stream, finder)
    entries.sort(key=lambda e: e[:3])  # time, then unit and line: a batch shares one timestamp
    total = len(entries)
    truncated = total > max_results
    entries = entries[-max_results:]
    meta = [
        f"total_results: {total}",
        f"truncated: {'true' if truncated else 'false'}"
        + (f" (kept the newest {max_results})" if truncated else ""),
        f"sessions_queried: {json.dumps(queried)}",
        f"sessions_not_found: {json.dumps(missing)}",
    ]
    if entries:
        meta.append(f"time_range: oldest {_iso(entries[0][0])}, newest {_iso(entries[-1][0])}")
    if missing:
        meta.append("known sessions (newest first): " + ", ".join(store.run_ids(10)))
    body = [
        f"{_iso(ts)} [{session}] {test or '(outside tests)'} {st}| {text}"
        for ts, _, _, session, test, st, text in entries
    ]
    budget = MAX_REPLY_CHARS - sum(map(len, meta)) - 500
    kept: list[str] = []
    size = 0
    for line in reversed(body):
        line = line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " [...]"
        if size + len(line) + 1 > budget:
            meta[1] = (
                f"truncated: true (reply size limit: showing the newest {len(kept)} of {total}; "
                "narrow with since= or pattern=)"
            )
            break
        kept.append(line)
        size += len(line) + 1
    kept.reverse()
    if not entries and not missing:
        kept = ["(no lines matched)"]
    return "\n".join([*meta, "", *kept])


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).isoformat(timespec="milliseconds")


def _resolve_label(store: Store, label: str) -> str | None:
    run_id = store.resolve_run(label)
    if run_id is not None:
        return run_id
    row = store.db.execute(
        "SELECT run_id FROM runs WHERE label=? ORDER BY started DESC LIMIT 1", (label,)
    ).fetchone()
    return row[0] if row else None


def _session_lines(
    store: Store,
    run_id: str,
    wanted: int,
    since: float | None,
    stream: str,
    finder: output_query.Finder | None,
) -> list[tuple[float, int, int, str, str, str, str]]:
    """The newest ``wanted`` matching lines of a run, from all its units, newest segments first."""
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
    sql += " ORDER BY ts DESC, first DESC"
    found: list[tuple[float, int, int, str, str, str, str]] = []
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
            text = texts[index].decode("utf-8", "replace") if index < len(texts) else ""
            found.append((ts, unit["id"], seg.first + index, run_id, unit["unit"], seg.stream, text))
            if len(found) >= wanted:
                return found
    return found


# Resources -------------------------------------------------------------------------------------------


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
