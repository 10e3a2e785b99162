"""The sender's WebSocket: websockets' sans-I/O client protocol over a socket of our own.

websockets' threaded client (``websockets.sync``) starts a reader thread per connection and brings
~15 ms of imports into every test process that streams (``ssl``, and ``http.client`` and ``urllib``
for proxies, which a loopback connection never uses). The sender already has a thread that waits, for
the server's frames or for its next tick, so that thread reads the socket itself: the protocol
(handshake, framing, masking, pings, the closing handshake) is websockets', the I/O is ours.

Only the sender thread receives (`recv`); any thread may `send` (a checkpoint, a held test's reply).
Imported when a process first connects (`connection.open_connection`, `connection.preload`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Final

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosedError
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from pytest_mcpdebug import forks

Message = str | bytes
READ_BYTES: Final = 256 * 1024
"""Largest read from the socket (the server's frames are small: acknowledgements and requests). Over
TLS a read takes one whole record (at most 16 KB), so none waits decrypted where poll cannot see it."""

_QUIET = logging.getLogger("pytest_mcpdebug.channel")
_QUIET.disabled = True  # the protocol's debug lines would be a test's log records (and more frames)


class Channel:
    """An open WebSocket connection (`open_channel`): send from any thread, receive from one."""

    def __init__(self, sock: socket.socket, protocol: ClientProtocol) -> None:
        self.socket = sock
        self._protocol = protocol
        self._lock = threading.Lock()
        """The protocol's state and the socket's writes (a frame is written whole, by one thread)."""
        self._messages: collections.deque[Message] = collections.deque()
        with forks.owning():
            self._wake_r, self._wake_w = socket.socketpair()  # `wake`: a socket pair, select takes it
            forks.own(self._wake_r.fileno())
            forks.own(self._wake_w.fileno())
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._parts: list[bytes | bytearray | memoryview] = []
        self._text = False

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, message: Message | Iterable[bytes | memoryview]) -> None:
        """A text message (str), a binary one (bytes), or a binary one sent as frames of the given
        pieces (each is framed and written before the next is taken)."""
        protocol = self._protocol
        with self._lock:
            if isinstance(message, str):
                protocol.send_text(message.encode())
            elif isinstance(message, bytes | bytearray | memoryview):
                protocol.send_binary(message)
            else:
                first = True
                for piece in message:
                    if first:
                        protocol.send_binary(piece, fin=False)
                        first = False
                    else:
                        protocol.send_continuation(piece, fin=False)
                    self._write()
                if first:  # no pieces: an empty message
                    protocol.send_binary(b"")
                else:
                    protocol.send_continuation(b"", fin=True)
            self._write()

    def recv(self, timeout: float, *, also: Sequence[int] = ()) -> Message:
        """The server's next message; TimeoutError when none comes in ``timeout`` seconds (or a
        descriptor of ``also`` becomes readable first, left unread), websockets' ConnectionClosed when
        the connection is over."""
        deadline = time.monotonic() + timeout
        protocol = self._protocol
        while not self._messages:
            if protocol.state is State.CLOSED:
                raise protocol.close_exc
            ready = _readable([self.socket, self._wake_r, *also], deadline - time.monotonic())
            if self.socket not in ready:
                if protocol.state is State.CLOSING:  # the server never ended the TCP connection
                    raise ConnectionClosedError(protocol.close_rcvd, protocol.close_sent)
                if ready:  # woken
                    if self._wake_r in ready:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                    raise TimeoutError("woken before the server's next message")
                raise TimeoutError(f"no message from the server in {timeout:.3g} s")
            self._read()
        return self._messages.popleft()

    def wake(self) -> None:
        """Make a `recv` waiting in another thread return now (as a timeout), or the next one at once."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def close(self, timeout: float = 1.0) -> None:
        """The closing handshake (the server closes the TCP connection), then the socket."""
        try:
            with self._lock:
                if self._protocol.state is State.OPEN:
                    self._protocol.send_close(1000)  # a normal closure
                    self._write()
            deadline = time.monotonic() + timeout
            while self._protocol.state is not State.CLOSED:
                if not _readable([self.socket], deadline - time.monotonic()):
                    break
                self._read()
        except OSError:
            pass  # the connection is gone already: nothing left to close but the socket
        finally:
            self.discard()

    def discard(self) -> None:
        """Close the sockets, with no closing handshake."""
        for sock in (self.socket, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError, ValueError):
                forks.disown(sock.fileno())
            sock.close()

    def _read(self) -> None:
        data = self.socket.recv(READ_BYTES)
        protocol = self._protocol
        with self._lock:
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            self._write()  # pongs, the echo of the server's close
            events = protocol.events_received()
        for event in events:
            if isinstance(event, Frame):
                self._frame(event)

    def _frame(self, frame: Frame) -> None:
        opcode = frame.opcode
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            self._text, self._parts = opcode is Opcode.TEXT, [frame.data]
        elif opcode is Opcode.CONT:
            self._parts.append(frame.data)
        else:
            return  # ping (answered by the protocol), pong, close (the protocol's state)
        if frame.fin:
            data = b"".join(self._parts)
            self._parts = []
            self._messages.append(data.decode() if self._text else data)

    def _write(self) -> None:
        for data in self._protocol.data_to_send():
            if data:
                self.socket.sendall(data)
            else:  # the protocol's end of stream
                self.socket.shutdown(socket.SHUT_WR)


def open_channel(url: str, headers: dict[str, str], *, timeout: float, max_size: int) -> Channel:
    """Connect to ``url`` (ws:// or wss://) and complete the opening handshake in ``timeout`` seconds;
    raises OSError, TimeoutError or websockets' InvalidHandshake (e.g. a 401 for a wrong token)."""
    uri = parse_uri(url)
    deadline = time.monotonic() + timeout
    sock = _connect(uri.host, uri.port, timeout)
    channel: Channel | None = None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        if uri.secure:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
        protocol = ClientProtocol(uri, max_size=max_size, logger=_QUIET)
        request = protocol.connect()
        for name, value in headers.items():
            request.headers[name] = value
        protocol.send_request(request)
        channel = Channel(sock, protocol)
        channel._write()
        while protocol.state is State.CONNECTING and protocol.handshake_exc is None:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            channel._read()
        if protocol.handshake_exc is not None:
            raise protocol.handshake_exc
        sock.settimeout(None)  # from here on, waits are `recv`'s
    except BaseException:
        if channel is None:
            forks.disown(sock.fileno())
            sock.close()
        else:
            channel.discard()
        raise
    return channel


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """`socket.create_connection`, each socket owned (`forks`) as it is made: a child forked by a test
    must not keep the connection open. The connect itself is outside `forks.owning` (it may take long)."""
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        with forks.owning():
            sock = socket.socket(family, kind, proto)
            forks.own(sock.fileno())
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            forks.disown(sock.fileno())
            sock.close()
    raise error if error is not None else OSError(f"{host}:{port} resolves to no address")


def _readable(socks: list[socket.socket | int], timeout: float) -> list[socket.socket | int]:
    """Those of ``socks`` (sockets, or descriptors) that have data (or their end) to read within
    ``timeout`` seconds."""
    timeout = max(timeout, 0.0)
    if not hasattr(select, "poll"):  # Windows has no poll (and its select no limit on descriptors)
        return list(select.select(socks, [], [], timeout)[0])
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(timeout * 1000)}
    return [sock for sock in socks if (sock if isinstance(sock, int) else sock.fileno()) in ready]
