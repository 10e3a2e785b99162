"""Hostile peers of the ingest WebSocket, as hypothesis strategies, and a player that sends them.

Shared by `test_ingest_fuzz.py` (a few hundred peers in the suite) and `benchmarks/chaos_ingest.py`
(tens of thousands of frames over many connections). A peer is what one connection does: what it
says first (a hello, a broken one, or nothing), then messages built from a real-looking run of events
(`helpers.Events`) taken apart: lines truncated, fields of the wrong type, unknown tags, events out
of order and duplicated, events of another process, garbage bytes, JSON nested deep, replies to
requests never made, messages over the size limit; and how it leaves (a close, or a dropped socket).
Pre-handshake peers (raw TCP junk, wrong token, a browser Origin) are the `raw` kind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from helpers import NOW, Events
from mcpdebug.store import Store, output_query
from pytest_mcpdebug import protocol

Message = str | bytes
_QUIET = logging.getLogger("hostile_peers.client")
_QUIET.setLevel(logging.CRITICAL)

JUNK_VALUES: list[Any] = [
    None,
    True,
    "",
    "x" * 300,
    -1,
    0,
    2**63,
    -(2**63) - 1,
    2**200,
    1e308,
    -1e308,
    [],
    [1, "a", None],
    {},
    {"type": "hello"},
    "\udcff",
    "\x00\x01",
    "../../etc/passwd",
]


@dataclass
class Peer:
    """What one connection does. ``kind``: "ws" (after a WebSocket handshake) or "raw" (TCP)."""

    kind: str
    hello: Message | None
    messages: list[Message] = field(default_factory=list)
    drop: bool = False
    """Leave by dropping the socket, not with a close frame."""
    raw: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    """Override the token header (wrong token, browser Origin)."""

    @property
    def frames(self) -> int:
        return len(self.messages) + (self.hello is not None)


def valid_events(run_id: str, process: str, tests: int, lines: int) -> list[protocol.Event]:
    """A complete, valid recording of one process: what the hostile peer then takes apart."""
    events = Events(run_id, process=process, t0=NOW)
    out: list[protocol.Event] = [events.run_started(), events.start()]
    for i in range(tests):
        text = [f"line {j} of test {i}" for j in range(lines)]
        outcome = "failed" if i % 3 == 0 else "passed"
        out += events.test(f"test_f.py::test_{i}", outcome, [("call", "stdout", text)], "boom")
    return out + events.run_finished()


def _hello(run_id: str, process: str, **changes: Any) -> str:
    data: dict[str, Any] = {
        "type": "hello",
        "protocol": protocol.PROTOCOL_VERSION,
        "run_id": run_id,
        "process": process,
        "worker": "main",
        "pid": 4242,
    }
    data.update(changes)
    return json.dumps(data)


def _mutate(rng: random.Random, event: protocol.Event) -> Message:
    """One event, made wrong: a field of the wrong type, missing, extra, or an unknown tag."""
    data = _mutated_fields(rng, event)
    try:
        return json.dumps(data)
    except ValueError:  # a lone surrogate cannot be encoded: send it raw instead
        return json.dumps(data, ensure_ascii=True)


def _mutated_fields(rng: random.Random, event: protocol.Event) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(event)
    key = rng.choice(sorted(data))
    how = rng.randrange(5)
    if how == 0:
        data[key] = rng.choice(JUNK_VALUES)
    elif how == 1 and key != "type":
        del data[key]
    elif how == 2:
        data[f"extra_{rng.randrange(9)}"] = rng.choice(JUNK_VALUES)
    elif how == 3:
        data["type"] = rng.choice(["", "hello", "ack", "welcome", "request", "output2", 7, None])
    else:  # the numbers the store keys and offsets on, at their extremes
        for name in ("seq", "first", "stream_first", "count", "line", "exit_status", "events"):
            if name in data:
                data[name] = rng.choice([-1, 0, 2**63 - 1, -(2**63), 10**12])
    return data


def _garbage(rng: random.Random) -> Message:
    choice = rng.randrange(7)
    if choice == 0:
        return rng.randbytes(rng.randrange(1, 400))
    if choice == 1:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(1, 200)))
    if choice == 2:
        return "[" * rng.randrange(100, 100_000)
    if choice == 3:
        return '{"a":' * rng.randrange(100, 50_000)
    if choice == 4:
        return protocol.REPLY_PREFIX + rng.choice(
            [
                ',"id":1,"ok":true}',
                ',"id":"x"}',
                "",
                ',"id":2,"result":[]}',
                ',"id":-5,"ok":false,"error":"e"}',
            ]
        )
    if choice == 5:
        return "\n" * rng.randrange(1, 50) + " \t "
    return json.dumps(rng.choice(JUNK_VALUES))


@st.composite
def peers(draw: st.DrawFn, *, max_size: int = 1024 * 1024, oversized_rate: float = 0.02) -> Peer:
    """One hostile connection. ``max_size`` is the server's message limit; a message is over it with
    probability ``oversized_rate`` (they cost the machine their size each)."""
    rng = draw(st.randoms(use_true_random=False))
    kind = draw(st.sampled_from(["ws"] * 9 + ["raw"]))
    if kind == "raw":
        return Peer("raw", None, raw=_raw_request(rng), headers=_bad_headers(rng))
    run_id = rng.choice([f"fuzz-{rng.randrange(10**9):09d}"] * 6 + ["..", ".", "../../x", "a/b", "é", ""])
    process = rng.choice(["main-1", "gw0-7", "x" * 200, "", "../p"])
    events = valid_events(run_id, process, tests=rng.randrange(0, 5), lines=rng.randrange(0, 30))
    hello_kind = rng.randrange(10)
    hello: Message | None
    if hello_kind < 6:
        hello = _hello(run_id, process)
    elif hello_kind == 6:
        hello = _hello(run_id, process, protocol=rng.choice([0, 2, -1, 2**70]))
    elif hello_kind == 7:
        hello = _hello(
            run_id, process, spool=rng.choice(["../../x.jsonl", "/etc/passwd", "a/b", ".x", "none"])
        )
    elif hello_kind == 8:
        hello = _mutate(rng, events[0])
    else:
        hello = None
    # hypothesis's randoms lean to extremes, which suits the rest; messages over the limit cost their
    # size each, so whether one is sent is decided by an evenly spread draw
    sizes = random.Random(draw(st.integers(0, 2**32)))
    messages: list[Message] = []
    for _ in range(draw(st.integers(0, 12))):
        if sizes.random() < oversized_rate:
            messages.append("x" * (max_size + rng.randrange(1, 4096)))
        else:
            messages.append(_message(rng, events))
    return Peer("ws", hello, messages, drop=draw(st.booleans()))


def _message(rng: random.Random, events: list[protocol.Event]) -> Message:
    """One message: a batch of events taken apart in one of the ways a broken or hostile peer would."""
    what = rng.randrange(15)
    batch = rng.sample(events, k=min(len(events), rng.randrange(1, 8)))
    if what <= 2:  # valid events, out of order and duplicated
        return protocol.encode_lines(batch + batch[: rng.randrange(len(batch) + 1)]).decode()
    if what == 3:  # truncated mid-line
        data = protocol.encode_lines(batch)
        return data[: rng.randrange(1, len(data))]
    if what in (4, 5):  # one wrong field among good lines
        lines = [protocol.encode(e).decode() for e in batch]
        lines[rng.randrange(len(lines))] = _mutate(rng, rng.choice(batch))
        return "\n".join(lines)
    if what == 6:  # an event of another run or process on this connection
        other = msgspec.structs.replace(rng.choice(events), run_id="someone-else", process="p-9")
        return protocol.encode(other).decode()
    if what == 8:  # a second hello after the handshake
        return _hello("again", "again")
    if what == 9:
        return protocol.encode_lines(batch)  # the same events as a binary message
    if what == 12:  # packed, as the plugin streams them, output as raw bytes (some not UTF-8)
        return protocol.packed_message([protocol.pack(_raw(rng, e)) for e in batch])
    if what == 13:  # packed, one event made wrong
        items: list[Any] = [msgspec.to_builtins(e) for e in batch]
        items[rng.randrange(len(items))] = _mutated_fields(rng, rng.choice(batch))
        try:
            return msgspec.msgpack.encode(items)
        except (OverflowError, UnicodeEncodeError):  # what msgpack cannot hold (a huge int, a lone
            return json.dumps(items)  # surrogate) goes as JSON instead
    if what == 14:  # packed, cut short or with bytes after it
        data = protocol.packed_message([protocol.pack(e) for e in batch])
        return data[: rng.randrange(1, len(data))] if rng.random() < 0.7 else data + rng.randbytes(3)
    return _garbage(rng)


def _raw(rng: random.Random, event: protocol.Event) -> protocol.Event:
    if not isinstance(event, protocol.Output) or rng.random() < 0.3:
        return event
    data = event.text.encode()
    if rng.random() < 0.3:
        data = data.replace(b"e", b"\xff")
    return msgspec.structs.replace(event, text="", data=data)


def _raw_request(rng: random.Random) -> bytes:
    return rng.choice(
        [
            b"",
            b"GET / HTTP/1.1\r\n",  # cut short
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello's first bytes
            b"POST /mcp HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n{",
            rng.randbytes(rng.randrange(1, 2000)),
            b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
        ]
    )


def _bad_headers(rng: random.Random) -> dict[str, str]:
    return rng.choice(
        [
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Bearer "},
            {"Authorization": "Basic Zm9vOmJhcg=="},
            {"Origin": "http://evil.example"},
        ]
    )


@dataclass
class Outcome:
    frames: int = 0
    """Messages (and hellos) delivered to the server."""
    refused: int = 0
    """Connections refused before or at the handshake."""
    closed_by_server: int = 0


def play(peer: Peer, url: str, token: str, outcome: Outcome, *, timeout: float = 5.0) -> None:
    """Send what ``peer`` does to the server at ``url``; the server's refusals are the expected end."""
    if peer.kind == "raw":
        _play_raw(peer, url, token, outcome, timeout)
        return
    try:
        with connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            proxy=None,
            compression=None,
            open_timeout=timeout,
            close_timeout=1,
            max_size=None,
            logger=_QUIET,  # a dropped socket is this peer's doing, not news
        ) as ws:
            try:
                for message in ([peer.hello] if peer.hello is not None else []) + peer.messages:
                    ws.send(message)
                    outcome.frames += 1
            except ConnectionClosed:
                outcome.closed_by_server += 1
            if peer.drop:  # gone without a close frame, as a killed process goes
                with contextlib.suppress(OSError):
                    ws.socket.shutdown(socket.SHUT_RDWR)
                ws.socket.close()
    except (InvalidStatus, InvalidHandshake, OSError, TimeoutError):
        outcome.refused += 1


def _play_raw(peer: Peer, url: str, token: str, outcome: Outcome, timeout: float) -> None:
    """Junk before (or instead of) the HTTP upgrade, or an upgrade with a wrong token or an Origin."""
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout
        ) as sock:
            if peer.headers:  # a well-formed upgrade, with a wrong token or a browser's Origin
                headers = {"Authorization": f"Bearer {token}", **peer.headers}
                sock.sendall(
                    (
                        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                        + "\r\n"
                    ).encode()
                )
            else:
                sock.sendall(peer.raw)
            outcome.frames += 1
            with contextlib.suppress(OSError, TimeoutError):
                sock.settimeout(0.2)
                sock.recv(4096)
    except OSError:
        pass
    outcome.refused += 1


def stored_lines(store: Store, run_id: str, nodeid: str, stream: str = "stdout") -> list[str]:
    """Every line of one test's ``stream`` as the store has it (a gap would show as missing lines)."""
    unit = output_query.unit(store.db, run_id, nodeid)
    if unit is None:
        return []
    view = output_query.build_view(store.outputs, store.db, run_id, unit, stream=stream)
    return [line.text for line in view.lines(1, view.total) if line.number is not None]
