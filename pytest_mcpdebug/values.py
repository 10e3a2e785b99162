"""How a value is shown to an agent: bounded, with secrets redacted, and library frames told apart.

Seed 000's rules: strings cut at 200 characters, a few items of a collection with ``+N more``;
secrets redacted by `pytest_mcpdebug.redaction` (a value under a secret's name, and credentials
inside any value by their shape). Containers and objects can be expanded to a bounded depth through
``ref`` numbers (DAP's variablesReference). Used by failure snapshots, live holds and hang reports alike.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types
from typing import Any, Final

from pytest_mcpdebug.protocol import SnapshotVar
from pytest_mcpdebug.redaction import REDACTED, hidden, is_secret_name, redact, reveals_nothing

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

_NUMBERS: Final = frozenset({int, float, complex, bool})
_WINDOW: Final = 512
"""Characters past a cut that are redacted with what is kept: a secret across the cut is whole."""
_LIBRARY_PREFIXES = tuple(
    {
        os.path.realpath(p) + os.sep
        for paths in (sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix}))
        for key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")
        if (p := paths.get(key))
    }
    | {os.path.realpath(p) + os.sep for p in sys.path if "site-packages" in p}
)
"""The interpreter's library, installed packages, and the environment's scripts (a virtualenv's
``bin/pytest``, nox's and tox's): never the project's code, however pytest was launched."""


def is_secret(name: str) -> bool:
    """Whether a value under ``name`` is a secret (`pytest_mcpdebug.redaction.is_secret_name`)."""
    return is_secret_name(name)


def render(value: Any) -> str:
    """A value as seed 000 shows it: bounded, secrets inside it redacted, and never raising."""
    try:
        if value is None or type(value) in _NUMBERS:
            # No secret has a number's shape (render_named hides one under a secret's name).
            text = repr(value)
            return text if len(text) <= STRING_CHARS else text[:STRING_CHARS] + "... (truncated)"
        if isinstance(value, str):
            if len(value) <= STRING_CHARS:
                return repr(redact(value))
            kept = redact(value[: STRING_CHARS + _WINDOW])[:STRING_CHARS]
            return repr(kept) + "... (truncated)"
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return _render_collection(value)
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break the snapshot
        return f"<{type(value).__name__} object; repr() failed: {type(exc).__name__}>"
    if len(text) <= STRING_CHARS:
        return redact(text)
    return redact(text[: STRING_CHARS + _WINDOW])[:STRING_CHARS] + "... (truncated)"


def render_named(name: str, value: Any) -> str:
    """``value`` rendered as the value of ``name``: hidden under a secret's name (`hidden`), unless it
    reveals nothing (None, a bool, an empty string or container)."""
    if is_secret_name(name) and not reveals_nothing(value):
        return hidden(render(value)) if isinstance(value, str) else REDACTED
    return render(value)


def _render_collection(value: Any) -> str:
    items = list(value.items())[:ITEMS] if isinstance(value, dict) else list(value)[:ITEMS]
    if isinstance(value, dict):
        shown = ", ".join(
            f"{_short(k)}: {_short_named(k, v) if isinstance(k, str) else _short(v)}" for k, v in items
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


def _short_named(name: str, value: Any) -> str:
    if is_secret_name(name) and not reveals_nothing(value):
        return hidden(_short(value)) if isinstance(value, str) else REDACTED
    return _short(value)


def type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


class VarBuilder:
    """Numbers expandable values (``ref``) and keeps their children, within the snapshot's bounds."""

    def __init__(self) -> None:
        self.children: dict[int, list[SnapshotVar]] = {}
        self.count = 0

    def var(self, name: str, value: Any, depth: int) -> SnapshotVar:
        self.count += 1
        if is_secret_name(name) and not reveals_nothing(value):
            return SnapshotVar(name=name, type=type_name(value), value=render_named(name, value))
        ref = 0
        if depth < DEPTH and self.count < MAX_VARS:
            kids = self._children(value)
            if kids:
                ref = len(self.children) + 1
                self.children[ref] = []  # reserve the number before recursing
                self.children[ref] = [self.var(k, v, depth + 1) for k, v in kids]
        return SnapshotVar(name=name, type=type_name(value), value=render(value), ref=ref)

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
            if isinstance(value, type):
                return []
            return _attributes(value)[:CHILDREN]
        except Exception:
            return []


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """An object's attributes from its ``__dict__`` and slots, read without running its code: no
    ``__getattr__``, property or other descriptor is called (a snapshot must not change the test)."""
    try:
        attrs = object.__getattribute__(value, "__dict__")
    except AttributeError:
        attrs = None
    found = [(k, v) for k, v in attrs.items() if not k.startswith("__")] if isinstance(attrs, dict) else []
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            member = cls.__dict__.get(name)
            if isinstance(member, types.MemberDescriptorType) and not name.startswith("__"):
                try:
                    found.append((name, member.__get__(value, type(value))))
                except AttributeError:  # a slot never set
                    continue
    return found


_OWN = os.path.dirname(os.path.realpath(__file__)) + os.sep
"""This plugin's own package: its frames are never the project's."""


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
