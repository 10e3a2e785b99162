"""Knowing at once that a test wrote output, so a remote worker's line leaves when it is printed.

The output tail reads pytest's capture files when the sender thread wakes: a tick after a test
started and every tick after (`tail.TICK`), so a line waits up to a tick before it is read. A worker
that sends through its controller (`via_controller`) is meant to be live within 0.2 s at the far
end, where a tick was half of it. Linux says when a file is written (inotify): this module
watches pytest's capture files, and the `ticker` helper process, which already sleeps on the
running test's header, sleeps on the watch too and pokes the sender thread when a test old enough
wrote something (`ticker`'s ``o``). The test process itself never wakes for it: the watch is a
descriptor it hands to the helper, and only the helper reads it.

Only where output is pushed further (a worker sending through its channel): a local run keeps the
tick, which costs a passing suite nothing. Where inotify is missing (not Linux, no ``libc``, a
limit reached) nothing is watched and the tick is all there is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Final

from pytest_mcpdebug import forks

IN_MODIFY: Final = 0x00000002


class WriteWatch:
    """An inotify descriptor watching pytest's capture files for writes (one watch per file)."""

    def __init__(self, fd: int, add_watch: object) -> None:
        self.fd = fd
        """Readable when a watched file was written (non-blocking; read by the ticker helper only)."""
        self._add_watch = add_watch
        self._watched: set[tuple[int, int]] = set()

    @classmethod
    def start(cls) -> WriteWatch | None:
        """A new watch; None where the system has none."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            init, add_watch = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return None
        with forks.owning():  # a test's fork copies it not
            fd = int(init(os.O_NONBLOCK | os.O_CLOEXEC))
            if fd < 0:
                return None  # the user's instance limit reached
            forks.own(fd)
        return cls(fd, add_watch)

    def watch(self, capture_fd: int) -> bool:
        """Watch the file open at ``capture_fd`` (pytest's capture file, deleted already: reached
        through ``/proc/self/fd``); whether it is watched."""
        if self.fd < 0:
            return False
        try:
            st = os.fstat(capture_fd)
        except OSError:
            return False
        key = (st.st_dev, st.st_ino)
        if key in self._watched:
            return True
        path = f"/proc/self/fd/{capture_fd}".encode()
        if int(self._add_watch(self.fd, path, IN_MODIFY)) < 0:  # type: ignore[operator]
            return False
        self._watched.add(key)
        return True

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            forks.disown(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
