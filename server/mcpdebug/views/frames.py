"""Seed 002's inspection tools over a stored failure snapshot: stack, scopes, variables, source.

Replies keep seed 002's shapes (``stackFrames``, ``scopes``, ``variables`` with ``variablesReference``),
typed in `mcpdebug.replies`. Frame ids count from the raise point (0) outwards. A frame's locals are the scope
``LOCALS_BASE + frame_id``; any other reference expands a container or an object of the snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from mcpdebug.replies import (
    FrameRef,
    Scope,
    Scopes,
    SourceContext,
    SourceLine,
    Stack,
    StackFrame,
    Variable,
    Variables,
)
from mcpdebug.store import Store
from mcpdebug.views import lookup
from mcpdebug.views.calls import call
from pytest_mcpdebug.protocol import Snapshot, SnapshotVar
from pytest_mcpdebug.redaction import redact

LOCALS_BASE: Final = 1_000_000
SPECIAL_PREFIX: Final = "__"


class NoFailure(lookup.NotFound):
    """The run (or the test) has no failure snapshot: an empty answer for get_stack_trace."""


def _failure(store: Store, run: dict[str, Any], test: str | None) -> tuple[dict[str, Any], Snapshot]:
    rid = run["run_id"]
    failures = store.failures(rid)
    if test is not None:
        nodeid = lookup.test(store, run, test)["nodeid"]
        failures = [f for f in failures if f["nodeid"] == nodeid]
        if not failures:
            raise NoFailure(
                f"{nodeid} has no failure snapshot in run {rid}; "
                f"{call('get_failure', run_id=rid)} lists the failures."
            )
    if not failures:
        raise NoFailure(f"Run {rid} has no failures to inspect.")
    return failures[0], failures[0]["snapshot"]


def _frame(snapshot: Snapshot, frame_id: int) -> Any:
    if not 0 <= frame_id < len(snapshot.frames):
        raise lookup.NotFound(
            f"No frame {frame_id}: this failure has frames 0-{len(snapshot.frames) - 1} (0 is where it was "
            "raised); get_stack_trace lists them."
        )
    return snapshot.frames[frame_id]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _var(v: SnapshotVar) -> Variable:
    return Variable(name=v.name, value=v.value, type=v.type, variablesReference=v.ref)


def _ref(frame_id: int, frame: Any) -> FrameRef:
    return FrameRef(id=frame_id, name=frame.function, file=frame.file, line=frame.line)


def get_stack_trace(
    store: Store, run: dict[str, Any], test: str | None, include_library: bool = False
) -> Stack:
    try:
        failure, snap = _failure(store, run, test)
    except NoFailure as exc:
        return Stack(stackFrames=[], count=0, message=str(exc))
    frames = [
        StackFrame(id=i, name=f.function, file=f.file, line=f.line, library=f.library)
        for i, f in enumerate(snap.frames)
        if include_library or not f.library
    ]
    hidden = sum(1 for f in snap.frames if f.library) if not include_library else 0
    return Stack(
        test=failure["nodeid"],
        phase=failure["phase"],
        exception=f"{snap.exception.type}: {_first_line(snap.exception.message)}",
        stackFrames=frames,
        count=len(frames),
        libraryFramesHidden=hidden or None,
    )


def get_scopes(store: Store, run: dict[str, Any], test: str | None, frame_id: int) -> Scopes:
    _, snap = _failure(store, run, test)
    frame = _frame(snap, frame_id)
    reference = LOCALS_BASE + frame_id if frame.locals else 0
    return Scopes(
        scopes=[Scope(name="Locals", variablesReference=reference, count=len(frame.locals))],
        frame=_ref(frame_id, frame),
    )


def get_variables(store: Store, run: dict[str, Any], test: str | None, variables_reference: int) -> Variables:
    _, snap = _failure(store, run, test)
    if variables_reference >= LOCALS_BASE:
        variables = _frame(snap, variables_reference - LOCALS_BASE).locals
    elif str(variables_reference) in snap.children:
        variables = snap.children[str(variables_reference)]
    else:
        known = sorted(int(k) for k in snap.children)
        raise lookup.NotFound(
            f"No variablesReference {variables_reference} in this snapshot. Expandable values carry one "
            f"(here {known[0]}-{known[-1]}); a frame's locals are {LOCALS_BASE} + frame id (get_scopes)."
            if known
            else f"No variablesReference {variables_reference}: nothing in this snapshot is expandable; "
            f"a frame's locals are {LOCALS_BASE} + frame id (get_scopes)."
        )
    return Variables(variables=[_var(v) for v in variables], count=len(variables))


def get_local_variables(
    store: Store,
    run: dict[str, Any],
    test: str | None,
    frame_id: int | None = None,
    include_special: bool = False,
) -> Variables:
    _, snap = _failure(store, run, test)
    if frame_id is None:  # the test's own frame is what one usually wants; else the innermost of the project
        user = [i for i, f in enumerate(snap.frames) if not f.library]
        frame_id = user[-1] if user else 0
    frame = _frame(snap, frame_id)
    variables = [v for v in frame.locals if include_special or not v.name.startswith(SPECIAL_PREFIX)]
    return Variables(
        variables=[_var(v) for v in variables],
        count=len(variables),
        frame=_ref(frame_id, frame),
        scopeName="Locals",
    )


def get_source_context(
    store: Store, run: dict[str, Any], test: str | None, file: str, line: int, lines_context: int = 5
) -> SourceContext:
    """Source around ``line`` of a file of the run's rootdir or of the failure's frames, as on disk now."""
    _, snap = _failure(store, run, test)
    return source_context(run["rootdir"], [f.file for f in snap.frames], file, line, lines_context)


def source_context(
    rootdir: str, frame_files: list[str], file: str, line: int, lines_context: int = 5
) -> SourceContext:
    """Read source lines, refusing files outside ``rootdir`` that are not among ``frame_files``."""
    root = Path(rootdir).resolve() if rootdir else None
    allowed = {os.path.realpath(f) for f in frame_files}
    try:
        target = Path(file if os.path.isabs(file) or root is None else root / file).resolve()
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long
        raise lookup.NotFound(f"{lookup.quoted(file)} is not a file path ({exc}).") from None
    inside = root is not None and (target == root or root in target.parents)
    if not inside and str(target) not in allowed:
        raise lookup.NotFound(
            f"{lookup.quoted(file)} is outside the run's rootdir ({root}) and is not a file of the "
            "failure's frames; get_source_context reads only those."
        )
    try:
        lines = target.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise lookup.NotFound(f"Cannot read {lookup.quoted(str(target))}: {exc.strerror}.") from None
    if not 1 <= line <= len(lines):
        raise lookup.NotFound(f"{target} has lines 1-{len(lines)}; line {line} is outside them.")
    context = max(0, min(lines_context, 100))
    first, last = max(line - context, 1), min(line + context, len(lines))
    return SourceContext(
        file=str(target),
        line=line,
        lineContent=redact(lines[line - 1], code=True),
        surrounding=[
            SourceLine(line=n, content=redact(lines[n - 1], code=True)) for n in range(first, last + 1)
        ],
        note="read from disk now; it may differ from the source at the time of the run",
    )
