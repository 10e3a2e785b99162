"""A failing doctest's snapshot: the example, what it expected and what came out.

pytest's doctest items fail with doctest's own exceptions, whose tracebacks run only through
doctest's machinery: a plain snapshot would show "0 frames of this project". What an agent needs is
the example: its file and line, its code, the expected and the actual output, or the exception it
raised unexpectedly, and then the frames of the project that exception came through, with their
locals (the example's own namespace is gone by then: doctest clears it when the doctest ends).
"""

from __future__ import annotations

import linecache
import os
import sys
from types import CodeType, TracebackType
from typing import Any, Final

import msgspec

from pytest_mcpdebug.failures import snapshot as frames_snapshot
from pytest_mcpdebug.protocol import DoctestExample, Snapshot, SnapshotException, SnapshotFrame
from pytest_mcpdebug.redaction import redact
from pytest_mcpdebug.values import type_name

# Limits
EXAMPLES: Final = 20
"""Failing examples kept of one doctest (``--doctest-continue-on-failure`` reports them all)."""
TEXT_CHARS: Final = 4_000
"""Characters kept of an example's source, expected and actual output."""


def take(exc: BaseException) -> Snapshot | None:
    """The snapshot of a doctest failure, or None when ``exc`` is not one."""
    failures = _failures(exc)
    if not failures:
        return None
    examples = [_example(f) for f in failures[:EXAMPLES]]
    first, example = failures[0], examples[0]
    raised = getattr(first, "exc_info", None)
    if raised is not None:  # the example raised: its frames, from the example's code inwards
        value, tb = raised[1], raised[2]
        snapshot = frames_snapshot.take(value, tb, first_code=_example_code(tb))
        frames = list(snapshot.frames)
        if frames and os.path.basename(frames[-1].file).startswith("<doctest "):
            frames[-1] = _example_frame(example, offset=frames[-1].line - 1)
        return msgspec.structs.replace(snapshot, frames=frames, doctest=examples)
    more = f"{len(failures)} examples failed; the first: " if len(failures) > 1 else ""
    return Snapshot(
        exception=SnapshotException(type=type_name(first), message=more + _headline(example)),
        frames=[_example_frame(example)],
        doctest=examples,
    )


def _failures(exc: BaseException) -> list[Any]:
    """doctest's DocTestFailure / UnexpectedException objects that ``exc`` stands for."""
    doctest = sys.modules.get("doctest")  # imported already if this is a doctest failure
    if doctest is None:
        return []
    kinds = (doctest.DocTestFailure, doctest.UnexpectedException)
    if isinstance(exc, kinds):
        return [exc]
    inner = getattr(exc, "failures", None)  # pytest's MultipleDoctestFailures
    if isinstance(inner, (list, tuple)) and all(isinstance(f, kinds) for f in inner):
        return list(inner)
    return []


def _example(failure: Any) -> DoctestExample:
    test, example = failure.test, failure.example
    raised = getattr(failure, "exc_info", None)
    exception = ""
    if raised is not None:
        exception = f"{type_name(raised[1])}: {_str(raised[1])}".rstrip(": ")
    number = next((i for i, e in enumerate(test.examples, 1) if e is example), 0)
    return DoctestExample(
        file=os.path.abspath(test.filename or test.name),
        line=test.lineno + example.lineno + 1 if test.lineno is not None else 0,
        name=test.name,
        number=number,
        examples=len(test.examples),
        source=redact(example.source[:TEXT_CHARS], code=True),
        want=redact(example.want[:TEXT_CHARS]),
        got=redact(str(getattr(failure, "got", ""))[:TEXT_CHARS]),
        exception=redact(exception[:TEXT_CHARS]),
    )


def _example_frame(example: DoctestExample, offset: int = 0) -> SnapshotFrame:
    """The example as a frame of the project: its file, the line that ran, the source around it."""
    line = example.line + offset if example.line else 0
    lines = linecache.getlines(example.file)
    first, last = (
        max(line - frames_snapshot.SOURCE_CONTEXT, 1),
        min(line + frames_snapshot.SOURCE_CONTEXT, len(lines)),
    )
    return SnapshotFrame(
        file=example.file,
        line=line,
        function=f"<doctest {example.name}[{max(example.number - 1, 0)}]>",
        source=[(n, redact(lines[n - 1].rstrip("\n")[:500], code=True)) for n in range(first, last + 1)]
        if line
        else [],
    )


def _example_code(tb: TracebackType | None) -> CodeType | None:
    """The code doctest compiled from the example (its file name is "<doctest name[n]>")."""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<doctest "):
            return tb.tb_frame.f_code
        tb = tb.tb_next
    return None


def _headline(example: DoctestExample) -> str:
    where = f"line {example.line} of {os.path.basename(example.file)}" if example.line else example.name
    return f"{where}: {_brief(example.source)} expected {_brief(example.want)}, got {_brief(example.got)}"


def _brief(text: str) -> str:
    lines = text.strip().splitlines()
    if not lines:
        return "nothing"
    line = lines[0] if len(lines[0]) <= 80 else lines[0][:80] + "..."
    return line + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def _str(value: BaseException) -> str:
    try:
        return str(value)
    except Exception:
        return "<str() failed>"
