"""The text of `get_failure`: everything an agent needs about one failure, in one bounded reply.

Read from the snapshot the test process took while the failing frames were alive: the exception and
its chain, pytest's assertion introspection, each frame from the raise point down to the test with
its source and locals, plus the tail of the test's output.
"""

from __future__ import annotations

from typing import Any, Final

from mcpdebug.store import Store
from mcpdebug.views import doctests, lookup, output_window
from mcpdebug.views import output as output_view
from mcpdebug.views import processes as processes_view
from pytest_mcpdebug.protocol import Snapshot, SnapshotFrame, SnapshotVar

SOURCE_FRAMES: Final = 3
"""Frames shown with their source: the innermost ones and the test's own."""
OUTPUT_LINES: Final = 20


def get_failure(store: Store, run: dict[str, Any], test: str | None) -> str:
    rid = run["run_id"]
    failures = store.failures(rid)
    if not failures:
        problems = [p["nodeid"] for p in store.problems(rid)]
        hint = (
            " Failed tests without a snapshot (recorded before snapshots existed?): "
            f"{', '.join(problems[:10])}."
            if problems
            else ""
        )
        raise lookup.NotFound(
            f'Run {rid} has no failures.{hint} list_tests(run_id="{rid}") shows every test\'s outcome.'
        )
    if test is None:
        chosen = failures[0]
    else:
        row = lookup.test(store, run, test)
        mine = [f for f in failures if f["nodeid"] == row["nodeid"]]
        if not mine:
            names = ", ".join(dict.fromkeys(f["nodeid"] for f in failures))
            raise lookup.NotFound(
                f"{row['nodeid']} did not fail in run {rid} (it is {row['status']}). Failures: {names}."
            )
        chosen = mine[0]
    text = _render(chosen, run, store)
    others = [f for f in failures if f is not chosen]
    if others:
        lines = ["", f"Other failures in this run ({len(others)}):"]
        for f in others[:20]:
            exc = f["snapshot"].exception
            lines.append(f"- {f['nodeid']} ({f['phase']}): {exc.type}: {_first_line(exc.message)}")
        if len(others) > 20:
            lines.append(
                f'- ... and {len(others) - 20} more: list_tests(run_id="{rid}", outcome="failed,error")'
            )
        text += "\n" + "\n".join(lines)
    return output_window.bounded(text)


def _render(failure: dict[str, Any], run: dict[str, Any], store: Store) -> str:
    snap: Snapshot = failure["snapshot"]
    rid = run["run_id"]
    nodeid = failure["nodeid"]
    kind = "FAILED" if failure["phase"] == "call" else "ERROR"
    exc = snap.exception
    lines = [f"{kind} {nodeid} ({failure['phase']}) in run {rid}", f"{exc.type}: {_first_line(exc.message)}"]
    if snap.assertion:
        lines += ["", "Assertion (pytest's introspection):", _indent(snap.assertion)]
    elif "\n" in exc.message:
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
        + (f"; {hidden} library frames not shown" if hidden else "")
        + (f"; {snap.frames_dropped} outer frames dropped" if snap.frames_dropped else "")
        + "):",
    ]
    with_source = {id(f) for f in user[: SOURCE_FRAMES - 1]} | ({id(user[-1])} if user else set())
    for number, frame in enumerate(snap.frames):
        if frame.library:
            continue
        lines.append(f"#{number} {frame.file}:{frame.line} in {_called(frame.function)}")
        if id(frame) in with_source:
            lines += _source(frame)
        lines += _locals(frame.locals)
    refs = [v.ref for f in user for v in f.locals if v.ref]
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
    lines += [
        "",
        f'Next: get_variables(run_id="{rid}", test="{nodeid}", variables_reference=N) expands a value '
        f'marked [ref N]{f" (e.g. {refs[0]})" if refs else ""}; get_output(test="{nodeid}") reads '
        "the whole output.",
    ]
    return "\n".join(lines)


def _called(function: str) -> str:
    """``total()``, but ``<module>`` and ``<doctest mod.add[0]>`` as Python's tracebacks name them."""
    return function if function.startswith("<") else function + "()"


def _source(frame: SnapshotFrame) -> list[str]:
    width = len(str(frame.source[-1][0])) if frame.source else 1
    return [f"  {'>' if n == frame.line else ' '} {n:>{width}} | {text}" for n, text in frame.source]


def _locals(variables: list[SnapshotVar]) -> list[str]:
    if not variables:
        return []
    out = ["    locals:"]
    for v in variables[:60]:
        ref = f" [ref {v.ref}]" if v.ref else ""
        out.append(f"      {v.name} ({v.type}) = {v.value}{ref}")
    if len(variables) > 60:
        out.append(f"      ... {len(variables) - 60} more")
    return out


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return line if len(line) <= 300 else line[:300] + "..."


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()[:80])
