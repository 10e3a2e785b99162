"""`get_output`: a window of a test's stored output (the tail by default), and the tail shown in a
test's detail view."""

from __future__ import annotations

from typing import Any

from mcpdebug.names import COMBINED, PHASE_CHOICES, STREAM_CHOICES
from mcpdebug.replies import OutputWindow
from mcpdebug.store import Store, output_query
from mcpdebug.views.calls import call
from mcpdebug.views.output_window import (
    DEFAULT_WINDOW,
    Addr,
    bounded,
    check_choice,
    no_output,
    parse_time,
    render,
    resolve_unit,
    uri,
    what,
    where,
)


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
) -> OutputWindow:
    """``keep_end``: if the range does not fit in a reply, show its end rather than its start
    (always so without a range)."""
    check_choice(stream, STREAM_CHOICES, "stream")
    if phase is not None:
        check_choice(phase, PHASE_CHOICES, "phase")
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
    addr = Addr(run["run_id"], unit["unit"], stream, phase)
    described = what(view, run["label"] if run.get("kind") == "process" and unit["unit"] == "" else None)
    reply = OutputWindow(
        text="",
        run_id=run["run_id"],
        test=unit["unit"] or None,
        stream=stream,
        total=view.total,
        uri=uri(run["run_id"], unit["unit"]),
        path=str(store.outputs.path(run["run_id"], unit["id"])) if unit["id"] else None,
    )
    if view.total == 0 and start is None and end is None:
        reply.text = no_output(store, run, unit, view, described)
        return reply
    first, last = output_query.resolve_range(start, end, view.total)
    # a window counted from the end ("the last N lines") keeps its end when the reply limit cuts it
    tail = (
        keep_end or (start is None and end is None) or (start is not None and start < 0 and (end or -1) < 0)
    )
    rendered = render(view, first, last, line_numbers, keep_end=tail)
    shown_first, shown_last = rendered.first, rendered.last
    header = (
        f"Lines {shown_first}-{shown_last} of {view.total} ({described}):" if view.total else f"({described})"
    )
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
            reply.earlier = addr.call("get_output", start=before, end=shown_first - 1)
            footer.append(f"[Earlier lines: {reply.earlier}]")
        if shown_last < view.total:
            after = min(shown_last + DEFAULT_WINDOW, view.total)
            reply.later = addr.call("get_output", start=shown_last + 1, end=after)
            footer.append(f"[Later lines: {reply.later}]")
        footer.append(f"[Search it: {addr.call('search_output', pattern='...')}]")
    footer += where(store, run, unit)
    reply.first, reply.last = (shown_first, shown_last) if view.total else (None, None)
    reply.text = bounded("\n".join(parts + (["", *footer] if footer else [])))
    return reply


def output_tail(store: Store, run: dict[str, Any], nodeid: str, lines: int) -> str:
    """The last ``lines`` lines of a test's combined output, for a test's detail view."""
    unit = resolve_unit(store, run, nodeid)
    if not unit["lines"]:
        return "No captured output."
    if lines <= 0:
        return f"Captured output: {unit['lines']} lines: " + call(
            "get_output", run_id=run["run_id"], test=nodeid
        )
    text = get_output(store, run, nodeid, start=-min(lines, unit["lines"]), end=-1, keep_end=True).text
    return "--- captured output (stdout, stderr, log, warnings) ---\n" + text
