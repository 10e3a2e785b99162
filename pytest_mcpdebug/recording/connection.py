"""The sender's WebSocket to the server: opening it (hello, welcome) and what it can take now.

Separate from `sender` so that module keeps to delivery: what goes where, in which order.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_mcpdebug import protocol

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import Hello, Welcome
    from pytest_mcpdebug.recording.channel import Channel

# Timeouts
CONNECT_TIMEOUT: Final = 2.0
"""How long a test process waits for its first connection attempt before its first test: the attempt
goes on past it, and the run streams from when it succeeds (what came before is written ahead)."""
HANDSHAKE_TIMEOUT: Final = 10.0
"""How long one connection attempt may take (TCP, the WebSocket upgrade, the welcome): a server on a
loaded machine answered in 2.4-3 s at a load average of 10 on 2 cores. A shorter limit spooled such a
run with an "unreachable" warning, and every retry met the same limit. A run whose failures wait to be
held (`--mcp-debug-break`) waits this long for its first attempt."""
# Limits
INLINE_SEND_BYTES: Final = 256 * 1024
"""Largest batch the test thread sends itself; a bigger one is left to the sender thread."""


def split_token(url: str) -> tuple[str, str]:
    """Accept ``ws://host:port/?token=T`` as well as a bare URL; returns (the URL without its token,
    token). The token goes in the connection's ``Authorization`` header, and the URL in warnings and
    the run's summary: a terminal or a CI log never shows the token."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    token = next((value for key, value in query if key == "token"), "")
    if not token:
        return url, ""
    rest = urlencode([(key, value) for key, value in query if key != "token"])
    return urlunsplit(parts._replace(query=rest)), token


def preload() -> None:
    """Import the WebSocket client (`channel`, websockets' sans-I/O protocol) and the frames (msgspec:
    the hello, the server's frames, packed events) now, in pytest's main thread before any test module
    is collected, past pytest's assertion rewriting (`quiet_import.own_modules`): a test process that
    has a server to stream to would import them in the sender thread's first connection attempt, which
    the main thread waits for anyway, paying the rewriting hook's look at each of their modules."""
    from pytest_mcpdebug.quiet_import import own_modules

    with own_modules():
        import pytest_mcpdebug.protocol.codec
        import pytest_mcpdebug.recording.channel  # noqa: F401


def open_connection(url: str, token: str, hello: Hello) -> tuple[Channel, contextlib.ExitStack, Welcome]:
    """Connect and shake hands; raises whatever went wrong (the caller turns it into a warning)."""
    from pytest_mcpdebug.quiet_import import collector_paused

    with collector_paused():
        from pytest_mcpdebug.recording.channel import open_channel

    stack = contextlib.ExitStack()
    try:
        ws = stack.enter_context(
            open_channel(
                url,
                {"Authorization": f"Bearer {token}"},
                timeout=HANDSHAKE_TIMEOUT,
                max_size=protocol.MAX_MESSAGE_BYTES,
            )
        )
        ws.send(protocol.encode(hello).decode())
        reply = protocol.decode_server_frame(ws.recv(timeout=HANDSHAKE_TIMEOUT))
        if not isinstance(reply, protocol.Welcome):
            raise protocol.ProtocolError(f"expected welcome, got {type(reply).__name__}")
    except BaseException:
        with contextlib.suppress(Exception):
            stack.close()
        raise
    return ws, stack, reply


def socket_has_room(ws: Channel, size: int) -> bool:
    """Whether ``size`` more bytes fit in the socket's send buffer now, so a send cannot block.

    Linux tells how much is still unsent (``TIOCOUTQ``); elsewhere the answer is no.
    """
    if size > INLINE_SEND_BYTES or sys.platform == "win32":
        return False
    import fcntl  # here: a run with no server never needs them
    import termios

    try:
        sock = ws.socket
        unsent = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        room = int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)) // 2 - int(unsent)
    except (OSError, AttributeError):
        return False
    return size < room


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
