"""When a connection's stored events are acknowledged.

An `Ack` frame per message wakes the client's sender thread, which waits for frames between its
ticks (older clients: two threads, websockets' reader first), and on a two-core machine each wake-up
costs a test process running quick tests ~2 ms of its main thread (the GIL handed over and back
between cores): at ten messages a second that was a third of streaming's per-test cost. A client
that says so in its hello (``ack_interval``) is acknowledged at most that often instead, and never
later than that after an event was stored; at once when it says goodbye (`ProcessFinished`, which it
waits on to close) and after `ACK_BYTES` (so what it keeps unacknowledged stays bounded, and a spool
it replays, a batch acknowledged before the next, moves on at once). A client that does not ask gets
an ack per message.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from websockets.asyncio.server import ServerConnection

from pytest_mcpdebug import protocol

ACK_BYTES: Final = 4 * 1024 * 1024
"""Message bytes stored since the last ack past which the next is sent at once."""


class AckPacer:
    def __init__(self, ws: ServerConnection, interval: float) -> None:
        self.ws = ws
        self.interval = max(0.0, min(interval, 5.0))  # a client cannot make the server hold its acks long
        self._seq: int | None = None
        """The highest stored and not yet acknowledged seq."""
        self._bytes = 0
        self._sent_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    async def stored(self, seq: int, size: int, *, urgent: bool) -> None:
        """Events up to ``seq`` are stored (from a message of ``size`` bytes)."""
        self._seq, self._bytes = seq, self._bytes + size
        wait = self._sent_at + self.interval - self._loop.time()
        if urgent or wait <= 0 or self._bytes >= ACK_BYTES:
            await self.flush()
        elif self._timer is None:
            self._timer = self._loop.call_later(wait, self._due)

    async def flush(self) -> None:
        """Acknowledge what is stored now (nothing if it already was)."""
        self.cancel()
        if self._seq is None:
            return
        seq, self._seq, self._bytes = self._seq, None, 0
        self._sent_at = self._loop.time()
        await self.ws.send(protocol.encode(protocol.Ack(seq=seq)).decode())

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _due(self) -> None:
        self._timer = None
        task = self._loop.create_task(self._send_due())
        task.add_done_callback(_quiet)

    async def _send_due(self) -> None:
        with contextlib.suppress(Exception):  # closed meanwhile: its handler sees that and cleans up
            await self.flush()


def _quiet(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
