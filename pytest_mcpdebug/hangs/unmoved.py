"""A hang that may be an earlier one's leftover: a thread of the project's code that has not moved
since an earlier test of the same process hung.

A hung test is interrupted, but the thread it waited on is not: a pool's only worker stays blocked,
and every later test that needs it hangs too (dask's threaded pool on a one-CPU runner: three hangs in
a row, all "blocked in queue.Queue.get"). Each later hang then names the earlier one, so the reader
starts there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the protocol's structs need msgspec, which a quiet run never loads
    from pytest_mcpdebug.protocol import HangReport, HangThread


def since_earlier(report: HangReport, earlier: Sequence[tuple[str, HangReport]]) -> str:
    """``"; thread 'pool-1' has not moved since test_a.py::test_x hung: that hang may hold this one"``,
    or "" when no thread of the project's code is where an earlier hang found it."""
    for thread in report.threads:
        if thread.test or not thread.summary or not thread.frames:
            continue
        first = next((nodeid for nodeid, old in earlier if _unmoved(thread, old)), None)
        if first is not None:
            return f"; thread {thread.name!r} has not moved since {first} hung: that hang may hold this one"
    return ""


def _unmoved(thread: HangThread, old: HangReport) -> bool:
    return any(t.ident == thread.ident and _stack(t) == _stack(thread) for t in old.threads if not t.test)


def _stack(thread: HangThread) -> list[tuple[str, int, str]]:
    return [(f.file, f.line, f.function) for f in thread.frames]
