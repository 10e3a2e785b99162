"""`search_output`: lines matching a regex in a test's output, or in every test of a run, each with
its context and the call for the next match (seed 003's search)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mcpdebug.store import Store, output_query
from mcpdebug.store.output_query import COMBINED, ErrorType, Hit, OutputError
from mcpdebug.views.output_window import (
    MAX_REPLY_CHARS,
    bounded,
    call,
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
) -> str:
    check_choice(stream, output_query.STREAM_CHOICES, "stream")
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
    total, hits = _find(store, rid, units, stream, finder, occurrence, occurrence + max_results - 1)
    flags = ", ignore_case=True" if ignore_case else ""
    dropped = sum(int(u.get("dropped_lines") or 0) for u in units)
    if total == 0:
        raise OutputError(
            ErrorType.NO_MATCHES,
            f"No matches found for search pattern: {pattern!r} in {scope}"
            f"{' on ' + stream if stream != COMBINED else ''}."
            + (
                f" {dropped:,} line{'s' if dropped != 1 else ''} in the middle of the output were dropped "
                "when recorded (over max_test_output) and could not be searched."
                if dropped
                else ""
            )
            + "\n\nTry:\n  - a different pattern (a Python regex, matched against each line)\n"
            + ("  - ignore_case=True\n" if not ignore_case else "")
            + f"  - reading the output: {call('get_output', run_id=rid, test=test)}",
        )
    if occurrence > total:
        raise OutputError(
            ErrorType.INVALID_OCCURRENCE,
            f"Invalid occurrence number: {occurrence}. {pattern!r} has {total} occurrence"
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
        lines += [
            "",
            f"Use occurrence={next_occurrence} for next match: "
            + call(
                "search_output",
                pattern=pattern,
                run_id=rid,
                test=test,
                stream=None if stream == COMBINED else stream,
                context=context if context != 3 else None,
                occurrence=next_occurrence,
                ignore_case=True if ignore_case else None,
            ),
        ]
    if test is not None and units[0]["id"]:
        lines.append(f"[Resource: {uri(rid, units[0]['unit'], 'search')}?q={quote(pattern, safe='')}]")
        lines += where(store, run, units[0])
    return bounded("\n".join(lines))


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


def _hit_block(hit: Hit, rank: int, context: int, name_test: bool) -> str:
    view = hit.view
    lo = max(hit.pos - context, 1)
    hi = min(hit.pos + context, view.total)
    out = []
    if name_test:
        out.append(f"Occurrence {rank} at line {hit.number} of {describe_unit(view.unit['unit'])}:")
    for line in view.lines(lo, hi):
        text = render_line(line, view, True)
        out.append(f">>> {text} <<<" if line.pos == hit.pos and line.number is not None else text)
    return "\n".join(out)
