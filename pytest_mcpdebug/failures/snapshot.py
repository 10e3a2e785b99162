"""A snapshot of a failure, taken while its frames are alive: exception, chain, frames, locals.

Taken in the process that ran the test, from the exception pytest caught, so an agent can read
every failing frame's variables later without re-running anything. Values are rendered by seed
000's rules (strings cut at 200 characters, a few items of a collection with ``+N more``), secrets
are redacted (`pytest_mcpdebug.redaction`: in values, messages, notes, pytest's assertion text and
the source lines), and containers and objects can be expanded to a bounded depth through ``ref``
numbers (DAP's variablesReference). The whole snapshot is bounded in size.
"""

from __future__ import annotations

import linecache
import os
from types import FrameType, TracebackType
from typing import Any, Final

from pytest_mcpdebug.protocol import Snapshot, SnapshotException, SnapshotFrame
from pytest_mcpdebug.redaction import redact
from pytest_mcpdebug.values import VarBuilder, is_library, type_name

# Limits
SOURCE_CONTEXT: Final = 5
MAX_FRAMES: Final = 30
"""Frames kept: the innermost ones when there are more."""
_UNITTEST_CASE: Final = os.path.join("unittest", "case.py")


def failure_frames(
    tb: TracebackType | None, first_code: Any = None
) -> tuple[list[tuple[FrameType, int]], int]:
    """The frames of a failure from the one running ``first_code`` (the test function) to the raise
    point, outermost first, at most `MAX_FRAMES` of them; and how many were dropped."""
    entries: list[tuple[FrameType, int]] = []
    while tb is not None:
        entries.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    if first_code is not None:
        start = next((i for i, (f, _) in enumerate(entries) if f.f_code is first_code), None)
        if start is not None:
            entries = entries[start:]
    if first_code is None or not any(f.f_code is first_code for f, _ in entries):
        # set-up or teardown: start at the first frame that is not pytest's or pluggy's
        start = next((i for i, (f, _) in enumerate(entries) if not is_library(f.f_code.co_filename)), 0)
        entries = entries[start:]
    dropped = max(len(entries) - MAX_FRAMES, 0)
    return entries[dropped:], dropped


def take(
    exc: BaseException, tb: TracebackType | None, *, first_code: Any = None, assertion: str = ""
) -> Snapshot:
    """Snapshot ``exc`` from the frame running ``first_code`` (the test function) to the raise point."""
    entries, dropped = failure_frames(tb, first_code)
    builder = VarBuilder()
    frames = []
    for index in range(len(entries) - 1, -1, -1):  # innermost first, as DAP's stackTrace
        frame, line = entries[index]
        path = os.path.abspath(frame.f_code.co_filename)
        library = is_library(path)
        names = [(k, v) for k, v in frame.f_locals.items() if not k.startswith("@")][:200]  # "@py_assert1"...
        if library:
            called_by_test = index > 0 and not is_library(entries[index - 1][0].f_code.co_filename)
            names = _assert_arguments(frame) if called_by_test else []
        variables = [builder.var(k, v, 0) for k, v in names]
        frames.append(
            SnapshotFrame(
                file=path,
                line=line,
                function=frame.f_code.co_name,
                library=library,
                source=_source(path, line, frame.f_globals),
                locals=variables,
            )
        )
    return Snapshot(
        exception=_exception(exc),
        chain=_chain(exc),
        notes=[redact(str(n)[:2000]) for n in getattr(exc, "__notes__", None) or []][:20],
        assertion=redact(assertion[:8000]),
        frames=frames,
        frames_dropped=dropped,
        children={str(k): v for k, v in builder.children.items()},
    )


def _assert_arguments(frame: FrameType) -> list[tuple[str, Any]]:
    """The arguments of a unittest ``assert*`` method called by the test (``first``, ``second``, ...),
    so a failure can say which value was passed as which; other library frames keep no locals."""
    code = frame.f_code
    if not (code.co_name.startswith("assert") and frame.f_code.co_filename.endswith(_UNITTEST_CASE)):
        return []
    count = code.co_argcount + code.co_kwonlyargcount
    return [(n, frame.f_locals[n]) for n in code.co_varnames[:count] if n != "self" and n in frame.f_locals]


def _exception(exc: BaseException) -> SnapshotException:
    try:
        message = str(exc)
    except Exception:
        message = "<str() failed>"
    return SnapshotException(type=type_name(exc), message=redact(message[:4000]))


def _chain(exc: BaseException) -> list[SnapshotException]:
    out: list[SnapshotException] = []
    seen = {id(exc)}
    current: BaseException | None = exc
    while current is not None and len(out) < 10:
        if current.__cause__ is not None:
            nxt, relation = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            nxt, relation = current.__context__, "context"
        else:
            break
        if id(nxt) in seen:
            break
        seen.add(id(nxt))
        item = _exception(nxt)
        out.append(SnapshotException(type=item.type, message=item.message, relation=relation))
        current = nxt
    return out


def _source(path: str, line: int, module_globals: dict[str, Any]) -> list[tuple[int, str]]:
    lines = linecache.getlines(path, module_globals)
    first = max(line - SOURCE_CONTEXT, 1)
    last = min(line + SOURCE_CONTEXT, len(lines))
    return [(n, redact(lines[n - 1].rstrip("\n")[:500], code=True)) for n in range(first, last + 1)]
