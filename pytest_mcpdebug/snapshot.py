"""A snapshot of a failure, taken while its frames are alive: exception, chain, frames, locals.

Taken in the process that ran the test, from the exception pytest caught, so an agent can read
every failing frame's variables later without re-running anything. Values are rendered by seed
000's rules (strings cut at 200 characters, a few items of a collection with ``+N more``), names
that look secret are redacted, and containers and objects can be expanded to a bounded depth
through ``ref`` numbers (DAP's variablesReference). The whole snapshot is bounded in size.
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
import sysconfig
from types import FrameType, TracebackType
from typing import Any, Final

from .protocol import Snapshot, SnapshotException, SnapshotFrame, SnapshotVar

# Limits
STRING_CHARS: Final = 200
ITEMS: Final = 5
"""Items of a collection shown in its value."""
CHILDREN: Final = 50
"""Children of one container or object that can be expanded."""
DEPTH: Final = 2
"""Levels of children below a frame's locals."""
MAX_VARS: Final = 2_000
"""Variables in one snapshot, all frames together."""
SOURCE_CONTEXT: Final = 5
MAX_FRAMES: Final = 30
"""Frames kept: the innermost ones when there are more."""

_SECRET = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_-]?key|auth|credential|private[_-]?key|cookie|session[_-]?id",
    re.IGNORECASE,
)
REDACTED: Final = "<redacted>"
_LIBRARY_PREFIXES = tuple(
    {
        os.path.realpath(p) + os.sep
        for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"])
    }
    | {os.path.realpath(p) + os.sep for p in sys.path if "site-packages" in p}
)


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


_SECRET_IN_REPR = re.compile(
    r"""(?P<key>['"]?[A-Za-z_]*(?:""" + _SECRET.pattern + r""")[A-Za-z_]*['"]?\s*[=:]\s*)"""
    r"""(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^,)}\]\s]+)""",
    re.IGNORECASE,
)


def render(value: Any) -> str:
    """A value as seed 000 shows it: bounded, secrets inside it redacted, and never raising."""
    try:
        if isinstance(value, str):
            text = repr(value)
            return text if len(value) <= STRING_CHARS else repr(value[:STRING_CHARS]) + "... (truncated)"
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return _render_collection(value)
        text = _SECRET_IN_REPR.sub(lambda m: m["key"] + REDACTED, repr(value))
    except Exception as exc:  # a broken __repr__ must not break the snapshot
        return f"<{type(value).__name__} object; repr() failed: {type(exc).__name__}>"
    return text if len(text) <= STRING_CHARS else text[:STRING_CHARS] + "... (truncated)"


def _render_collection(value: Any) -> str:
    items = list(value.items())[:ITEMS] if isinstance(value, dict) else list(value)[:ITEMS]
    if isinstance(value, dict):
        shown = ", ".join(
            f"{_short(k)}: {REDACTED if isinstance(k, str) and is_secret(k) else _short(v)}" for k, v in items
        )
        open_, close = "{", "}"
    else:
        shown = ", ".join(_short(v) for v in items)
        brackets: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")")}
        open_, close = brackets.get(type(value), (type(value).__name__ + "({", "})"))
    more = len(value) - len(items)
    return f"{open_}{shown}{f', ... +{more} more' if more > 0 else ''}{close}"


def _short(value: Any) -> str:
    text = (
        render(value)
        if not isinstance(value, (list, tuple, set, frozenset, dict))
        else f"<{type(value).__name__} of {len(value)}>"
    )
    return text if len(text) <= 60 else text[:60] + "..."


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


class _Builder:
    """Numbers expandable values (``ref``) and keeps their children, within the snapshot's bounds."""

    def __init__(self) -> None:
        self.children: dict[int, list[SnapshotVar]] = {}
        self.count = 0

    def var(self, name: str, value: Any, depth: int) -> SnapshotVar:
        self.count += 1
        if is_secret(name):
            return SnapshotVar(name=name, type=_type_name(value), value=REDACTED)
        ref = 0
        if depth < DEPTH and self.count < MAX_VARS:
            kids = self._children(value)
            if kids:
                ref = len(self.children) + 1
                self.children[ref] = []  # reserve the number before recursing
                self.children[ref] = [self.var(k, v, depth + 1) for k, v in kids]
        return SnapshotVar(name=name, type=_type_name(value), value=render(value), ref=ref)

    @staticmethod
    def _children(value: Any) -> list[tuple[str, Any]]:
        try:
            if isinstance(value, (str, bytes, int, float, complex, bool, type(None))):
                return []
            if isinstance(value, dict):
                return [(render(k), v) for k, v in list(value.items())[:CHILDREN]]
            if isinstance(value, (list, tuple)):
                return [(f"[{i}]", v) for i, v in enumerate(value[:CHILDREN])]
            if isinstance(value, (set, frozenset)):
                return [(f"<{i}>", v) for i, v in enumerate(list(value)[:CHILDREN])]
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict) and not isinstance(value, type):
                return [(k, v) for k, v in list(attrs.items())[:CHILDREN] if not k.startswith("__")]
        except Exception:
            return []
        return []


_OWN = os.path.dirname(os.path.realpath(__file__)) + os.sep


@functools.lru_cache(maxsize=4096)
def is_library(path: str) -> bool:
    """Frames of the standard library, installed packages, pytest, pluggy or this plugin."""
    if path.startswith("<"):  # "<frozen runpy>", "<string>" (xdist's worker bootstrap): not the project's
        return True
    real = os.path.realpath(path)
    return (
        real.startswith(_LIBRARY_PREFIXES)
        or real.startswith(_OWN)
        or "/_pytest/" in real
        or "/pluggy/" in real
    )


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
    builder = _Builder()
    frames = []
    for frame, line in reversed(entries):  # innermost first, as DAP's stackTrace
        path = os.path.abspath(frame.f_code.co_filename)
        library = is_library(path)
        names = [(k, v) for k, v in frame.f_locals.items() if not k.startswith("@")][:200]  # "@py_assert1"...
        variables = [] if library else [builder.var(k, v, 0) for k, v in names]
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
        notes=[str(n)[:2000] for n in getattr(exc, "__notes__", None) or []][:20],
        assertion=assertion[:8000],
        frames=frames,
        frames_dropped=dropped,
        children={str(k): v for k, v in builder.children.items()},
    )


def _exception(exc: BaseException) -> SnapshotException:
    try:
        message = str(exc)
    except Exception:
        message = "<str() failed>"
    return SnapshotException(type=_type_name(exc), message=message[:4000])


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
    return [(n, lines[n - 1].rstrip("\n")[:500]) for n in range(first, last + 1)]
