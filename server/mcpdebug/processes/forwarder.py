"""`mcpdebug forward SOURCE`: a log file, a named pipe or stdin recorded as a live process session.

A file is followed like ``tail -F``: from its start (or its last ``--lines`` lines), through
rotation (the name now points at a new file: the old one is read to its end first, including what
its writer added just after the rename, then the new one from its start) and truncation (it shrank
below what was read: read again from its start). A missing file is waited for. A named pipe is kept
open across writers coming and going (the forwarder holds a write end itself, so the pipe never
reads as ended). Stdin is read to its end, which ends the session.

Lines go through the same `SessionClient` as `mcpdebug run`: spooled while no server is reachable,
sent once whatever happens to the server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Final

from mcpdebug.heap import keep_freed_buffers
from mcpdebug.processes.child import PARTIAL_FLUSH, READ_SIZE
from mcpdebug.processes.say import stderr_say
from mcpdebug.processes.session_client import SessionClient
from pytest_mcpdebug.limits import MAX_LINE_LENGTH
from pytest_mcpdebug.output.lines import LineSplitter

# Timeouts
POLL: Final = 0.1
"""How often a followed file is looked at once it has been read to its end."""
ROTATION_DRAIN: Final = 0.3
"""After a rotation, how long the old file is still read (its writer may not have reopened yet)."""


class Feed:
    """Cuts a source's bytes into lines for the session; stores an unfinished line left waiting."""

    def __init__(self, session: SessionClient, limit: int) -> None:
        self.session = session
        self.splitter = LineSplitter(limit)
        self.held_since: float | None = None

    def feed(self, data: bytes) -> None:
        block, count = self.splitter.feed(data)
        self.session.lines("stdout", block, count)
        if not self.splitter.holding:
            self.held_since = None
        elif self.held_since is None:
            self.held_since = time.monotonic()

    def idle(self) -> None:
        if self.held_since is not None and time.monotonic() - self.held_since >= PARTIAL_FLUSH:
            self.flush()

    def flush(self) -> None:
        block, count = self.splitter.flush()
        self.session.lines("stdout", block, count)
        self.held_since = None


class Forwarder:
    def __init__(
        self, source: str, session: SessionClient, *, last_lines: int | None, max_line_length: int
    ) -> None:
        self.source = source
        self.session = session
        self.last_lines = last_lines
        self.feed = Feed(session, max_line_length)
        self.stop = threading.Event()
        self.say = session.say

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stop.set())
        self.session.start()
        self.session.status("running", message=f"forwarding {_describe(self.source)}")
        reason = "stopped by a signal"
        try:
            if self.source == "-":
                reason = self._stream(sys.stdin.fileno(), "its input ended")
            elif _is_fifo(self.source):
                reason = self._fifo()
            else:
                reason = self._file()
        finally:
            self.feed.flush()
            self.session.status("stopped", message=reason, ended=True)
            self.session.close()
        return 0

    # Sources --------------------------------------------------------------------------------------

    def _stream(self, fd: int, at_end: str) -> str:
        """Read a pipe (stdin) until it ends or the forwarder is stopped."""
        while not self.stop.is_set():
            ready, _, _ = select.select([fd], [], [], POLL)
            if ready:
                try:
                    data = os.read(fd, READ_SIZE)
                except OSError as exc:
                    return f"reading failed: {exc.strerror}"
                if not data:
                    return at_end
                self.feed.feed(data)
            else:
                self.feed.idle()
        return "stopped by a signal"

    def _fifo(self) -> str:
        fd = os.open(self.source, os.O_RDONLY | os.O_NONBLOCK)
        keep_open = os.open(self.source, os.O_WRONLY)  # so writers can come and go
        try:
            os.set_blocking(fd, True)
            return self._stream(fd, "the pipe ended")
        finally:
            os.close(fd)
            os.close(keep_open)

    def _file(self) -> str:
        current = self._open_file(first=True)
        while not self.stop.is_set():
            if current is None:
                self.stop.wait(POLL)
                current = self._open_file(first=False)
                continue
            data = current.read(READ_SIZE)
            if data:
                self.feed.feed(data)
                continue
            self.feed.idle()
            change = _change(self.source, current)
            if change == "rotated":
                self._drain(current)
                current.close()
                current = self._open_file(first=False)
                if self.say is not None:
                    self.say(f"{self.source} was rotated; following the new file")
            elif change == "truncated":
                self.feed.flush()
                current.seek(0)
                if self.say is not None:
                    self.say(f"{self.source} was truncated; reading it again from its start")
            else:
                self.stop.wait(POLL)
        if current is not None:
            current.close()
        return "stopped by a signal"

    def _open_file(self, *, first: bool) -> BinaryIO | None:
        try:
            handle = open(self.source, "rb")  # noqa: SIM115 - kept open while it is followed
        except FileNotFoundError:
            return None
        if first and self.last_lines is not None:
            handle.seek(_tail_offset(handle, self.last_lines))
        return handle

    def _drain(self, old: BinaryIO) -> None:
        """Read the rest of a rotated file, giving its writer a moment to finish with it."""
        deadline = time.monotonic() + ROTATION_DRAIN
        while True:
            data = old.read(READ_SIZE)
            if data:
                self.feed.feed(data)
            elif time.monotonic() >= deadline:
                break
            else:
                time.sleep(POLL / 2)
        self.feed.flush()


def _change(path: str, handle: BinaryIO) -> str:
    """ "rotated" (the name is another file now), "truncated" (shorter than what was read) or ""."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return ""  # renamed away and not yet recreated: keep reading the old file
    mine = os.fstat(handle.fileno())
    if (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev):
        return "rotated"
    if mine.st_size < handle.tell():
        return "truncated"
    return ""


def _tail_offset(handle: BinaryIO, lines: int) -> int:
    """Where the last ``lines`` complete lines of a file start."""
    end = handle.seek(0, os.SEEK_END)
    if lines <= 0:
        return end
    position, found = end, -1
    while position > 0:
        size = min(65536, position)
        position -= size
        handle.seek(position)
        chunk = handle.read(size)
        if position + size == end and chunk.endswith(b"\n"):
            chunk = chunk[:-1]
        index = len(chunk)
        while True:
            index = chunk.rfind(b"\n", 0, index)
            if index < 0:
                break
            found += 1
            if found == lines - 1:
                return position + index + 1
    return 0


def _is_fifo(path: str) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISFIFO(os.stat(path).st_mode)
    return False


def _describe(source: str) -> str:
    if source == "-":
        return "stdin"
    return f"{'named pipe' if _is_fifo(source) else 'file'} {os.path.abspath(source)}"


def main(args: argparse.Namespace, directory: Path) -> int:
    """`mcpdebug forward`, from its parsed arguments (see `mcpdebug.cli`)."""
    source: str = args.source
    if source != "-" and os.path.isdir(source):
        print(
            f"mcpdebug forward: {source} is a folder; give a file, a named pipe or - for stdin",
            file=sys.stderr,
        )
        return 2
    keep_freed_buffers()
    session = SessionClient(
        mode="forward",
        directory=directory,
        cwd=os.getcwd(),
        label=args.label or "",
        source=source if source == "-" else os.path.abspath(source),
        server_url=args.server_url or os.environ.get("MCPDEBUG_URL") or None,
        token=os.environ.get("MCPDEBUG_TOKEN") or None,
        say=None if args.quiet else stderr_say("mcpdebug forward"),
    )
    forwarder = Forwarder(source, session, last_lines=args.lines, max_line_length=MAX_LINE_LENGTH)
    return forwarder.run()
