"""Queries over stored output: views, line ranges, regex search, and time-ordered logs.

Semantics follow seed 003: lines are 1-based, negative numbers count from the end (-1 is the last
line), ``start > end`` or a range outside the output is an error that says what is valid; a search
counts *lines* that match (a Python regex, applied to each line on its own), and ``occurrence``
picks which one to show.

A *view* is a unit's output narrowed to a stream, a phase and a time window. Unnarrowed, its
positions are the line numbers themselves (so a gap left by dropped lines stays a gap); narrowed,
positions count the lines that are in it, and each line still shows its own number.
"""

from __future__ import annotations

import bisect
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

import regex

from mcpdebug.names import COMBINED
from mcpdebug.store.output_files import Outputs, Segment, row_dict
from pytest_mcpdebug.redaction import redact

_REGEX_SPECIALS = frozenset(".^$*+?{}[]\\|()")
_NON_ASCII_FOLDS = frozenset("iks")
"""ASCII letters that Python's case-insensitive regexes also match to non-ASCII ones (İ ı K ſ)."""
_SEES_PAST_LINE = ("\\A", "\\Z", "\\z", "(?=", "(?!", "(?<=", "(?<!")
"""Anchors and lookarounds: whether they match depends on what is before or after the line."""
SEARCH_SECONDS: Final = 0.25
"""Matching time one regex call (a block of lines) may take, in CPU seconds as `regex` counts it.
Scanning even a large block takes milliseconds; a pattern that backtracks catastrophically blows
this on its first line, so its reply comes back within a second even on a busy machine, with an
error that says why."""


class ErrorType(Enum):
    LOG_NOT_FOUND = "not found"
    INVALID_RANGE = "invalid range"
    INVALID_SEARCH = "invalid regex"
    NO_MATCHES = "no matches"
    INVALID_OCCURRENCE = "invalid occurrence"
    INVALID_ARGUMENT = "invalid argument"
    SEARCH_TIMEOUT = "search too slow"


