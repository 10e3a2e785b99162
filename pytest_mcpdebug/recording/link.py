"""The sender's connection to the server: connecting, the server's frames, replaying the spool, closing.

A mixin of `sender.Sender`, which owns the state: this module keeps what comes back from the server
(acknowledgements, live-inspection requests, a lost or closed connection) apart from the delivery
of events, which stays in `sender`; and what the recorder reads of both (connected, spooled, dropped).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol.versions import MAX_MESSAGE_BYTES
from pytest_mcpdebug.record import Record
from pytest_mcpdebug.recording.connection import describe as _describe
from pytest_mcpdebug.recording.connection import open_connection
from pytest_mcpdebug.recording.spool import SpoolFile
from pytest_mcpdebug.recording.write_ahead import WriteAhead

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import Hello, Reply, Request, ServerFrame, Wire
    from pytest_mcpdebug.recording.channel import Channel

CLOSE_TIMEOUT: Final = 5.0
ACK_INTERVAL: Final = 1.0
"""How long the server may hold its acknowledgements (`Hello.ack_interval`): one wake-up a second of
this process's threads rather than one per message. Unacknowledged events stay in memory (bounded by
the sender's limits) and go to the spool if the connection is lost."""
BATCH_BYTES: Final = MAX_MESSAGE_BYTES // 4


class Identity(Record):
    """What a sender's `Hello` says of it, the hello itself built when a server is found: a run that
    only spools builds no frame (see `protocol.plain`)."""

    protocol: int
    run_id: str
    process: str
    worker: str
    pid: int


Discover = Callable[[], "tuple[str, str] | None"]
"""Returns the server's (url, token), or None when there is no server to connect to."""


