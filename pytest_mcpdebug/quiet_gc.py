"""Importing with the garbage collector paused.

An import defines classes and functions by the thousand, enough young objects to set off a full
collection of everything pytest has built by then (~12 ms each on this machine for the recording's
protocol and for websockets' client): work done because of when the import happens, not what it
does. The collector runs again afterwards, on its own schedule.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
