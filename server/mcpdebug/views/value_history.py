"""`get_history` and `trace_test`'s reply: how a traced test's values got their state.

Without a name: the failing line's operands, each traced back to where it was set and, through the
functions whose returns produced it, to the lines that computed it. With a name: every assignment of
that name, old -> new, with the call that produced each value.
"""

from __future__ import annotations

import linecache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpdebug.replies.diagnosis import TraceReply, ValueChange, ValueHistoryReply
from mcpdebug.views.calls import call
from mcpdebug.views.lookup import LISTED, NotFound, quoted
from mcpdebug.views.runs import bound
from mcpdebug.views.suspects import relative
from pytest_mcpdebug.diagnosis.values import Change, Link, ValueHistory
from pytest_mcpdebug.operands import names_at

if TYPE_CHECKING:
    from mcpdebug.store import Store

MAX_CHANGES = 60
"""Assignments of one name listed: the first and the last, with the count of those between."""


def find_trace(store: Store, test: str, run_id: str | None) -> dict[str, Any]:
    """The trace of a test (exact node id or a unique part of one): in ``run_id``, else the newest."""
    wanted = None if run_id in (None, "", "latest") else store.resolve_run(run_id) or run_id
    found = store.trace(wanted, test)
    if found is None:
        matches = store.traced_tests(test)
        if len(matches) > 1:
            named = [m for m in matches if m.endswith("::" + test) or m.split("::")[-1].split("[")[0] == test]
            matches = named if len(named) == 1 else matches
        if len(matches) == 1:
            found = store.trace(wanted, matches[0])
        elif matches:
            listing = "\n".join(f"  {m}" for m in matches[:LISTED])
            raise NotFound(f"{quoted(test)} matches several traced tests; give one of:\n{listing}")
    if found is None:
        where = f" in run {wanted}" if wanted else ""
        raise NotFound(
            f"No value trace of {quoted(test)}{where}. Call "
            f"{call('trace_test', test=test if len(test) <= 200 else '...')} first: it re-runs the test "
            "recording how its values change."
        )
    return found


