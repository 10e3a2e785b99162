"""Delivers events from a test process to the server, or to a spool file when there is none.

The test thread only appends to a deque (no lock, no wake-up, no I/O); a background thread drains it
every ``interval`` seconds, or at once when `poke`d (the controller's relay of a remote worker). With a
server it streams batches over WebSocket and keeps every event until the server acknowledges it; if the
connection drops, whatever was not acknowledged goes to the spool file, and the thread keeps retrying
the connection. Without a server every batch is appended to the spool. Where a `ticker` helper runs,
the thread sleeps until it says a test is a tick old (or a server appeared), or the server sends
something: the test thread delivers what the write-ahead copy holds itself at a test's end, appended to
the spool once a `SPOOL_INTERVAL` or streamed once an ``interval``. Delivery is at-least-once; the
server's ingestion is idempotent.

At each test's end the test thread calls `checkpoint`: what is still queued (the test's last lines,
its outcome) goes to the kernel there and then, so a process killed during the next test has lost
nothing of the tests before it: it is copied into a write-ahead file's mapping (``.wal``,
`write_ahead`), which the server reads only if this process dies, and the sender thread spools or
streams those events in its next batch (a write per test cost more than the rest of a passing
test's recording; a message per test would cost the server a transaction and the test process an
acknowledgement each). A clean end deletes the copy.

The same connection carries the server's `Request` frames for a held test (see `inspector.py`):
the sender thread hands each to ``on_request``, and the held test thread answers with `reply`.

Nothing here raises into the test process: failures become `warnings` the plugin prints once.

`Sender` is the queue, the thread and when a batch goes; how a batch goes (sent, or spooled, an
overflow too) is `delivery`'s, and the connection and what the server sends back `link`'s (mixins).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import WAL_SUFFIX
from pytest_mcpdebug.protocol.plain import Encoded
from pytest_mcpdebug.recording.colocate import Colocation
from pytest_mcpdebug.recording.connection import CONNECT_TIMEOUT, socket_has_room
from pytest_mcpdebug.recording.delivery import Delivery
from pytest_mcpdebug.recording.link import ACK_INTERVAL, CLOSE_TIMEOUT, Discover, Identity
from pytest_mcpdebug.recording.spool import SpoolFile
from pytest_mcpdebug.recording.ticker import SERVER_CHANGED
from pytest_mcpdebug.recording.wire import FRAGMENT_BYTES, Ready, json_of, spooled
from pytest_mcpdebug.recording.write_ahead import WriteAhead

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import Event, Hello, Request, ServerFrame, Wire
    from pytest_mcpdebug.recording.channel import Channel
    from pytest_mcpdebug.recording.ticker import Ticker

# Timeouts
FLUSH_INTERVAL: Final = 0.05
RECONNECT_INTERVAL: Final = 2.0
SPOOL_INTERVAL: Final = 1.0
"""How long events already in the write-ahead copy wait for the spool while nothing else does: they
are in the kernel already, and each write costs the test thread a hand-over of the GIL (the sender
thread releases it for the system call and waits to get it back)."""
CHECKPOINT_WAIT: Final = 0.05
"""How long a test's end waits for the sender thread's batch in flight before spooling its own."""
MIN_WAIT: Final = 0.001
"""Shortest sleep of the sender thread (`on_tick` asking for sooner than that gets that)."""
# Limits
MAX_PENDING: Final = 50_000
"""Events waiting for the sender thread before the test thread spools them itself."""
MAX_PENDING_BYTES: Final = 32 * 1024 * 1024
"""Output text waiting for the sender thread before `wait_for_room` holds back the output reader."""
BUSY_BYTES: Final = 1024 * 1024
"""Output delivered in one wake-up from which the sender counts as streaming (`busy_interval`): 20 MB/s
at the usual interval; a service logging steadily below that keeps the usual batches."""


class Sender(Delivery):
    def __init__(
        self,
        *,
        hello: Hello | Identity,
        spool_path: Path,
        discover: Discover,
        reconnect: tuple[float, float] = (RECONNECT_INTERVAL, RECONNECT_INTERVAL),
        interval: float = FLUSH_INTERVAL,
    ) -> None:
        """``reconnect``: the first and the longest wait between connection attempts; each failed
        attempt doubles the wait (a test process retries every 2 s; a process session backs off from
        1 s to 30 s, as seed 004 says). ``interval``: how often the thread wakes to send what is
        queued (and to call `on_tick`)."""
        self.interval = interval
        self.busy_interval = interval
        """How soon the thread wakes again after a wake-up that delivered `BUSY_BYTES` of output or
        more (a process session's output streaming: sent in small batches, see `session_client`)."""
        self.fragment_bytes = FRAGMENT_BYTES
        """Largest frame of a message (0: whole messages, for a process that keeps freed buffers)."""
        self._hello = hello
        self._reconnect = reconnect
        self._retry_delay = reconnect[0]
        self._replayed = 0
        """Bytes of the spool file already sent over a connection (to a server that could not read it)."""
        self._spool_path = spool_path
        self._discover = discover
        self._pending: collections.deque[Event | Encoded] = collections.deque()
        self._unacked: collections.deque[tuple[int, Wire]] = collections.deque()
        self._unacked_bytes = 0
        self._pending_bytes = 0
        self._bytes_lock = threading.Lock()
        self._room = threading.Condition(self._bytes_lock)
        self.spool = SpoolFile(spool_path)
        self.wal = WriteAhead(spool_path.with_suffix(WAL_SUFFIX))
        self._ready: Ready = []
        """Events already in the write-ahead copy, for the sender thread to stream or spool: (seq, the
        line the copy holds: the event's JSON line, or a quiet pass's short record)."""
        self._flush_lock = threading.Lock()
        """Held while a batch is drained and delivered, by the sender thread or a test's checkpoint:
        events leave in ``seq`` order, which the server's acknowledgements rely on."""
        self._ws: Channel | None = None
        self._ws_stack = contextlib.ExitStack()
        self._connected_url: str | None = None
        self._stop = threading.Event()
        self._poked = threading.Event()
        """Set by `poke` (and `finish`): the thread, sleeping without a server, delivers now."""
        self._first_attempt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcpdebug-sender", daemon=True)
        self._next_connect = 0.0
        self._spool_due = 0.0
        self._had_server = False
        self.started = False
        self._close_timeout = CLOSE_TIMEOUT
        self._send_lock = threading.Lock()
        self.sent = 0
        self.acked = 0
        """Events the server confirmed it stored (the others sent were spooled as well)."""
        self.warnings: list[str] = []
        self.on_request: Callable[[Request], None] | None = None
        """Called in the sender thread for each request of the server (live inspection)."""
        self.on_disconnect: Callable[[], None] | None = None
        self.on_tick: Callable[[], float | None] | None = None
        """Called in the sender thread before each batch: a test process's output tail reads there,
        so the process has one thread that wakes periodically, not two (each wake-up of a Python
        thread costs the test thread a GIL hand-off). It may return how soon it wants to be called
        again, when sooner than the interval."""
        self.on_frame: Callable[[ServerFrame], None] | None = None
        """Called in the sender thread with each `Welcome` and each server frame that is neither an
        ack nor a request (a process session's `Registered`)."""
        self._deliver_at = 0.0
        """When the test thread next delivers what waits written-ahead (`_deliver_ready`)."""
        self.ticker: Ticker | None = None
        """What wakes the thread besides the server: a helper process that says when a test is a tick
        old (`ticker`), so a run of quick tests wakes it not at all; None: it wakes every ``interval``."""
        self.start_ticker: Callable[[], Ticker | None] | None = None
        """Starts `ticker`: called by the thread after its first ``interval``, so a run shorter than
        that (one quick test) never starts the helper, and no run's test thread waits for its start."""
        self.later: Callable[[], None] | None = None
        """Called once by the thread after its first ``interval``, like `start_ticker`: work a run that
        is over sooner never needs (the recorder's faster encoding of quiet passes, which it leaves
        for the test thread to load: `Reporter.use_msgspec_soon`)."""
        self.poked_by = b""
        """What the `ticker`'s pokes of this wake-up said (``OUTPUT_WRITTEN``: `on_tick` reads now)."""
        self.colocation: Colocation | None = None
        """Keeps the thread on the CPU of the thread it serves while its work is light (a test process:
        see `colocate`); None: it runs anywhere (a process session's runner, whose reader and sender
        work in parallel)."""

    # Called from the test process's threads ---------------------------------------------------

    def start(self, wait: float = CONNECT_TIMEOUT) -> None:
        """Start the thread and wait (briefly) for its first connection attempt."""
        self.started = True
        self._thread.start()
        self.first_attempt(wait)

    def first_attempt(self, timeout: float = CONNECT_TIMEOUT) -> bool:
        """Wait (briefly) until the thread's first connection attempt is over; whether it is."""
        return self._first_attempt.wait(timeout) if timeout > 0 else self._first_attempt.is_set()

    def send(self, event: Event | Encoded) -> None:
        """Queue an event; never blocks on the network and never raises."""
        if type(event) is not Encoded and type(event) is protocol.Output:
            with self._bytes_lock:
                self._pending_bytes += event.size
        self._pending.append(event)
        if len(self._pending) > MAX_PENDING:
            self._spool_overflow()

    def poke(self) -> None:
        """Deliver what is queued now, not at the thread's next wake-up (the controller's relay, as each
        message of a remote worker arrives: that worker's sender delivered it at once already)."""
        self._poked.set()
        ws = self._ws
        if ws is not None:
            ws.wake()

    def wait_for_room(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Hold a producer of bulk output while the sender is far behind, so memory stays bounded.

        The output waits in pytest's capture file meanwhile. If the sender makes no room in time
        (a wedged server), the backlog goes to the spool instead.
        """
        with self._room:
            if self._pending_bytes <= MAX_PENDING_BYTES:
                return
            if self._room.wait_for(lambda: self._pending_bytes <= MAX_PENDING_BYTES, timeout):
                return
        self._spool_overflow()

    def checkpoint(self, *, now: bool = False) -> None:
        """From the test thread at a test's end: put everything queued in the kernel now.

        That is a copy into the write-ahead file's mapping (`WriteAhead`: no system call), and the
        sender thread spools or streams the events with its next batch. Without the copy, spooling
        writes the spool now; streaming sends on the socket when that cannot block (nothing older
        waits, the socket's buffer has room). If the sender thread is delivering a batch right now,
        wait for it briefly. ``now`` (a failure, which an agent waits for; a close): streaming, send
        what waits on the socket at once too, when that cannot block, not at the next wake-up.
        """
        if not self._pending and not (now and self._ready):
            if self.ticker is not None and self._ready and time.monotonic() >= self._deliver_at:
                self._deliver_ready()  # the thread sleeps while tests are quick: deliver from here
            return
        if not self._flush_lock.acquire(timeout=CHECKPOINT_WAIT):
            if not self._stop.is_set():
                self._spool_overflow()  # the sender thread is stuck in a send: never wait on the network
            return
        try:
            batch = self._drain()
            if not batch and not now:
                return
            items = [(e.seq, json_of(e)) for e in batch]
            lines = [line for _, line in items]
            copied = not lines or self.wal.write(lines)
            if self._ws is None:
                if copied:
                    self._ready += items
                else:
                    ready, self._ready = self._ready, []
                    self.spool.write(spooled(ready) + lines)  # JSON lines all
            elif (now or not copied) and socket_has_room(
                self._ws, sum(map(len, lines)) + sum(len(line) for _, line in self._ready)
            ):
                ready, self._ready = self._ready, []
                self._send_lines(self._packed([*ready, *items]))  # in seq order: what waited came first
            else:
                self._ready += items
        finally:
            self._flush_lock.release()

    def _deliver_ready(self) -> None:
        """What waits written-ahead, delivered by the test thread while the sender thread sleeps (a
        `ticker`): appended to the spool once a `SPOOL_INTERVAL`, or streamed once an ``interval`` when
        the socket has room for it (never a wait on the network: else the thread sends it when it
        wakes, for an acknowledgement or a poke, within `ACK_INTERVAL`)."""
        ws = self._ws
        if ws is None:
            self._flush(final=False)
            self._deliver_at = self._spool_due
            return
        if not self._flush_lock.acquire(blocking=False):
            return  # the thread is delivering a batch: these go with its next
        try:
            ready = self._ready
            if ready and self._ws is ws and socket_has_room(ws, sum(len(line) for _, line in ready)):
                self._ready = []
                self._send_lines(self._packed(ready))
            self._deliver_at = time.monotonic() + self.interval
        finally:
            self._flush_lock.release()

    def send_quick(self, seq: int, line: bytes) -> bool:
        """A quiet pass's end, from the reporter under the lock that numbers events: its short record
        copied into the write-ahead file at once when nothing older waits (what `send` and
        `checkpoint` do, without the queue or an event built: see `protocol.quick`); else its
        `TestFinished`, queued for the checkpoint. Returns whether the test's end is settled: True
        when the copy was made and no delivery is due, so a `checkpoint` now would do nothing (one
        call fewer at the end of almost every test); else the caller makes one, outside its lock.

        It takes no lock of the sender's: when the sender thread is delivering a batch meanwhile, that
        batch holds only older events (it took what waited), so this one goes with the next. (Waiting
        for that batch cost a test's end up to a GIL switch interval, 5 ms, a few times a run.)"""
        if self._pending or not self.wal.write_line(line):
            self._pending.append(Encoded(seq, line))
            return False
        self._ready.append((seq, line))
        return self.ticker is None or time.monotonic() < self._deliver_at

    def drained(self, timeout: float = 2 * FLUSH_INTERVAL) -> bool:
        """Wait (briefly) until the sender thread has taken everything queued so far."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self._pending

    def finish(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Start the end without waiting for it: what is queued is sent now, and the sender thread
        delivers the rest, waits for the server's acknowledgements (spooling what it does not confirm
        in ``timeout`` seconds) and closes, while the caller goes on (pytest writes its summary).
        Nothing may be sent after this; `close` waits for the end."""
        self._close_timeout = timeout
        self._stop.set()
        self._poked.set()
        if not self.started:
            return
        if self.ticker is not None:
            self.ticker.wake()
        ws = self._ws
        if ws is not None:
            self.checkpoint(now=True)
            ws.wake()  # the thread may sit in a receive until its next tick, with no ack to come

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Deliver everything queued (spooling what the server does not acknowledge in time)."""
        if not self._stop.is_set():
            self.finish(timeout)
        if not self.started:
            return
        self._thread.join(self._close_timeout + 1.0)
        if self._thread.is_alive():
            # Wedged in a send to a server that stopped reading: everything it holds goes to the spool
            # (the batch in flight is among the unacknowledged). Duplicates are harmless on ingest.
            self._spool_overflow()
            self._write_spool([item for _, item in list(self._unacked)])
            if self._connected_url is None:  # still in a connection attempt (`HANDSHAKE_TIMEOUT`)
                why = f"the server at {self._connecting_url} did not answer in time; the run was spooled"
            else:
                why = f"the server at {self._connected_url} stopped reading; the rest was spooled"
            self.warnings.append(why)
        self.spool.close()
        if self.ticker is not None:
            self.ticker.close()

    # Sender thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        if self.colocation is not None:
            self.colocation.follow()
        try:
            self._maybe_connect()
        finally:
            self._first_attempt.set()
        busy = False
        soon: float | None = None
        while not self._stop.is_set():
            colocation = self.colocation
            if colocation is not None and busy:  # bulk output: both CPUs at work
                colocation.release()
            elif colocation is not None:  # light work: next to the tests (`colocate`)
                colocation.follow()
            wait = self.busy_interval if busy else self.interval
            if soon is not None:
                wait = max(min(wait, soon), MIN_WAIT)
            # With a ticker, the helper says when a test is a tick old: `soon` is its to see.
            ticker = self.ticker if self.ticker is not None and self.ticker.alive and not busy else None
            self.poked_by = b""
            if self._ws is None and ticker is not None:
                self.poked_by = ticker.wait(self._retry_wait())
                if SERVER_CHANGED in self.poked_by:
                    self._next_connect = 0.0
            elif self._ws is None:
                self._poked.wait(wait)
                self._poked.clear()  # a poke from now on wakes the next wait: its events are queued
            elif ticker is not None:  # the test thread streams quick tests' ends (`_deliver_ready`)
                self._receive(ACK_INTERVAL, also=(ticker.fd,))  # an ack, a request or a poke wakes it
                self.poked_by = ticker.wait(0)
            else:
                self._receive(wait)  # wakes at once for a request of the server
            tick = self.on_tick
            soon = tick() if tick is not None else None
            busy = self._flush(final=False) >= BUSY_BYTES
            if self._ws is None and not self._stop.is_set():
                self._maybe_connect()
            if self.start_ticker is not None and not self._stop.is_set():
                start, self.start_ticker = self.start_ticker, None
                with colocation.unpinned() if colocation is not None else contextlib.nullcontext():
                    self.ticker = start()  # the helper must not inherit the test thread's CPU
            if self.later is not None and not self._stop.is_set():
                later, self.later = self.later, None
                with contextlib.suppress(Exception):  # nothing here may stop the delivery
                    later()
        if self.colocation is not None:  # the end's work runs alongside the test thread's
            self.colocation.release()
            self.colocation.close()
        self._flush(final=True)
        self._finish()

    def _retry_wait(self) -> float | None:
        """How long the thread may sleep for want of a poke: until the next connection attempt to a
        server that was found but not reached, else until poked (a ``server.json`` appearing is one)."""
        if self._stop.is_set():
            return 0.0
        if not self._had_server:
            return None
        return max(self._next_connect - time.monotonic(), MIN_WAIT)

    def _flush(self, *, final: bool) -> int:
        """Send or spool what is queued; returns the bytes of output it held. Without a server, what
        the write-ahead copy holds waits up to `SPOOL_INTERVAL` when nothing else does (``final``:
        never)."""
        with self._flush_lock:
            waits = self._ws is None and not self._pending and not final  # only written-ahead events
            if waits and time.monotonic() < self._spool_due:
                return 0
            ready, self._ready = self._ready, []
            batch = self._drain()
            if not batch and not ready:
                return 0
            if self._ws is not None:  # in seq order: ready came first
                self._send_lines([*self._packed(ready), *self._wired(batch)])
            else:
                self.spool.write(spooled(ready) + [json_of(e) for e in batch])  # JSON lines all
                self._spool_due = time.monotonic() + SPOOL_INTERVAL
            return sum(e.size for e in batch if type(e) is not Encoded and type(e) is protocol.Output)