class Link:
    """Connecting and what the server sends back (a mixin of `sender.Sender`, which sets these)."""

    _hello: Hello | Identity
    _discover: Discover
    _reconnect: tuple[float, float]
    _retry_delay: float
    _next_connect: float
    _had_server: bool
    _replayed: int
    _spool_path: Path
    _ws: Channel | None
    _ws_stack: contextlib.ExitStack
    _connected_url: str | None
    _connecting_url: str | None = None
    """The server of the latest connection attempt (what `close` names if the first never ended)."""
    server_protocol: int = 0
    """The protocol version the connected server speaks (its `Welcome`): from 3 on, it reads quiet
    passes' short records as they are."""
    _close_timeout: float
    _unacked: collections.deque[tuple[int, Wire]]
    _unacked_bytes: int
    _flush_lock: threading.Lock
    _stop: threading.Event
    _send_lock: threading.Lock
    spool: SpoolFile
    wal: WriteAhead
    acked: int
    warnings: list[str]
    on_request: Callable[[Request], None] | None
    on_disconnect: Callable[[], None] | None
    on_frame: Callable[[ServerFrame], None] | None

    def _send_lines(self, items: Sequence[tuple[int, Wire]]) -> None:
        raise NotImplementedError

    @property
    def connected_url(self) -> str | None:
        return self._connected_url

    @property
    def connected(self) -> bool:
        return self._ws is not None

    @property
    def spool_path(self) -> Path | None:
        return self._spool_path if self.spool.used else None

    @property
    def spooled(self) -> int:
        """Events written to the spool file."""
        return self.spool.written

    @property
    def dropped(self) -> int:
        """Events that could be neither sent nor spooled (see ``spool.problem``)."""
        return self.spool.dropped

    def _write_spool(self, lines: Sequence[Wire]) -> None:
        raise NotImplementedError

    def reply(self, reply: Reply) -> bool:
        """Answer a server request at once, from any thread; False if there is no connection."""
        ws = self._ws
        if ws is None:
            return False
        try:
            with self._send_lock:
                ws.send(protocol.encode(reply).decode())  # text: the server tells replies from events
        except Exception:
            return False  # the sender thread notices the lost connection on its next send or receive
        return True

    def _receive(self, timeout: float, *, until_acked: bool = False, also: Sequence[int] = ()) -> None:
        """Handle the server's frames (acks, requests) for up to ``timeout`` seconds (or until a
        descriptor of ``also`` is readable: a `ticker`'s poke)."""
        ws = self._ws
        if ws is None:
            return
        deadline = time.monotonic() + timeout
        try:
            while True:
                message = ws.recv(timeout=max(deadline - time.monotonic(), 0), also=also)
                frame = protocol.decode_server_frame(message)
                if isinstance(frame, protocol.Ack):
                    with self._flush_lock:  # a checkpoint may be adding to the unacknowledged
                        self._acknowledged(frame.seq)
                    if (until_acked and not self._unacked) or self._stop.is_set():
                        return  # closing: the ack of what `close` sent wakes the thread to finish
                elif isinstance(frame, protocol.Request):
                    self._handle_request(frame)
                elif self.on_frame is not None:
                    self.on_frame(frame)
        except TimeoutError:
            return
        except Exception as exc:
            with self._flush_lock:
                self._lost_connection(exc)

    def _acknowledged(self, seq: int) -> None:
        """Forget the unacknowledged events up to ``seq`` (they leave in ``seq`` order): usually all."""
        unacked = self._unacked
        if unacked and unacked[-1][0] <= seq:
            self.acked += len(unacked)
            unacked.clear()
            self._unacked_bytes = 0
            return
        while unacked and unacked[0][0] <= seq:
            self._unacked_bytes -= protocol.wire_size(unacked.popleft()[1])
            self.acked += 1

    def _handle_request(self, request: Request) -> None:
        handler = self.on_request
        if handler is None:
            self.reply(protocol.Reply(id=request.id, ok=False, error="this process holds no test"))
            return
        try:
            handler(request)
        except Exception as exc:  # never let a request break the sender
            self.reply(protocol.Reply(id=request.id, ok=False, error=f"internal error: {_describe(exc)}"))

    def _maybe_connect(self) -> None:
        now = time.monotonic()
        if now < self._next_connect:
            return
        self._next_connect = now + self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, self._reconnect[1])
        found = self._discover()
        if found is None:
            return
        url, token = found
        self._connecting_url = url
        mine = self._hello
        hello = protocol.Hello(
            protocol=mine.protocol,
            run_id=mine.run_id,
            process=mine.process,
            worker=mine.worker,
            pid=mine.pid,
            spool=self._spool_path.name if self.spool.used else None,
            ack_interval=ACK_INTERVAL,
        )
        try:
            ws, stack, welcome = open_connection(url, token, hello)
        except Exception as exc:
            if not self._had_server:
                self.warnings.append(f"server at {url} unreachable ({_describe(exc)})")
            self._had_server = True
            return
        self._ws = ws
        self._ws_stack = stack
        self._connected_url = url
        self.server_protocol = welcome.protocol
        self._had_server = True
        self._retry_delay = self._reconnect[0]
        if self.on_frame is not None:
            self.on_frame(welcome)
        if not welcome.spool_read and self.spool.used:
            self._replay_spool()

    def _lost_connection(self, exc: BaseException) -> None:
        """Everything unacknowledged goes to the spool. Both threads may meet the end (the test thread
        sends too): the loss is said, and the reconnection timed, once."""
        if self._ws is not None:
            url, self._ws, self._connected_url = self._connected_url, None, None
            with contextlib.suppress(Exception):
                self._ws_stack.close()
            self.warnings.append(f"lost the server at {url} mid-run ({_describe(exc)})")
            if self.on_disconnect is not None:
                self.on_disconnect()
            self._next_connect = time.monotonic() + self._reconnect[0]
            self._retry_delay = min(self._reconnect[0] * 2, self._reconnect[1])
        self._write_spool([line for _, line in self._unacked])
        self._unacked.clear()
        self._unacked_bytes = 0

    def _finish(self) -> None:
        if self._ws is not None:
            deadline = time.monotonic() + self._close_timeout
            while self._unacked and self._ws is not None and time.monotonic() < deadline:
                self._receive(0.1, until_acked=True)
            if self._unacked:  # the server did not confirm in time: keep a copy for later ingestion
                self._write_spool([line for _, line in self._unacked])
                self._unacked.clear()
                self._unacked_bytes = 0
            self._ws = None
            with contextlib.suppress(Exception):
                self._ws_stack.close()
        self._drop_wal()

    def _drop_wal(self) -> None:
        """Everything the write-ahead copy holds was acknowledged or spooled: it is not needed."""
        keep = not self.wal.used or bool(self.spool.dropped)
        self.wal.close(keep=keep)
        if not keep:
            with contextlib.suppress(OSError):
                self.wal.path.unlink()

    def _replay_spool(self) -> None:
        """Send what the spool file holds past `_replayed` over the new connection, a batch at a time,
        each acknowledged before the next, so memory stays bounded. Replayed events are unacknowledged
        like fresh ones: if the connection drops they go back to the spool and are replayed again."""
        try:
            end = self.spool.path.stat().st_size
            with open(self.spool.path, "rb") as spool:
                spool.seek(self._replayed)
                while self._ws is not None and spool.tell() < end:
                    lines = [
                        protocol.event_line(line.rstrip(b"\n"))
                        for line in spool.readlines(BATCH_BYTES)
                        if line.endswith(b"\n")
                    ]
                    if not lines:
                        break
                    if self._unacked:  # the batch before acknowledged first (a full one is, at once)
                        self._receive(CLOSE_TIMEOUT, until_acked=True)
                    with self._flush_lock:
                        self._send_lines([(_seq_of(line), line) for line in lines])
            if self._ws is not None:
                self._replayed = end
        except OSError as exc:
            self.warnings.append(f"cannot replay the spool file {self.spool.path} ({exc})")


@functools.cache
def _seq_decoder() -> Any:
    """Reads a spooled line's ``seq`` alone (built when a spool is first replayed)."""
    import msgspec

    class SeqProbe(msgspec.Struct):
        seq: int = 0

    return msgspec.json.Decoder(SeqProbe)


def _seq_of(line: bytes) -> int:
    import msgspec

    try:
        seq: int = _seq_decoder().decode(line).seq
    except msgspec.DecodeError:
        return 0
    return seq
