"""Keeping freed megabyte buffers for reuse, in `mcpdebug run`, which moves output in bulk.

The runner handles output a megabyte at a time: a read, the lines cut from it, a message, its masked
copy. glibc gives large freed blocks back to the kernel (``munmap``, or trimming the heap's top), so
the next buffer faults in fresh zeroed pages: for 100 MB of output that was ~0.1 s of system time, a
third of the runner's CPU. Raising the thresholds keeps those blocks in the heap; what stays allocated
is bounded by the largest backlog the runner holds (the sender's limits), not by how much output
passes through. (`mcpdebug serve` keeps glibc's defaults: tuned the same way, its lines took ~10 ms
longer to be visible, for little CPU saved.) Never in a test process: its memory is the user's.

A process that is not on glibc (macOS, musl) keeps its allocator's defaults.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Final

_M_TRIM_THRESHOLD: Final = -1
_M_TOP_PAD: Final = -2
_M_MMAP_THRESHOLD: Final = -3
MMAP_THRESHOLD: Final = 32 * 1024 * 1024
"""glibc's largest: blocks up to this come from the heap, where they can be reused."""
TRIM_THRESHOLD: Final = 256 * 1024 * 1024
"""Free memory at the heap's top kept rather than returned to the kernel."""
TOP_PAD: Final = 16 * 1024 * 1024
"""Extra the heap grows by at a time, so a run of growing buffers does not grow it page by page."""


def keep_freed_buffers() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # absent outside glibc: AttributeError
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        mallopt(_M_TOP_PAD, TOP_PAD)
