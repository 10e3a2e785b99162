"""The sender's WebSocket (`channel`: websockets' sans-I/O protocol over our socket) against a real
websockets server on port 0: the handshake and its token, messages in fragments both ways, the
server's pings, timeouts, and both ends of the closing handshake."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import queue
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidState, InvalidStatus
from websockets.sync.server import ServerConnection, serve

from pytest_mcpdebug.recording.channel import Channel, open_channel

TOKEN = "s3cret"
PATIENCE = 30.0
"""Deadline for what is prompt unless the machine is very loaded: waits end as soon as it happens."""


class Peer:
    """A websockets server that checks the bearer token and runs ``script`` with each connection; what
    the script puts in ``seen`` (and how the connection ended) is for the test to check."""

    def __init__(self, script: Callable[[ServerConnection, queue.Queue[Any]], None]) -> None:
        self.seen: queue.Queue[Any] = queue.Queue()

        def handle(ws: ServerConnection) -> None:
            try:
                script(ws, self.seen)
            finally:
                received = ws.protocol.close_rcvd
                self.seen.put(("closed", None if received is None else received.code))

        def check_token(ws: ServerConnection, request: Any) -> Any:
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return ws.respond(401, "a token is required\n")
            return None

        self._server = serve(handle, "127.0.0.1", 0, process_request=check_token)
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def connect(self, token: str = TOKEN) -> Channel:
        return open_channel(
            self.url, {"Authorization": f"Bearer {token}"}, timeout=PATIENCE, max_size=1 << 20
        )

    def next(self, timeout: float = PATIENCE) -> Any:
        return self.seen.get(timeout=timeout)

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


@pytest.fixture
def peer_with() -> Iterator[Callable[[Callable[[ServerConnection, queue.Queue[Any]], None]], Peer]]:
    peers: list[Peer] = []

    def start(script: Callable[[ServerConnection, queue.Queue[Any]], None]) -> Peer:
        peers.append(Peer(script))
        return peers[-1]

    yield start
    for peer in peers:
        peer.close()


def echo(ws: ServerConnection, seen: queue.Queue[Any]) -> None:
    for message in ws:
        seen.put(message)
        ws.send(message)


def test_a_wrong_token_is_the_servers_401(peer_with: Any) -> None:
    peer = peer_with(echo)
    with pytest.raises(InvalidStatus, match="HTTP 401"):
        peer.connect(token="wrong")


def test_messages_both_ways_and_in_fragments(peer_with: Any) -> None:
    """Text and binary messages, and a binary one sent as frames of memoryviews (what the sender does
    with big batches), arrive whole; the server's fragmented message comes back joined."""

    def script(ws: ServerConnection, seen: queue.Queue[Any]) -> None:
        for _ in range(4):
            seen.put(ws.recv())
        ws.send(iter(["first half, ", "second half"]))  # a fragmented text message
        ws.send(b"\x00binary")
        with contextlib.suppress(ConnectionClosed):
            ws.recv()  # until the client closes

    peer = peer_with(script)
    with peer.connect() as channel:
        channel.send("hello")
        channel.send(b"\x01\x02")
        big = bytes(range(256)) * 4096  # 1 MiB in frames of 64 KiB
        view = memoryview(big)
        channel.send(view[i : i + 65536] for i in range(0, len(big), 65536))
        channel.send(iter([]))  # no pieces at all: an empty binary message
        assert [peer.next() for _ in range(4)] == ["hello", b"\x01\x02", big, b""]
        assert channel.recv(timeout=PATIENCE) == "first half, second half"
        assert channel.recv(timeout=PATIENCE) == b"\x00binary"
    assert peer.next() == ("closed", 1000)  # our close() did the closing handshake


def test_recv_times_out_and_answers_pings_while_it_waits(peer_with: Any) -> None:
    def script(ws: ServerConnection, seen: queue.Queue[Any]) -> None:
        pong = ws.ping(b"are you there")
        seen.put(("pong", pong.wait(PATIENCE)))
        with contextlib.suppress(ConnectionClosed):
            ws.recv()  # until the client closes

    peer = peer_with(script)
    with peer.connect() as channel:
        deadline = time.monotonic() + PATIENCE
        while peer.seen.empty():  # the ping is answered in a receive (one that waits for the server)
            start = time.monotonic()
            with pytest.raises(TimeoutError):
                channel.recv(timeout=0.3)
            assert time.monotonic() - start >= 0.3 - 0.05  # not before its time
            assert time.monotonic() < deadline, "the server's ping was never answered"
        assert peer.next() == ("pong", True)


def test_the_servers_close_ends_recv_and_send(peer_with: Any) -> None:
    def script(ws: ServerConnection, seen: queue.Queue[Any]) -> None:
        ws.send("last words")
        ws.close(1008, "policy")

    peer = peer_with(script)
    channel = peer.connect()
    assert channel.recv(timeout=PATIENCE) == "last words"  # what came before the close is still read
    with pytest.raises(ConnectionClosed) as closed:
        channel.recv(timeout=PATIENCE)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    with pytest.raises(InvalidState):  # the connection is closed
        channel.send("too late")
    channel.close()


def test_another_thread_sends_while_the_receiver_waits(peer_with: Any) -> None:
    """A held test's reply goes out from the test thread while the sender thread sits in recv."""
    peer = peer_with(echo)
    with peer.connect() as channel:
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.append(channel.recv(timeout=PATIENCE)))
        reader.start()
        time.sleep(0.1)
        channel.send("from another thread")
        reader.join(PATIENCE)
        assert got == ["from another thread"] and peer.next() == "from another thread"


def test_wake_ends_a_wait_at_once(peer_with: Any) -> None:
    """`wake` makes a receive waiting in another thread return (the sender's close), and one that
    comes after it return at once; the connection carries on."""
    peer = peer_with(echo)
    with peer.connect() as channel:
        woken: list[float] = []

        def wait() -> None:
            start = time.monotonic()
            with pytest.raises(TimeoutError, match="woken"):
                channel.recv(timeout=30.0)
            woken.append(time.monotonic() - start)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        channel.wake()
        waiter.join(PATIENCE)
        assert len(woken) == 1 and woken[0] < 25.0  # woken, not at its 30 s timeout
        channel.wake()
        with pytest.raises(TimeoutError, match="woken"):
            channel.recv(timeout=30.0)
        channel.send("still open")
        assert channel.recv(timeout=PATIENCE) == "still open"


def test_wss_with_the_systems_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wss:// URL (a TLS proxy in front of the server): the handshake verifies the certificate with
    the system's trust (here a certificate authority of the test's own, through SSL_CERT_FILE), and a
    burst of messages is all received, each as soon as it is asked for."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)

    sent = threading.Event()

    def burst(ws: ServerConnection) -> None:
        for i in range(3):
            ws.send(f"message {i}")
        sent.set()  # written to the loopback socket: all three wait on the client's side
        with contextlib.suppress(ConnectionClosed):
            ws.recv()

    server = serve(burst, "127.0.0.1", 0, ssl=context)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"wss://127.0.0.1:{server.socket.getsockname()[1]}/"
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            open_channel(url, {}, timeout=PATIENCE, max_size=1 << 20)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
        with open_channel(url, {}, timeout=PATIENCE, max_size=1 << 20) as channel:
            assert sent.wait(PATIENCE)  # all three arrive before the first read
            # each is read when asked for: a record decrypted but unread would wait out the timeout
            assert [channel.recv(timeout=PATIENCE) for _ in range(3)] == [f"message {i}" for i in range(3)]
    finally:
        server.shutdown()
