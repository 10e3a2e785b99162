"""The text of `get_failure`: everything an agent needs about one failure, in one bounded reply.

Read from the snapshot the test process took while the failing frames were alive: the exception and
its chain, pytest's assertion introspection, each frame from the raise point down to the test with
its source and locals, plus the tail of the test's output.
"""

from __future__ import annotations

from typing import Any, Final

from mcpdebug.replies import FailureReport
from mcpdebug.store import Store
from mcpdebug.views import code_environment, doctests, lookup, output_window
from mcpdebug.views import output as output_view
from mcpdebug.views import processes as processes_view
from mcpdebug.views.calls import call, in_terminal
from mcpdebug.views.runs import counts_text as runs_counts_text
from pytest_mcpdebug.protocol import Snapshot, SnapshotFrame, SnapshotVar, decode_snapshot

ATTRIBUTES: Final = 4
"""An object's attributes shown beside its [ref N] in a frame's locals."""
SOURCE_FRAMES: Final = 3
"""Frames shown with their source: the innermost ones and the test's own."""
OUTPUT_LINES: Final = 20


def get_failure(store: Store, run: dict[str, Any], test: str | None) -> FailureReport:
    rid = run["run_id"]
    failures = store.failures(rid, decoded=False)  # a run's thousand failures: only those shown decoded
    if test is not None:
        lookup.test(store, run, test)  # an unknown test is an error, failures or not
    if not failures:
        raise NoFailures(_no_failures(store, run))
    if test is None:
        chosen = failures[0]
    else:
        row = lookup.test(store, run, test)
        mine = [f for f in failures if f["nodeid"] == row["nodeid"]]
        if not mine:
            names = lookup.listing(list(dict.fromkeys(f["nodeid"] for f in failures)))
            raise NoFailures(
                f"{row['nodeid']} did not fail in run {rid} (it is {row['status']}). Failures: {names}."
            )
        chosen = mine[0]
    chosen = _decoded(chosen)
    text = _render(chosen, run, store)
    others = [f for f in failures if f["nodeid"] != chosen["nodeid"] or f["phase"] != chosen["phase"]]
    if others:
        lines = ["", f"Other failures in this run ({len(others)}):"]
        for f in others[:20]:
            exc = _decoded(f)["snapshot"].exception
            lines.append(f"- {f['nodeid']} ({f['phase']}): {exc.type}: {_first_line(exc.message)}")
        if len(others) > 20:
            more = call("list_tests", run_id=rid, outcome="failed,error")
            lines.append(f"- ... and {len(others) - 20} more: {more}")
        text += "\n" + "\n".join(lines)
    snap: Snapshot = chosen["snapshot"]
    top = next((f for f in snap.frames if not f.library), None)
    return FailureReport(
        text=output_window.bounded(text),
        run_id=rid,
        test=chosen["nodeid"],
        kind="failed" if chosen["phase"] == "call" else "error",
        phase=chosen["phase"],
        exception=f"{snap.exception.type}: {_first_line(snap.exception.message)}",
        file=top.file if top else None,
        line=top.line if top else None,
        function=top.function if top else None,
        other_failures=[f["nodeid"] for f in others[:20]],
        next_call=call("get_output", run_id=rid, test=chosen["nodeid"]),
    )


def _decoded(failure: dict[str, Any]) -> dict[str, Any]:
    snapshot = failure["snapshot"]
    return failure if isinstance(snapshot, Snapshot) else {**failure, "snapshot": decode_snapshot(snapshot)}


class NoFailures(lookup.NotFound):
    """No failure to show: for the whole run a normal (empty) answer, for a named test an error."""


def _no_failures(store: Store, run: dict[str, Any]) -> str:
    rid = run["run_id"]
    problems = [p["nodeid"] for p in store.problems(rid)]
    hint = (
        " Failed tests without a snapshot (recorded before snapshots existed?): "
        f"{lookup.listing(problems, 10)}."
        if problems
        else ""
    )
    return (
        f"Run {rid} has no failures ({runs_counts_text(run['counts'])}).{hint} "
        f"{call('list_tests', run_id=rid)} shows every test's outcome."
    )


