"""Keeping the recorder's background thread on the CPU of the thread that runs the tests.

The sender thread wakes every tick, and each wake-up takes the GIL from the test thread. When the two
run on different CPUs, every hand-over makes the test thread wait for a wake-up of its own CPU; on a
shared CPU it is a plain switch. Measured on this project's 2-core VM: a do-nothing thread waking 50
times a second costs a plain pytest run of quick tests ~2 ms per wake-up (40 us a test); kept on the
test thread's CPU, the sender's ticks cost 2,000 quick tests ~6 us a test less spooling and ~14 us
less streaming. So the sender follows the test thread: it moves itself to the CPU that thread last
ran on, and looks again every `RECHECK` seconds (the scheduler may move the test thread).

Only the sender's own affinity changes (it reads its WebSocket itself: `channel`): the test thread's,
and so that of every thread and process a test starts, is never touched. What the sender thread starts
itself (the ticker's helper process, its reaper thread) it starts `unpinned`: a new thread or process
inherits the affinity of the thread that starts it, and the helper, pinned to the test thread's CPU,
would wake there 40 times a second for the whole run and start its interpreter there, taking that
time from the tests while the other CPU idled. Linux only; elsewhere, or where affinity cannot be set
(a container's limits), nothing happens.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Final

RECHECK: Final = 1.0
"""Seconds between looks at the CPU the test thread runs on."""


class Colocation:
    def __init__(self, thread: threading.Thread | None = None) -> None:
        target = thread or threading.main_thread()
        self._stat = f"/proc/self/task/{target.native_id}/stat"
        self._fd: int | None = None
        """The ``stat`` file, kept open: a look is one ``pread``, each system call being a hand-over
        of the GIL to and from the test thread."""
        self._cpu: int | None = None
        self._next = 0.0
        self.enabled = sys.platform == "linux" and hasattr(os, "sched_setaffinity")

    def follow(self) -> None:
        """From the background thread, as often as it likes: move it to the test thread's CPU (a look
        at most every `RECHECK` seconds)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + RECHECK
        try:
            if self._fd is None:
                self._fd = os.open(self._stat, os.O_RDONLY | os.O_CLOEXEC)
            cpu = _last_cpu(self._fd)
            if cpu != self._cpu:
                os.sched_setaffinity(0, {cpu})  # 0: the calling thread
                self._cpu = cpu
        except (OSError, ValueError, IndexError):  # no /proc, a CPU we may not use: leave it be
            self.enabled = False

    def release(self) -> None:
        """Let the calling thread run anywhere again (before it starts work that may take a while)."""
        if self._cpu is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, os.sched_getaffinity(os.getpid()))
            self._cpu = None

    @contextlib.contextmanager
    def unpinned(self) -> Iterator[None]:
        """Run a block on any CPU, back on the test thread's after it: for starting a thread or a
        process, which would otherwise inherit the pin."""
        cpu = self._cpu
        self.release()
        try:
            yield
        finally:
            if cpu is not None:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, {cpu})
                    self._cpu = cpu

    def close(self) -> None:
        """From the background thread, when it ends."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _last_cpu(stat: int) -> int:
    """The CPU a thread last ran on: field 39 of its ``stat`` (after the command name, which may hold
    spaces and parentheses, so counted from the last ``)``)."""
    return int(os.pread(stat, 4096, 0).rsplit(b")", 1)[1].split()[36])
