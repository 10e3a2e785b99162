"""``ast.parse`` without a garbage collection inside it, on the Pythons whose parse cannot take one.

Python 3.11 before 3.11.8 keeps the AST constructor's recursion count in the interpreter rather than
in the call (CPython gh-106905, fixed by giving each call its own count). A collection that starts
while a parse builds its tree runs finalizers, and one that parses again, or hands the GIL to a
thread that parses, leaves the outer parse's count off: ``SystemError: AST constructor recursion
depth mismatch``. In pytest the outer parse is the assertion rewriter importing a module, and the
run ends in INTERNALERROR. A recorded run meets both: asyncio tasks left pending by a stopped hang
are destroyed by the collector and log their error, whose traceback formatting parses its source
lines for the carets (``traceback._extract_caret_anchors_from_line_segment``), and the hang
watchdog parses a file in its own thread to find a loop's extent.

`install` wraps ``ast.parse`` so that the collector waits for the parse (both paths above go through
``ast.parse``; a collection deferred for a parse is one the next allocation starts); on other
Pythons it does nothing. Installed while a run is recorded, restored when it ends.
"""

from __future__ import annotations

import ast
import functools
import gc
import sys
import threading
from collections.abc import Callable
from typing import Any

AFFECTED = (3, 11) <= sys.version_info < (3, 11, 8)

_lock = threading.RLock()  # re-entrant: a collection on the way in may run a finalizer that parses
_parsing = 0
_collector_was_enabled = False


def install() -> Callable[[], None] | None:
    """Wrap ``ast.parse`` on an affected Python; returns what restores it (None: nothing to do)."""
    if not AFFECTED or getattr(ast.parse, "__mcpdebug_guarded__", False):
        return None
    original = ast.parse

    @functools.wraps(original)
    def parse(*args: Any, **kwargs: Any) -> Any:
        _enter()
        try:
            return original(*args, **kwargs)
        finally:
            _leave()

    parse.__mcpdebug_guarded__ = True  # type: ignore[attr-defined]
    ast.parse = parse  # type: ignore[assignment]

    def restore() -> None:
        if ast.parse is parse:
            ast.parse = original

    return restore


def _enter() -> None:
    global _parsing, _collector_was_enabled
    with _lock:
        if _parsing == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _parsing += 1


def _leave() -> None:
    global _parsing
    with _lock:
        _parsing -= 1
        if _parsing == 0 and _collector_was_enabled:
            gc.enable()
