"""The spool file: where a test process appends its events when no server takes them.

One file per process, opened on first use and kept open for the run (``O_APPEND``: each batch is
one ``write``, so a process killed between two batches leaves whole lines). A write that fails part
way (a full disk) is cut back to the last whole line, and as many of the batch's events as still fit
are written one by one, so the next batch does not glue onto a broken line and a full disk keeps
what it has room for. Nothing here raises: a failure is counted and described once, for the run's
closing line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path
from typing import Final

from pytest_mcpdebug import forks
from pytest_mcpdebug.folder import SPOOL_SUFFIX

FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
RETRIED: Final = FULL | {errno.EINTR, errno.EAGAIN}
"""Failures that may go away during the run (space freed): later batches try again. Any other
(a file in the way, a read-only folder, no permission) stops the spool for the rest of the run."""


class SpoolFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        """Events written so far."""
        self.dropped = 0
        """Events that could not be written."""
        self.problem: str | None = None
        """Why events were dropped (the first failure), for the closing line."""
        self._fd: int | None = None
        self._size = 0
        self._lock = threading.Lock()
        self._closed = False
        self._gave_up = False
        self._used = False

    @property
    def used(self) -> bool:
        """Whether the file was created (it may hold events to ingest)."""
        return self._used

    def disable(self, problem: str) -> None:
        """The folder cannot be used at all (found before the run): count events as dropped."""
        self.problem, self._gave_up = problem, True

    def write(self, lines: list[bytes]) -> bool:
        """Append encoded events, one per line; False (and counted as dropped) if they were not written."""
        if not lines:
            return True
        with self._lock:
            if self._closed:
                return False  # a wedged thread waking up after close(): what it held was spooled then
            if self._gave_up:
                self.dropped += len(lines)
                return False
            try:
                if self._fd is None:
                    self._open()
                assert self._fd is not None
                _write_all(self._fd, b"\n".join(lines) + b"\n")
            except OSError as exc:
                if exc.errno not in FULL or len(lines) == 1:
                    self._failed(exc, len(lines))
                    return False
                return self._write_what_fits(lines)
            self._size += sum(map(len, lines)) + len(lines)
            self.written += len(lines)
            return True

    def _write_what_fits(self, lines: list[bytes]) -> bool:
        """A batch the disk has no room for: as many of its events as fit, one at a time (a batch is
        a tick's worth of tests: one that does not fit must not take the tests that do with it)."""
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)  # what the failed write left of a line
        for done, line in enumerate(lines):
            try:
                _write_all(self._fd, line + b"\n")
            except OSError as exc:
                self._failed(exc, len(lines) - done)
                return False
            self._size += len(line) + 1
            self.written += 1
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fd is not None:
                try:
                    forks.disown(self._fd)
                    os.close(self._fd)
                    if self._size == 0:  # opened, but nothing ever fitted: leave no empty file behind
                        self.path.unlink()
                except OSError:
                    pass
                self._fd = None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with forks.owning():  # opened from the sender's thread, maybe while the test forks
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            forks.own(self._fd)
        self._size = os.fstat(self._fd).st_size
        self._used = True

    def _failed(self, exc: OSError, count: int) -> None:
        self.dropped += count
        if self._fd is not None:
            with contextlib.suppress(OSError):  # a partial batch: cut it off, keep only whole lines
                os.ftruncate(self._fd, self._size)
        if self.problem is None:
            self.problem = describe_failure(exc, self.path)
        if exc.errno not in RETRIED:
            self._gave_up = True


def describe_failure(exc: OSError, path: Path) -> str:
    """Why a path could not be written, in words that say what to do about it."""
    where = _existing_blocker(path)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk holding {path.parent} is full ({exc.strerror}); free some space"
    if where is not None:
        return f"{where} is a file, not a folder; remove or rename it"
    if exc.errno == errno.EROFS:
        return f"{path.parent} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {exc.filename or path.parent}"
    return f"cannot write {exc.filename or path} ({exc.strerror or exc})"


def _existing_blocker(path: Path) -> Path | None:
    """The first parent of ``path`` that exists as something other than a folder."""
    for parent in reversed(path.parents):
        try:
            if parent.exists() and not parent.is_dir():
                return parent
        except OSError:
            return None
    return None


def _write_all(fd: int, data: bytes) -> None:
    """``write`` until every byte is written (a short write is retried from where it stopped)."""
    done = os.write(fd, data)
    if done < len(data):
        view = memoryview(data)
        while done < len(data):
            done += os.write(fd, view[done:])


def spool_file_name(run_id: str, process: str) -> str:
    """One spool file per process: ``<run id>.<process>.jsonl``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in process)
    return f"{run_id}.{safe}{SPOOL_SUFFIX}"
