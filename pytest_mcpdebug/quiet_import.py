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
