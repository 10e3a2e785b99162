"""A worker on another machine: its events travel to the controller on an execnet channel.

An xdist worker started over ssh, a socket or in containers shares nothing with its controller but
execnet's connection: neither the `.mcpdebug/` folder (its spool there would stay on its host) nor,
usually, the server's loopback ingest. The controller opens a channel on each worker's gateway
(`relay`) and hands it over in ``workerinput``; a worker that finds the folder is not the
controller's (`reaches_store`) spools into that channel instead of a file (`ChannelSpool`), and the
controller delivers the lines as its own workers' are delivered: streamed to the server, or into its
spool. A worker that does reach the store never touches the channel, so a local run pays nothing.

The channel is the spool's stand-in, so everything the sender would spool goes through it: tests,
phases, output lines, snapshots, hangs, coverage's announcement (its data file follows with `ship`).
If the channel breaks, the rest is spooled to a file on the worker's host, and the worker says where.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_mcpdebug.recording.spool import SpoolFile

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.sender import Sender

FORCE_ENV: Final = "MCPDEBUG_WORKER_CHANNEL"
"""Set to 1 in the controller's environment: every worker sends through the channel, even one that
could reach the store (a file system shared under another name, or a measurement)."""
MARK_FILE: Final = ".gitignore"
"""The store folder's file whose identity (device, inode, modification time) tells a worker whether
the folder it sees is the controller's: written once when the folder is made, never changed."""
HELLO: Final = "hello"
EVENTS: Final = "events"
FILE: Final = "file"
"""The channel's messages, plain tuples (execnet carries no objects of ours): ``(HELLO, {run_id,
process, worker, pid, host})`` first, then ``(EVENTS, lines)`` (JSON lines joined by newlines, as
the spool holds them) and ``(FILE, path inside the store, bytes)``."""
MAX_FILE_BYTES: Final = 256 * 1024 * 1024
"""Largest file a worker ships (a coverage data file of a huge suite): bigger ones stay on its host."""


def store_mark(directory: Path) -> list[int] | None:
    """What identifies the store folder on this machine; None if it has no mark (not made yet)."""
    try:
        st = os.stat(directory / MARK_FILE)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_mtime_ns]


def controller_side(directory: Path) -> dict[str, Any]:
    """What the controller adds to ``workerinput["mcpdebug"]`` besides the channel."""
    forced = os.environ.get(FORCE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return {"store_mark": store_mark(directory), "via_controller": forced}


def reaches_store(shared: dict[str, Any], directory: Path) -> bool:
    """Whether this worker writes the controller's store itself (the folder it sees is the same)."""
    if shared.get("via_controller"):
        return False
    mark = shared.get("store_mark")
    return mark is None or store_mark(directory) == list(mark)


def send_through(sender: Sender, channel: Any) -> ChannelSpool:
    """This worker cannot reach the controller's store: what its sender would spool goes to the
    controller, each test's end at once (a pipe's write from the test thread: a write-ahead copy on
    this host would be of no use to the controller if this process were killed)."""
    hello = sender._hello
    spool = ChannelSpool(
        sender.spool.path,
        channel,
        {"run_id": hello.run_id, "process": hello.process, "worker": hello.worker, "pid": hello.pid},
    )
    sender.spool = spool
    sender.wal.problem = "a remote worker's events go to the controller at each test's end"
    return spool


def reachable(url: str | None) -> str | None:
    """The server URL a worker on another host may try itself: not a loopback one (that would be its
    own host's), which its controller streams to for it."""
    if url is None:
        return None
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    return None if host in ("localhost", "::1") or host.startswith("127.") else url


class ChannelSpool(SpoolFile):
    """The sender's spool in a worker that cannot reach the controller's store: each batch of lines
    is one message on the channel; once the channel is gone, a spool file on this host."""

    def __init__(self, path: Path, channel: Any, hello: dict[str, Any]) -> None:
        super().__init__(path)
        self._channel: Any = channel
        self.relayed = 0
        """Events sent through the channel."""
        self.broken: str | None = None
        """Why the channel stopped taking events, and where the rest went (for the run's summary)."""
        try:
            channel.send((HELLO, {**hello, "host": socket.gethostname()}))
        except Exception as exc:
            self._broke(exc)

    def write(self, lines: list[bytes]) -> bool:
        if not lines:
            return True
        if self._closed:
            return False  # a forked child (`in_child`), or a wedged thread after close
        channel = self._channel
        if channel is not None:
            try:
                channel.send((EVENTS, b"\n".join(lines)))
            except Exception as exc:
                self._broke(exc)
            else:
                self.relayed += len(lines)
                return True
        return super().write(lines)

    def ship(self, path: Path) -> None:
        """Send a file of the store the controller needs in its own (a coverage data file), before
        the events that name it are read there."""
        root = self.path.parent.parent  # the store: the spool is its spool/
        channel = self._channel
        if channel is None or self._closed:
            return
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                return
            data = path.read_bytes()
            channel.send((FILE, path.relative_to(root).as_posix(), data))
        except (OSError, ValueError):
            return
        except Exception as exc:
            self._broke(exc)

    def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None and not self._closed:
            with contextlib.suppress(Exception):
                channel.close()
        super().close()

    def _broke(self, exc: BaseException) -> None:
        """The channel is gone (the controller closed it, or its connection broke): spool here."""
        self._channel = None
        if not self._usable(self.path.parent):
            self.path = Path(tempfile.gettempdir()) / "mcpdebug-spool" / self.path.name
        where = f"{socket.gethostname()}:{self.path}"
        self.broken = (
            f"worker pid {os.getpid()} lost its channel to the controller ({type(exc).__name__}: {exc}); "
            f"it spooled the rest of its events to {where}: copy that folder's .jsonl files and add them "
            "with `mcpdebug merge`"
        )
        with contextlib.suppress(OSError):  # said now too: a worker whose channel broke may never report
            os.write(2, f"mcpdebug: warning: {self.broken}\n".encode())

    @staticmethod
    def _usable(folder: Path) -> bool:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return os.access(folder, os.W_OK)
