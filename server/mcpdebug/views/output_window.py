"""Rendering stored output into a bounded reply: which unit a caller means, how lines are shown,
and how a reply says what it left out (seed 003's truncation message).

Every reply is bounded (`MAX_REPLY_CHARS`) and says what it left out and how to get it: the exact
follow-up call, the resource URI and the file on disk.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from mcpdebug.names import COMBINED
from mcpdebug.store import Store, output_query
from mcpdebug.store.output_files import is_run_unit
from mcpdebug.store.output_query import ErrorType, Line, OutputError, View
from mcpdebug.views import lookup
from mcpdebug.views.calls import call
from pytest_mcpdebug.output.lines import cut_at

MAX_REPLY_CHARS: Final = 30_000
LINE_CHARS: Final = 4_000
"""Longest line shown in a reply; the whole line is in the file."""
DEFAULT_WINDOW: Final = 200
"""Lines shown when no range is given, and the size of an "earlier/later lines" window."""


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
            return empty_unit(key)
        return found
    row = lookup.test(store, run, test)
    found = output_query.unit(db, rid, row["nodeid"])
    return found if found is not None else empty_unit(row["nodeid"])


def empty_unit(key: str) -> dict[str, Any]:
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
            f"{what}={lookup.quoted(value)} is not a time; use an ISO timestamp (2026-11-21T10:30:00), "
            "seconds since the epoch, or an age such as 30s, 5m, 2h or 1d.",
        ) from None
    return parsed.timestamp()


def check_choice(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise OutputError(
            ErrorType.INVALID_ARGUMENT,
            f"{what}={lookup.quoted(value)} is not valid; use one of {', '.join(choices)}.",
        )
    return value


@dataclass
class Addr:
    """How to name this output in follow-up calls."""

    run_id: str
    key: str
    stream: str
    phase: str | None

    def call(self, name: str, **args: Any) -> str:
        test = None if self.key == "" else self.key
        stream = None if self.stream == COMBINED else self.stream
        return call(name, run_id=self.run_id, test=test, stream=stream, phase=self.phase, **args)


def what(view: View, session: str | None = None) -> str:
    """``session``: the label of a process session, whose output is its run's output outside tests."""
    unit = f"output of process session {session}" if session else describe_unit(view.unit["unit"])
    parts = [unit, f"run {view.run_id}"]
    parts.append("stdout, stderr, log and warnings interleaved" if view.stream == COMBINED else view.stream)
    if view.phase:
        parts.append(f"{view.phase} phase only")
    if view.since is not None or view.until is not None:
        parts.append("between " + ts_text(view.since) + " and " + ts_text(view.until))
    if view.narrowed:
        parts.append("line numbers are the whole output's")
    elif view.unit.get("dropped_lines"):
        parts.append(f"{view.unit['dropped_lines']} lines in the middle dropped: over max_test_output")
    return "; ".join(parts)


def ts_text(value: float | None) -> str:
    if value is None:
        return "any time"
    return dt.datetime.fromtimestamp(value).isoformat(timespec="milliseconds")


def where(store: Store, run: dict[str, Any], unit: dict[str, Any]) -> list[str]:
    lines = [f"[Access full output: {uri(run['run_id'], unit['unit'])}]"]
    if unit["id"]:
        lines.append(f"[On disk: {store.outputs.path(run['run_id'], unit['id'])}]")
    return lines


def no_output(store: Store, run: dict[str, Any], unit: dict[str, Any], view: View, described: str) -> str:
    rid = run["run_id"]
    if view.narrowed and unit["lines"]:
        return (
            f"No lines match these filters ({described}); the whole output has {unit['lines']} lines: "
            + call("get_output", run_id=rid, test=unit["unit"] or None)
        )
    others = [u for u in output_query.units(store.db, rid) if u["unit"] != unit["unit"]]
    others.sort(key=lambda u: -u["lines"])
    text = f"No output stored for {describe_unit(unit['unit'])} in run {rid}"
    text += f" on {view.stream}." if view.stream != COMBINED else "."
    if others:
        listing = "\n".join(f"  {u['unit'] or '(outside tests)'}: {u['lines']} lines" for u in others[:10])
        more = f"\n  ... and {len(others) - 10} more" if len(others) > 10 else ""
        text += f"\nOutput exists for:\n{listing}{more}\n"
        text += f"Next: {call('get_output', run_id=rid, test='<one of these>')}"
    else:
        text += " Nothing in this run wrote output (or it was captured with --capture=no)."
    return text


@dataclass
class Rendered:
    lines: list[str]
    first: int
    last: int
    cut: bool


def render(view: View, first: int, last: int, line_numbers: bool, *, keep_end: bool) -> Rendered:
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
                text = render_line(line, view, line_numbers)
                if size + len(text) + 1 > budget and kept:
                    kept.reverse()
                    return Rendered([t for _, t in kept], kept[0][0], last, True)
                kept.append((line.pos, text))
                size += len(text) + 1
            top = lo - 1
        kept.reverse()
        return Rendered([t for _, t in kept], first, last, False)
    out: list[str] = []
    shown_last = first - 1
    for line in view.lines(first, last):
        text = render_line(line, view, line_numbers)
        if size + len(text) + 1 > budget and out:
            return Rendered(out, first, shown_last, True)
        out.append(text)
        size += len(text) + 1
        shown_last = line.last
    return Rendered(out, first, last, False)


def render_line(line: Line, view: View, line_numbers: bool) -> str:
    if line.number is None:
        return line.gap_text()
    text = line.text
    if len(text) > LINE_CHARS:
        cut = cut_at(text)
        held = (
            f"the file holds its first {cut[0]:,} bytes ({cut[1]:,} more were dropped when it was recorded: "
            "max_line_length)"
            if cut
            else "the whole line is in the file"
        )
        text = f"{text[:LINE_CHARS]} [... +{len(text) - LINE_CHARS} characters; {held}]"
    if view.stream == COMBINED and line.stream != "stdout":
        text = f"[{line.stream}] {text}"
    return f"{line.number}: {text}" if line_numbers else text


def bounded(text: str) -> str:
    if len(text) <= MAX_REPLY_CHARS:
        return text
    return text[: MAX_REPLY_CHARS - 100] + "\n[... reply cut at 30,000 characters ...]"
