"""Waiting for a debug session to change: every change wakes every waiter, who checks what it waits for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Changes:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Something changed (a state, a stop, an event of debugpy's): wake everyone waiting."""
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, done: Callable[[], bool], deadline: float) -> None:
        """Until ``done()`` holds or the event loop's clock reaches ``deadline``."""
        loop = asyncio.get_running_loop()
        while not done() and loop.time() < deadline:
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), deadline - loop.time())
