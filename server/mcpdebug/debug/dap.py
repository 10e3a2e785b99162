"""A DAP client over one TCP connection to debugpy (pydevd's in-process adapter), on asyncio.

Requests are matched to responses by ``seq``; events go to one callback, in order, on the event
loop. debugpy answers some requests only after others (an ``attach`` is answered after
``configurationDone``), so `send` returns the pending response instead of waiting for it, and
`request` is `send` plus the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any, Final

# Limits
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""A DAP message longer than this is a broken peer, not a large variable (debugpy cuts values)."""
# Timeouts
REQUEST_TIMEOUT: Final = 30.0

EventHandler = Callable[[str, dict[str, Any]], None]


class DapError(Exception):
    """A request debugpy refused or could not answer; the message is debugpy's own."""


class DapClosed(DapError):
    """The connection to the debuggee ended (it exited, crashed or was killed)."""


class DapClient:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_event: EventHandler
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_event = on_event
        self._seq = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        self.closed = asyncio.Event()

    @classmethod
    async def connect(cls, host: str, port: int, on_event: EventHandler, timeout: float = 10.0) -> DapClient:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=MAX_MESSAGE_BYTES), timeout
        )
        return cls(reader, writer, on_event)

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> asyncio.Future[dict[str, Any]]:
        """Send a request now; the future resolves to the response's body (or raises `DapError`)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.closed.is_set():
            future.set_exception(DapClosed("the debuggee's connection is closed"))
            return future
        seq = next(self._seq)
        self._pending[seq] = future
        message: dict[str, Any] = {"seq": seq, "type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        body = json.dumps(message).encode()
        self._writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return future

    def tell(self, command: str, arguments: dict[str, Any] | None = None) -> None:
        """Send a request whose answer nobody waits for (it may never come: the debuggee is exiting)."""
        self.send(command, arguments).add_done_callback(_consume)

    async def request(
        self, command: str, arguments: dict[str, Any] | None = None, timeout: float = REQUEST_TIMEOUT
    ) -> dict[str, Any]:
        future = self.send(command, arguments)
        try:
            return await asyncio.wait_for(future, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise DapError(f"debugpy did not answer {command} within {timeout:g} s") from None

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        self._fail_pending()

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await self._read_message()
                if message is None:
                    break
                kind = message.get("type")
                if kind == "response":
                    future = self._pending.pop(message.get("request_seq", -1), None)
                    if future is None or future.done():
                        continue
                    if message.get("success"):
                        future.set_result(message.get("body") or {})
                    else:
                        future.set_exception(DapError(_error_text(message)))
                elif kind == "event":
                    self._on_event(str(message.get("event")), message.get("body") or {})
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._fail_pending()

    async def _read_message(self) -> dict[str, Any] | None:
        length = None
        while True:
            line = await self._reader.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None or not 0 <= length <= MAX_MESSAGE_BYTES:
            raise ValueError(f"bad DAP header (Content-Length {length})")
        message: dict[str, Any] = json.loads(await self._reader.readexactly(length))
        return message

    def _fail_pending(self) -> None:
        self.closed.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(DapClosed("the debuggee's connection closed before it answered"))
        self._pending.clear()


def _consume(future: asyncio.Future[dict[str, Any]]) -> None:
    if not future.cancelled():
        future.exception()


def _error_text(message: dict[str, Any]) -> str:
    body = message.get("body") or {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("format"):
        return str(error["format"])
    return str(message.get("message") or f"{message.get('command')} failed")
