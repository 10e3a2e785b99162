"""The write-ahead copy (``<spool name>.wal``): what a test's end must leave in the kernel.

At each test's end the events still queued (its outcome, its last lines) must survive the process
being killed during the next test. A ``write`` to the spool there cost ~8 us a test on this machine's
ext4 (the system call, the GIL handed over and back, the inode's times), more than the rest of the
recording of a passing test. Here they are *copied* into a shared mapping of the file: the page is
the page cache's, so a killed process leaves it behind just as a written one, and the sender
thread writes them to the spool (or streams them) a tick later, in one batch.

The file grows a chunk at a time with ``posix_fallocate``, so a copy never lands on a page the disk
has no room for (which would be a SIGBUS, not an error); its end not yet written reads as NUL bytes,
which no encoded event holds, so a reader stops at the first. The server reads it only once its
process is gone without deleting it; a clean end deletes it. Where mapping is not possible (no
``posix_fallocate``, a full disk) `write` says so and the caller writes to the spool as before.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path
from typing import Final

from pytest_mcpdebug import forks

CHUNK: Final = 1024 * 1024
"""How much the file grows at a time (a few thousand tests' ends)."""


class WriteAhead:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.used = False
        """Whether the file was created (a process that dies leaves it for the server)."""
        self.problem: str | None = None
        """Why copies are not possible (then every `write` returns False)."""
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._size = 0
        self._mapped = 0
        self._lock = threading.Lock()
        self._closed = False

    def write(self, lines: list[bytes]) -> bool:
        """Copy encoded events in, one per line; False if they are not in the file."""
        return self.write_line(b"\n".join(lines))

    def write_line(self, line: bytes) -> bool:
        """Copy one encoded event in (or several, joined by newlines); False if it is not in the file."""
        data = line + b"\n"
        with self._lock:
            if self._closed or self.problem is not None:
                return False
            end = self._size + len(data)
            if end > self._mapped:
                try:
                    self._grow(end)
                except (OSError, ValueError, AttributeError) as exc:  # no fallocate (AttributeError)
                    self.problem = f"{type(exc).__name__}: {exc}"
                    return False
            assert self._map is not None
            self._map[self._size : end] = data
            self._size = end
            return True

    def close(self, *, keep: bool = True) -> None:
        """Unmap and cut the file to what was copied in (``keep``: else it is deleted by the caller, so
        the room it was grown by is freed with it, not first cut off)."""
        with self._lock:
            self._closed = True
            if self._map is not None:
                self._map.close()
                self._map = None
            if self._fd is not None:
                if keep:
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, self._size)
                forks.disown(self._fd)
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def _grow(self, end: int) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with forks.owning():
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
                forks.own(self._fd)
            self.used = True
        size = -(-max(end, self._mapped + CHUNK) // mmap.PAGESIZE) * mmap.PAGESIZE
        os.posix_fallocate(self._fd, self._mapped, size - self._mapped)
        grown = mmap.mmap(self._fd, size)
        if self._map is not None:
            self._map.close()
        self._map, self._mapped = grown, size