def history(store: Store, found: dict[str, Any], name: str | None) -> ValueHistoryReply:
    trace = found["trace"]
    values = ValueHistory(trace)
    root = _root(store, found["run_id"])
    failure = values.failure()
    failing_line = f"{relative(failure.frame.file, root)}:{failure.line}" if failure else None
    head = _headline(found, trace, root)
    if name:
        changes = values.of_name(name)
        if not changes:
            known = ", ".join(values.names()[:40]) or "(none)"
            raise NotFound(
                f"{quoted(name)} never changed in the traced code of {found['nodeid']}. "
                f"Names that did: {known}"
            )
        rows = [_change(c, values, root) for c in changes]
        text = [head, f"{name}: {len(changes)} assignment(s), first first:"]
        shown = (
            rows if len(rows) <= MAX_CHANGES else rows[: MAX_CHANGES // 3] + rows[-(MAX_CHANGES * 2 // 3) :]
        )
        for i, row in enumerate(shown):
            if len(rows) > MAX_CHANGES and i == MAX_CHANGES // 3:
                text.append(f"  ... {len(rows) - len(shown)} more assignments ...")
            text.append(_change_text(row))
        last = changes[-1]
        chain = values.explain(last.frame, last.line, [name], last.index, names_at)
        if chain and (chain[0].origin is not None or len(chain) > 1):
            text.append("Where its last value came from:")
            text += [_link_text(link, root) for link in chain]
        reply_rows = rows[-MAX_CHANGES:] + [_link_change(link, root) for link in chain]
    else:
        text, reply_rows = _failing(values, root, head)
    return ValueHistoryReply(
        text=bound("\n".join(text)),
        run_id=found["run_id"],
        test=found["nodeid"],
        name=name,
        failing_line=failing_line,
        changes=reply_rows,
        outcome=found["outcome"],
    )


def _failing(values: ValueHistory, root: str, head: str) -> tuple[list[str], list[ValueChange]]:
    failure = values.failure()
    if failure is None:
        names = ", ".join(values.names()[:40]) or "(none)"
        return [head, f"The traced test raised nothing; get_history(name=...) takes one of: {names}"], []
    where = f"{relative(failure.frame.file, root)}:{failure.line}"
    source = linecache.getline(failure.frame.file, failure.line).strip()
    text = [head, f"Failing line: {where} in {failure.frame.function}: {source}", f"  {failure.message}"]
    operands = names_at(failure.frame.file, failure.line)
    links = values.explain(failure.frame, failure.line, operands, failure.index, names_at)
    if not links:
        text.append("None of its operands was set in traced code (constants, globals or library values).")
    text += [_link_text(link, root) for link in links]
    deeper = values.raised_at(failure)
    if deeper is not None:
        where = f"{relative(deeper.frame.file, root)}:{deeper.line}"
        source = linecache.getline(deeper.frame.file, deeper.line).strip()
        text.append(f"Raised at {where} in {deeper.frame.function}: {source}")
        operands = names_at(deeper.frame.file, deeper.line)
        more = values.explain(deeper.frame, deeper.line, operands, deeper.index, names_at)
        text += [_link_text(link, root) for link in more]
        links += more
    names = ", ".join(values.names()[:30])
    text.append(
        f"get_history(test=..., name=...) lists every assignment of a name; names that changed: {names}"
    )
    return text, [_link_change(link, root) for link in links]


def _headline(found: dict[str, Any], trace: Any, root: str) -> str:
    kept = f"{len(trace.steps)} steps kept" + (
        f" (first {trace.head} and last {len(trace.steps) - trace.head}; {trace.dropped} between left out)"
        if trace.dropped
        else ""
    )
    line = (
        f"Value trace of {found['nodeid']} in run {found['run_id']} ({found['outcome']}; {trace.backend}, "
        f"{trace.lines} lines of traced code, {kept})."
    )
    if trace.error:
        line += f" Note: {trace.error}."
    return line


def _change(c: Change, values: ValueHistory, root: str, depth: int = 0) -> ValueChange:
    origin = values.origin(c)
    return ValueChange(
        name=c.name,
        file=relative(c.frame.file, root),
        line=c.line,
        function=c.frame.function,
        old=c.old,
        new=c.new,
        returned_by=(
            f"{origin.frame.function}() at {relative(origin.frame.file, root)}:{origin.line}"
            if origin
            else None
        ),
        depth=depth,
    )


def _change_text(row: ValueChange, indent: str = "  ") -> str:
    old = "unset" if row.old is None else row.old
    text = f"{indent}{row.file}:{row.line} in {row.function}: {row.name}: {old} -> {row.new}"
    return text + (f"  (returned by {row.returned_by})" if row.returned_by else "")


def _link_change(link: Link, root: str) -> ValueChange:
    c = link.change
    if c is None:  # a call whose value was used directly
        assert link.origin is not None
        o = link.origin
        return ValueChange(
            name=link.name,
            file=relative(o.frame.file, root),
            line=o.line,
            function=o.frame.function,
            old=None,
            new=o.value,
            returned_by=f"{o.frame.function}() at {relative(o.frame.file, root)}:{o.line}",
            depth=link.depth,
        )
    return ValueChange(
        name=c.name,
        file=relative(c.frame.file, root),
        line=c.line,
        function=c.frame.function,
        old=c.old,
        new=c.new,
        returned_by=(
            f"{link.origin.frame.function}() at {relative(link.origin.frame.file, root)}:{link.origin.line}"
            if link.origin
            else None
        ),
        depth=link.depth,
    )


def _link_text(link: Link, root: str) -> str:
    c = link.change
    indent = "  " * (link.depth + 1)
    if c is None:
        assert link.origin is not None
        o = link.origin
        returned = linecache.getline(o.frame.file, o.line).strip()
        where = f"{relative(o.frame.file, root)}:{o.line}"
        return f"{indent}{link.name} returned {o.value} at {where}: {returned}"
    was = f" (was {c.old})" if c.old is not None else ""
    if c.argument:
        caller = f" from {relative(c.frame.caller_file, root)}:{c.frame.at}" if c.frame.caller_file else ""
        text = f"{indent}{c.name} = {c.new}: argument of {c.frame.function}(), called{caller}"
    else:
        source = linecache.getline(c.frame.file, c.line).strip()
        where = f"{relative(c.frame.file, root)}:{c.line} in {c.frame.function}"
        text = f"{indent}{c.name} = {c.new}{was}, set at {where}: {source}"
    if link.origin is not None:
        o = link.origin
        returned = linecache.getline(o.frame.file, o.line).strip()
        where = f"{relative(o.frame.file, root)}:{o.line}"
        how = "returned by" if o.exact else f"computed from {o.value}, returned by"
        text += f"\n{indent}  {how} {o.frame.function}() at {where}: {returned}"
    return text


def trace_reply(store: Store, found: dict[str, Any], original: dict[str, Any] | None) -> TraceReply:
    """`trace_test`'s reply: the failing line's history, and whether tracing changed the outcome."""
    base = history(store, found, None)
    trace = found["trace"]
    before = original["status"] if original else None
    changed = before is not None and before != found["outcome"]
    lines = [base.text]
    if changed:
        lines.insert(
            0,
            f"Note: the test {found['outcome']} when traced but {before} in run "
            f"{original['run_id'] if original else '?'}: "
            "it is flaky or depends on time or order (tracing makes it slower); compare with "
            "get_test_history.",
        )
    return TraceReply(
        **{**base.model_dump(), "text": bound("\n".join(lines))},
        original_outcome=before,
        outcome_changed=changed,
        lines=trace.lines,
        steps=len(trace.steps),
        dropped=trace.dropped,
    )


def _root(store: Store, run_id: str) -> str:
    run = store.run(run_id)
    return str(run["rootdir"]) if run and run["rootdir"] else str(Path.cwd())