class OutputError(ValueError):
    """A query that cannot be answered; the message says what is valid instead."""

    def __init__(self, kind: ErrorType, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Span:
    """Lines ``lo`` to ``hi`` (0-based, end exclusive) of a segment, at view position ``pos``."""

    seg: Segment
    lo: int
    hi: int
    pos: int

    @property
    def end(self) -> int:
        return self.pos + self.hi - self.lo


@dataclass
class View:
    run_id: str
    unit: dict[str, Any]
    stream: str
    phase: str | None
    since: float | None
    until: float | None
    spans: list[Span]
    total: int
    """Positions run from 1 to ``total``."""
    narrowed: bool
    outputs: Outputs
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._starts = [s.pos for s in self.spans]

    @property
    def by_stream(self) -> bool:
        return self.stream != COMBINED

    def number(self, span: Span, index: int) -> int:
        """The line number shown for line ``index`` of ``span``'s segment."""
        seg = span.seg
        return (seg.stream_first if self.by_stream else seg.first) + index

    @property
    def stored(self) -> int:
        return sum(s.hi - s.lo for s in self.spans)

    def lines(self, start: int, end: int) -> Iterator[Line]:
        """Positions start..end in order; a run of positions with no stored lines is one gap `Line`."""
        if start > end:
            return
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        expected = start
        for span in self.spans[i:]:
            if span.pos > end:
                break
            if span.end <= start:
                continue
            if span.pos > expected:
                yield Line(expected, span.pos - 1, None, "", "")
            data = self.outputs.read(self.run_id, self.unit["id"], span.seg)
            texts = data.split(b"\n")
            lo = span.lo + max(start - span.pos, 0)
            hi = span.lo + min(end - span.pos + 1, span.hi - span.lo)
            for index in range(lo, hi):  # as every line shown: without secrets
                text = redact(texts[index].decode("utf-8", "replace")) if index < len(texts) else ""
                pos = span.pos + index - span.lo
                yield Line(pos, pos, self.number(span, index), span.seg.stream, text)
            expected = span.pos + (hi - span.lo)
        if expected <= end and not self.narrowed:
            yield Line(expected, end, None, "", "")


@dataclass(frozen=True)
class Line:
    """One stored line at view position ``pos``, or (``number`` None) a gap of ``pos``..``last``."""

    pos: int
    last: int
    number: int | None
    stream: str
    text: str

    def gap_text(self) -> str:
        n = self.last - self.pos + 1
        return (
            f"[... {n} line{'s' if n != 1 else ''} ({self.pos}-{self.last}) not stored: the test wrote more "
            "than max_test_output; its first and last parts are kept ...]"
        )


def build_view(
    outputs: Outputs,
    db: sqlite3.Connection,
    run_id: str,
    unit: dict[str, Any],
    *,
    stream: str = COMBINED,
    phase: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> View:
    by_stream = stream != COMBINED
    segments = outputs.segments(db, run_id, unit["id"], stream if by_stream else None)
    narrowed = phase is not None or since is not None or until is not None
    spans: list[Span] = []
    if not narrowed:
        for seg in segments:
            spans.append(Span(seg, 0, seg.count, seg.stream_first if by_stream else seg.first))
        total = unit["stream_lines"].get(stream, 0) if by_stream else unit["lines"]
        if spans:
            total = max(total, spans[-1].end - 1)
    else:
        position = 1
        for seg in segments:
            if phase is not None and seg.phase != phase:
                continue
            lo, hi = _time_window(seg, since, until)
            if lo < hi:
                spans.append(Span(seg, lo, hi, position))
                position += hi - lo
        total = position - 1
    return View(run_id, unit, stream, phase, since, until, spans, total, narrowed, outputs)


def _time_window(seg: Segment, since: float | None, until: float | None) -> tuple[int, int]:
    times = seg.line_times()
    if times is None:
        inside = (since is None or seg.ts >= since) and (until is None or seg.ts <= until)
        return (0, seg.count) if inside else (0, 0)
    lo = 0 if since is None else bisect.bisect_left(times, since)
    hi = seg.count if until is None else bisect.bisect_right(times, until)
    return lo, max(lo, hi)


# Ranges -------------------------------------------------------------------------------------------


DEFAULT_TAIL: Final = 200


def resolve_range(start: int | None, end: int | None, total: int) -> tuple[int, int]:
    """1-based inclusive positions from seed 003's range arguments; raises `OutputError`."""
    if start is None and end is None:
        return max(total - DEFAULT_TAIL + 1, 1), total
    if total == 0:
        raise OutputError(ErrorType.INVALID_RANGE, "Invalid line range: this output is empty (0 lines).")
    first = 1 if start is None else (total + start + 1 if start < 0 else start)
    last = total if end is None else (total + end + 1 if end < 0 else end)
    asked = f"start={start}, end={end}"
    if start == 0 or end == 0:
        problem = "line numbers start at 1 (0 is not a line; -1 is the last line)"
    elif first < 1 or last > total or first > total or last < 1:
        problem = f"{asked} is outside lines 1-{total}"
    elif first > last:
        problem = f"start must be <= end ({asked} means lines {first} to {last})"
    else:
        return first, last
    raise OutputError(
        ErrorType.INVALID_RANGE,
        f"Invalid line range: {problem}.\n\nThis output has {total} lines. Valid range formats:\n"
        "  - Positive: start=1, end=100\n  - Negative: start=-50, end=-1 (the last 50 lines)\n"
        "  - Mixed: start=10, end=-10",
    )


# Search -------------------------------------------------------------------------------------------


Finder = Callable[[bytes], Iterator[int]]
"""Yields the 0-based indexes of a block's lines that match."""


def compile_search(pattern: str, ignore_case: bool = False, budget: float = SEARCH_SECONDS) -> Finder:
    """A finder for ``pattern``: literal text is found with bytes search (linear), anything else with
    the `regex` module, which takes Python's syntax and a time limit: a call that spends ``budget``
    seconds matching stops the search with an error that says why. Matching releases the GIL
    (``concurrent``), so other calls go on meanwhile."""
    if not pattern:
        raise OutputError(ErrorType.INVALID_SEARCH, "Invalid search: the pattern is empty.")
    try:
        compiled = regex.compile(pattern, regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0))
    except regex.error as exc:
        raise OutputError(
            ErrorType.INVALID_SEARCH,
            f"Invalid regular expression {_quoted(pattern)}: {exc}. Patterns are Python regexes; escape "
            "special characters with a backslash to search for them literally "
            f"(e.g. {_quoted(re.escape(pattern))}).",
        ) from None

    def first(hay: str, pos: int = 0) -> Any:
        try:
            return compiled.search(hay, pos, timeout=budget, concurrent=True)
        except TimeoutError:
            raise OutputError(
                ErrorType.SEARCH_TIMEOUT,
                f"The pattern {_quoted(pattern)} was stopped after {budget:g} s of matching: it backtracks "
                "catastrophically (nested or overlapping repeats such as (a+)+ or (a|aa)+ try exponentially "
                "many ways on a line that almost matches). Make the repeated parts unable to match the "
                "same text, or search for a literal part of it.",
            ) from None

    def finder(data: bytes) -> Iterator[int]:
        text = data.decode("utf-8", "replace")

        def search(hay: str, pos: int) -> tuple[int, int] | None:
            m = first(hay, pos)
            return (m.start(), m.end()) if m else None

        return _matching_lines(text, "\n", search, first)

    literal = not (_REGEX_SPECIALS & set(pattern))
    if literal and "\n" in pattern:
        return lambda data: iter(())
    if literal and not ignore_case:
        needle = pattern.encode()
        return lambda data: _matching_lines(data, b"\n", lambda hay, pos: _find(hay, needle, pos))
    if literal and pattern.isascii():
        lowered = pattern.lower().encode()
        # bytes.lower() folds ASCII only; regexes also fold the Kelvin sign, the long s and the dotted
        # and dotless i onto k, s and i, so a block with other characters goes through the regex.
        folds = not _NON_ASCII_FOLDS.isdisjoint(lowered.decode())

        def ascii_finder(data: bytes) -> Iterator[int]:
            if folds and not data.isascii():
                return finder(data)
            return _matching_lines(data.lower(), b"\n", lambda hay, pos: _find(hay, lowered, pos))

        return ascii_finder
    if any(token in pattern for token in _SEES_PAST_LINE):
        # Searched across a block, these would see a neighbouring line's newline where the line
        # starts or ends; each line is searched on its own instead (slower, but exact).
        return lambda data: (
            i for i, line in enumerate(data.decode("utf-8", "replace").split("\n")) if first(line)
        )
    return finder


def _quoted(text: str, limit: int = 200) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown) - limit} more characters)"


