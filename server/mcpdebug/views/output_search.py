"""`search_output`: lines matching a regex in a test's output, or in every test of a run, each with
its context and the call for the next match (seed 003's search)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mcpdebug.names import COMBINED, STREAM_CHOICES
from mcpdebug.replies import Match, SearchResult
from mcpdebug.store import Store, output_query
from mcpdebug.store.output_query import ErrorType, Hit, OutputError
from mcpdebug.views.calls import call
from mcpdebug.views.lookup import quoted
from mcpdebug.views.output_window import (
    MAX_REPLY_CHARS,
    bounded,
    check_choice,
    describe_unit,
    render_line,
    resolve_unit,
    uri,
    where,
)


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
) -> SearchResult:
    _check(stream, context, max_results)
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
    total, hits = _find(store, rid, units, stream, finder, occurrence, occurrence + max_results - 1)
    flags = ", ignore_case=True" if ignore_case else ""
    reply = SearchResult(pattern=pattern, scope=scope, total=total, matches=[])
    dropped = sum(int(u.get("dropped_lines") or 0) for u in units)
    if total == 0:
        return _no_match(reply, rid, test, stream, ignore_case, dropped)
    if occurrence > total:
        raise OutputError(
            ErrorType.INVALID_OCCURRENCE,
            f"Invalid occurrence number: {occurrence}. {quoted(pattern)} has {total} occurrence"
            f"{'s' if total != 1 else ''} in {scope}: use occurrence=1 to {total}.",
        )
    plural = "s" if total != 1 else ""
    lines = [f'Search: "{pattern}" found {total} occurrence{plural} in {scope}{flags}']
    if dropped:
        lines[0] += f" ({dropped:,} dropped middle line{'s' if dropped != 1 else ''} could not be searched)"
    shown_last = occurrence + len(hits) - 1
    if len(hits) == 1:
        lines.append(f"Showing occurrence {occurrence} of {total} at line {hits[0].number}:")
    else:
        lines.append(f"Showing occurrences {occurrence}-{shown_last} of {total}:")
    _add_matches(reply, lines, hits, occurrence, context, with_test=test is None or len(hits) > 1)
    next_occurrence = occurrence + len(reply.matches)
    if next_occurrence <= total:
        reply.next_call = call(
            "search_output",
            pattern=pattern,
            run_id=rid,
            test=test,
            stream=None if stream == COMBINED else stream,
            context=context if context != 3 else None,
            occurrence=next_occurrence,
            ignore_case=True if ignore_case else None,
        )
        lines += ["", f"Use occurrence={next_occurrence} for next match: {reply.next_call}"]
    if test is not None and units[0]["id"]:
        lines.append(f"[Resource: {uri(rid, units[0]['unit'], 'search')}?q={quote(pattern, safe='')}]")
        lines += where(store, run, units[0])
    return reply.with_text(bounded("\n".join(lines)))


def _check(stream: str, context: int, max_results: int) -> None:
    check_choice(stream, STREAM_CHOICES, "stream")
    if context < 0 or context > 50:
        raise OutputError(ErrorType.INVALID_ARGUMENT, f"context={context} must be between 0 and 50 lines.")
    if max_results < 1:
        raise OutputError(ErrorType.INVALID_ARGUMENT, f"max_results={max_results} must be at least 1.")


def _no_match(
    reply: SearchResult, rid: str, test: str | None, stream: str, ignore_case: bool, dropped: int
) -> SearchResult:
    """The reply when nothing matches: what else to try, and which lines could not be searched."""
    reply.hint = (
        "Try a different pattern (a Python regex, matched against each line)"
        + (", ignore_case=True" if not ignore_case else "")
        + f", or read the output: {call('get_output', run_id=rid, test=test)}"
    )
    on = f" on {stream}" if stream != COMBINED else ""
    lost = (
        f" {dropped:,} line{'s' if dropped != 1 else ''} in the middle of the output were dropped "
        "when recorded (over max_test_output) and could not be searched."
        if dropped
        else ""
    )
    return reply.with_text(
        f"No lines match {quoted(reply.pattern)} in {reply.scope}{on}.{lost}\n{reply.hint}."
    )


def _add_matches(
    reply: SearchResult, lines: list[str], hits: list[Hit], occurrence: int, context: int, *, with_test: bool
) -> None:
    """The matches that fit in a reply, in ``reply.matches`` and as blocks of ``lines``."""
    budget = (MAX_REPLY_CHARS - 2_000) // 2  # the matches are in the text and again in the JSON
    size = sum(map(len, lines))
    for rank, hit in enumerate(hits, start=occurrence):
        match = _match(hit, rank, context)
        block = _hit_block(match, with_test)
        if size + len(block) > budget and reply.matches:
            break
        lines += ["", block]
        size += len(block) + 1
        reply.matches.append(match)


def _find(
    store: Store,
    rid: str,
    units: list[dict[str, Any]],
    stream: str,
    finder: output_query.Finder,
    first: int,
    last: int,
) -> tuple[int, list[Hit]]:
    """How many lines of ``units`` match, and the matches ranked ``first`` to ``last``."""
    total = 0
    hits: list[Hit] = []
    for unit in units:
        if not unit["id"]:
            continue
        view = output_query.build_view(store.outputs, store.db, rid, unit, stream=stream)
        count, found = output_query.search_view(view, finder, _ranks(total, first, last))
        total += count
        hits += found
    return total, hits


def _ranks(base: int, first: int, last: int) -> Callable[[int], bool]:
    """Which of a unit's hits to keep, given ``base`` hits in the units before it."""
    return lambda rank: first <= base + rank <= last


def _match(hit: Hit, rank: int, context: int) -> Match:
    view = hit.view
    lo = max(hit.pos - context, 1)
    hi = min(hit.pos + context, view.total)
    text, around = "", []
    for line in view.lines(lo, hi):
        rendered = render_line(line, view, True)
        if line.pos == hit.pos and line.number is not None:
            text = rendered
            around.append(f">>> {rendered} <<<")
        else:
            around.append(rendered)
    unit = view.unit["unit"]
    return Match(occurrence=rank, test=unit or None, line=hit.number, text=text, context=around)


def _hit_block(match: Match, name_test: bool) -> str:
    out = []
    if name_test:
        where = describe_unit(match.test or "")
        out.append(f"Occurrence {match.occurrence} at line {match.line} of {where}:")
    return "\n".join([*out, *match.context])
