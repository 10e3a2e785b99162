"""Importing the recording machinery without paying for when and where it happens.

An import defines classes and functions by the thousand, enough young objects to set off a full
collection of everything pytest has built by then (~12 ms each on this machine for the recording's
protocol and for websockets' client): work done because of when the import happens, not what it
does. `collector_paused` holds the collector off meanwhile; it runs again on its own schedule.

pytest imports every module of a plugin's package through its assertion-rewriting import hook (so a
plugin's own asserts explain themselves): its own loader and bytecode cache, in Python, ~0.17 ms a
module more than Python's, 6.5 ms of a run's start for the recorder's modules, whose asserts are
internal checks nobody reads. `own_modules` steps around that hook for the recorder's import, which
happens in pytest's main thread during ``pytest_configure``, before any test module is collected.

The plugin imports other modules later, some in its own threads (the watchdog's diagnosis, the code
version), where that hook would parse them with ``ast.parse`` while the main thread may be parsing a
test module or a lazily imported plugin: on Python 3.11 before 3.11.8 and 3.12 before 3.12.2 two
parses at once break each other (the AST constructor keeps its recursion count in the interpreter,
CPython gh-106905: ``SystemError: AST constructor recursion depth mismatch``, an INTERNALERROR that
ends the run). `leave_unrewritten` takes the package off the hook's list once, at registration, so
no import of it anywhere goes through the rewriter.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

REWRITE_HOOK_MODULE = "_pytest.assertion.rewrite"


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def leave_unrewritten(pluginmanager: object, package: str) -> None:
    """Take PACKAGE off the modules pytest's assertion-rewriting hook rewrites (pytest marks every
    package of a ``pytest11`` plugin's distribution); pytest's own hook keeps no public way to, so a
    hook without the expected attributes is left as it is."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    decided = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(marked, set) and package in marked:
        marked.discard(package)
        if isinstance(decided, dict):
            decided.clear()


@contextlib.contextmanager
def own_modules() -> Iterator[None]:
    """Import with the collector paused and pytest's assertion rewriting out of the way (restored
    after, in its place, with any hook added meanwhile kept)."""
    saved = list(sys.meta_path)
    rewriting = [hook for hook in saved if type(hook).__module__ == REWRITE_HOOK_MODULE]
    with collector_paused():
        if rewriting:
            sys.meta_path[:] = [hook for hook in saved if hook not in rewriting]
        try:
            yield
        finally:
            if rewriting:
                sys.meta_path[:] = saved + [hook for hook in sys.meta_path if hook not in saved]