def _find(hay: bytes, needle: bytes, pos: int) -> tuple[int, int] | None:
    at = hay.find(needle, pos)
    return None if at < 0 else (at, at + len(needle))


def _matching_lines(
    hay: Any,
    nl: Any,
    search: Callable[[Any, int], tuple[int, int] | None],
    recheck: Callable[[str], Any] | None = None,
) -> Iterator[int]:
    """Lines of ``hay`` with a match, each once; a match spanning lines is checked on its line alone."""
    size = len(hay)
    pos = line = counted = 0
    while pos <= size:
        found = search(hay, pos)
        if found is None:
            return
        begin, finish = found
        line += hay.count(nl, counted, begin)
        line_start = hay.rfind(nl, 0, begin) + 1
        line_end = hay.find(nl, begin)
        if line_end < 0:
            line_end = size
        if finish <= line_end or (recheck is not None and recheck(hay[line_start:line_end])):
            yield line
        line += 1
        pos = counted = line_end + 1


@dataclass(frozen=True)
class Hit:
    view: View
    pos: int
    number: int


def search_view(view: View, finder: Finder, want: Callable[[int], bool]) -> tuple[int, list[Hit]]:
    """Count every matching line of ``view``; keep the hits whose 1-based rank ``want`` accepts."""
    total = 0
    kept: list[Hit] = []
    for span in view.spans:
        data = view.outputs.read(view.run_id, view.unit["id"], span.seg)
        for index in finder(data):
            if not span.lo <= index < span.hi:
                continue
            total += 1
            if want(total):
                kept.append(Hit(view, span.pos + index - span.lo, view.number(span, index)))
    return total, kept


def units(db: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """The run's output units in the order they started writing."""
    rows = db.execute("SELECT * FROM outputs WHERE run_id=? ORDER BY first_ts, id", (run_id,))
    return [row_dict(r) for r in rows]


def unit(db: sqlite3.Connection, run_id: str, key: str) -> dict[str, Any] | None:
    row = db.execute("SELECT * FROM outputs WHERE run_id=? AND unit=?", (run_id, key)).fetchone()
    return row_dict(row) if row else None