def _render(failure: dict[str, Any], run: dict[str, Any], store: Store) -> str:
    snap: Snapshot = failure["snapshot"]
    rid = run["run_id"]
    nodeid = failure["nodeid"]
    kind = "FAILED" if failure["phase"] == "call" else "ERROR"
    exc = snap.exception
    lines = [f"{kind} {nodeid} ({failure['phase']}) in run {rid}", f"{exc.type}: {_first_line(exc.message)}"]
    if snap.assertion:
        lines += ["", "Assertion (pytest's introspection):", _indent(snap.assertion)]
    unittest_call = _unittest_assertion(snap)
    if unittest_call:
        lines += ["", f"Assertion (unittest): {unittest_call}"]
    if not snap.assertion and "\n" in exc.message:
        lines += ["", "Message:", _indent(exc.message)]
    lines += doctests.lines(snap.doctest)
    for link in snap.chain:
        why = "The above was caused by" if link.relation == "cause" else "Raised while handling"
        lines.append(f"{why}: {link.type}: {_first_line(link.message)}")
    if snap.notes:
        lines += ["", "Notes (e.g. hypothesis's falsifying example):", *(_indent(n) for n in snap.notes)]
    user = [f for f in snap.frames if not f.library]
    hidden = len(snap.frames) - len(user)
    if user:
        top = user[0]
        lines += ["", f"Raised at {top.file}:{top.line} in {_called(top.function)}"]
    lines += [
        "",
        f"Frames, innermost first ({len(user)} of this project"
        + (f"; {hidden} library frames, named only" if hidden else "")
        + (f"; {snap.frames_dropped} outer frames dropped" if snap.frames_dropped else "")
        + "):",
    ]
    with_source = {id(f) for f in user[: SOURCE_FRAMES - 1]} | ({id(user[-1])} if user else set())
    for number, frame in enumerate(snap.frames):
        if frame.library:
            lines.append(f"#{number} {frame.file}:{frame.line} in {frame.function}() [library]")
            continue
        lines.append(f"#{number} {frame.file}:{frame.line} in {_called(frame.function)}")
        if id(frame) in with_source:
            lines += _source(frame)
        lines += _locals(frame.locals, snap)
    refs = [v.ref for f in user for v in f.locals if v.ref]
    lines += code_environment.lines(run, store.shards(rid), [f.file for f in user], store.dir.parent)
    output = output_view.output_tail(store, run, nodeid, OUTPUT_LINES)
    lines += ["", output]
    test = store.test(rid, nodeid) or {}
    services = processes_view.service_lines(
        store,
        rid,
        nodeid,
        test.get("started") or failure["finished"],
        test.get("finished") or failure["finished"],
    )
    if services:  # the logs of the service an integration test talks to, from the seconds it ran
        lines += ["", services]
    steps = [f"{call('get_output', run_id=rid, test=nodeid)} reads the whole output."]
    if not in_terminal():  # values expand over MCP only
        expand = call("get_variables", run_id=rid, test=nodeid, variables_reference="N").replace('"N"', "N")
        example = f" (e.g. {refs[0]})" if refs else ""
        steps.insert(0, f"{expand} expands a value marked [ref N]{example};")
    lines += ["", "Next: " + " ".join(steps)]
    return "\n".join(lines)


def _called(function: str) -> str:
    """``total()``, but ``<module>`` and ``<doctest mod.add[0]>`` as Python's tracebacks name them."""
    return function if function.startswith("<") else function + "()"


def _source(frame: SnapshotFrame) -> list[str]:
    width = len(str(frame.source[-1][0])) if frame.source else 1
    return [f"  {'>' if n == frame.line else ' '} {n:>{width}} | {text}" for n, text in frame.source]


def _locals(variables: list[SnapshotVar], snap: Snapshot | None = None) -> list[str]:
    """A frame's locals, one a line; with ``snap``, an object's first attributes after its [ref N]."""
    if not variables:
        return []
    out = ["    locals:"]
    for v in variables[:60]:
        ref = f" [ref {v.ref}]" if v.ref else ""
        out.append(f"      {v.name} ({v.type}) = {v.value}{ref}{_attributes(v, snap)}")
    if len(variables) > 60:
        out.append(f"      ... {len(variables) - 60} more")
    return out


def _attributes(var: SnapshotVar, snap: Snapshot | None) -> str:
    """`` {a=1, b='x', +2 more}``: an object's first attributes as the snapshot took them (from its
    ``__dict__`` or slots, never by evaluating a property), when its repr does not show them."""
    if snap is None or not var.ref or var.value.startswith(("[", "(", "{")):
        return ""
    children = snap.children.get(str(var.ref), [])
    if not children or all(c.name.startswith(("[", "<")) for c in children):
        return ""  # a container: its items are in its value already
    if all(f"{c.name}=" in var.value for c in children[:ATTRIBUTES]):
        return ""  # a dataclass-like repr shows them already
    shown = [f"{c.name}={_short(c.value)}" for c in children[:ATTRIBUTES]]
    more = f", +{len(children) - ATTRIBUTES} more" if len(children) > ATTRIBUTES else ""
    return " {" + ", ".join(shown) + more + "}"


def _short(value: str) -> str:
    return value if len(value) <= 40 else value[:37] + "..."


def _unittest_assertion(snap: Snapshot) -> str:
    """``assertEqual(first=1, second=2)``: the unittest assert method the test called, with its
    arguments named, so it is clear which value was passed as which."""
    for inner, outer in zip(snap.frames, snap.frames[1:], strict=False):
        if inner.library and not outer.library and inner.function.startswith("assert") and inner.locals:
            unset = {
                "self",
                *(["msg"] if any(v.name == "msg" and v.value == "None" for v in inner.locals) else []),
            }
            args = ", ".join(f"{v.name}={v.value}" for v in inner.locals if v.name not in unset)
            return f"{inner.function}({args}) at {outer.file}:{outer.line}"
    return ""


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return line if len(line) <= 300 else line[:300] + "..."


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()[:80])
