"""How a batch leaves the sender: taken from the queue, then sent over the connection or spooled.

A mixin of `sender.Sender` (built on `link.Link`, whose connection it sends on): the sender owns the
state and decides when a batch goes (its thread's wake-ups, a test's checkpoint); this module is what
happens to the batch then. Over the connection, events go packed, in messages of at most `BATCH_BYTES`
cut into frames of ``fragment_bytes``, and stay in memory until the server acknowledges them: held
*before* they are sent, so a connection lost half-way spools the whole batch, and past `MAX_UNACKED`
events or `MAX_UNACKED_BYTES` the oldest go to the spool as well. When the sender thread does not keep
up (or is wedged in a send), the caller spools what is queued itself (`_spool_overflow`), never waiting
for the delivery's lock.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol.plain import Encoded
from pytest_mcpdebug.protocol.versions import SHORT_RECORDS_VERSION
from pytest_mcpdebug.recording.link import BATCH_BYTES, Link
from pytest_mcpdebug.recording.wire import Ready, batches, fragments, json_of, packed, runs, spooled

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import Event, Wire

MAX_UNACKED: Final = 20_000
"""Events sent but not yet acknowledged before the oldest are also written to the spool."""
MAX_UNACKED_BYTES: Final = 64 * 1024 * 1024


class Delivery(Link):
    """Draining the queue, sending, spooling (a mixin of `sender.Sender`, which sets these)."""

    _pending: collections.deque[Event | Encoded]
    _pending_bytes: int
    _room: threading.Condition
    _ready: Ready
    fragment_bytes: int
    sent: int

    def _drain(self) -> list[Event | Encoded]:
        """Take what is queued. Two threads may drain at once (the test thread spools an overflow
        while the sender thread takes a batch): each pop is atomic, a check before it would not be."""
        batch = []
        pending = self._pending
        size = 0
        while True:
            try:
                event = pending.popleft()
            except IndexError:
                break
            if type(event) is not Encoded and type(event) is protocol.Output:
                size += event.size
            batch.append(event)
        if size:
            with self._room:
                self._pending_bytes -= size
                self._room.notify_all()
        return batch

    def _packed(self, ready: Ready) -> list[tuple[int, Wire]]:
        return packed(ready, short_records=self.server_protocol >= SHORT_RECORDS_VERSION)

    def _wired(self, batch: list[Event | Encoded]) -> list[tuple[int, Wire]]:
        """Queued events as they are sent: frames packed; `plain`'s as the JSON lines they are (a quiet
        pass's short record as `_packed` sends it)."""
        wired: list[tuple[int, Wire]] = []
        for event in batch:
            if type(event) is Encoded:
                wired += self._packed([(event.seq, event.line)])
            else:
                wired.append((event.seq, protocol.pack(event)))  # type: ignore[arg-type]
        return wired

    def _send_lines(self, items: Sequence[tuple[int, Wire]]) -> None:
        """Send events; whatever does not make it (the connection lost) ends in the spool."""
        # Held as unacknowledged *before* sending, so a failure half-way spools the whole batch.
        self._unacked.extend(items)
        wires = [item for _, item in items]
        sizes = protocol.wire_sizes(wires)
        self._unacked_bytes += sum(sizes)
        try:
            for batch in batches(wires, sizes, BATCH_BYTES):
                self._ws_send(batch)
            self.sent += len(items)
        except Exception as exc:
            self._lost_connection(exc)
            return  # the unacked events (this batch included) are now in the spool
        while len(self._unacked) > MAX_UNACKED or self._unacked_bytes > MAX_UNACKED_BYTES:
            item = self._unacked.popleft()[1]
            self._unacked_bytes -= protocol.wire_size(item)
            self._write_spool([item])

    def _ws_send(self, items: list[Wire]) -> None:
        """One binary message per run of items in one form: packed events (what `_flush` sends), or
        JSON lines (a replayed spool, a checkpoint's write-ahead lines)."""
        assert self._ws is not None
        with self._send_lock:
            for json, run in runs(items):
                message = b"\n".join(run) if json else protocol.packed_message(run)  # type: ignore[arg-type]
                self._ws.send(fragments(message, self.fragment_bytes))

    # Spool ----------------------------------------------------------------------------------------

    def _write_spool(self, lines: Sequence[Wire]) -> None:
        """``lines``: events in any form (unacknowledged ones are packed); the spool holds JSON."""
        self.spool.write([protocol.json_line(line) for line in lines])

    def _spool_overflow(self) -> None:
        """The sender thread is not keeping up (or is wedged): the caller writes to the spool itself
        (what a checkpoint left for the thread first: the spool stays in ``seq`` order). It holds the
        delivery's lock when that is free, never waiting for it (the thread may be stuck in a send)."""
        locked = self._flush_lock.acquire(blocking=False)
        try:
            ready, self._ready = self._ready, []
            self.spool.write(spooled(ready) + [json_of(e) for e in self._drain()])
        finally:
            if locked:
                self._flush_lock.release()
