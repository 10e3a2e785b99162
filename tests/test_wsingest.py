"""The WebSocket ingest endpoint, run in-process against real clients.

Every refusal is checked three ways: what the refused client sees (HTTP status or close code and
reason), that the server logged it (logger ``mcpdebug.ingest``), and that a well-behaved client
connected alongside, and a fresh one, still get their events stored and acknowledged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from helpers import NOW
from mcpdebug.ingest import websocket
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import spool_dir
from pytest_mcpdebug.protocol import PROTOCOL_VERSION, Ack, Event, Welcome

pytestmark = pytest.mark.anyio

MAX_SIZE = 64 * 1024
RUN = "run-ws"
LOGGER = "mcpdebug.ingest"
PATIENCE = 30.0
"""Deadline for what is prompt unless the machine is very loaded: waits end as soon as it happens."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# Helpers ----------------------------------------------------------------------------------------


def make_events(seqs: Sequence[int], run_id: str = RUN, process: str = "main-1") -> list[Event]:
    """Odd seq: test_started, even seq: test_finished, of test ``(seq + 1) // 2``."""
    events: list[Event] = []
    for seq in seqs:
        nodeid = f"test_mod.py::test_{(seq + 1) // 2}"
        if seq % 2 == 0:
            events.append(
                protocol.TestFinished(
                    run_id=run_id,
                    process=process,
                    seq=seq,
                    ts=NOW + seq,
                    nodeid=nodeid,
                    worker="main",
                    outcome="passed",
                    duration=0.5,
                )
            )
        else:
            events.append(
                protocol.TestStarted(
                    run_id=run_id, process=process, seq=seq, ts=NOW + seq, nodeid=nodeid, worker="main"
                )
            )
    return events


def hello_text(
    process: str, *, run_id: str = RUN, version: int = PROTOCOL_VERSION, spool: str | None = None
) -> str:
    frame = protocol.Hello(
        protocol=version, run_id=run_id, process=process, worker="main", pid=4242, spool=spool
    )
    return protocol.encode(frame).decode()


def batch_text(events: list[Event]) -> str:
    return protocol.encode_lines(list(events)).decode()


def stored_seqs(store: Store, process: str, run_id: str = RUN) -> list[int]:
    rows = store.db.execute(
        "SELECT seq FROM events WHERE run_id=? AND process=? ORDER BY seq", (run_id, process)
    ).fetchall()
    return [r[0] for r in rows]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client(server: IngestServer, *, token: str | None = None, url: str | None = None, **kw: Any) -> connect:
    headers = kw.pop("additional_headers", auth(server.token if token is None else token))
    return connect(
        url or server.url,
        additional_headers=headers,
        proxy=None,
        compression=None,
        open_timeout=PATIENCE,
        **kw,
    )


async def recv_frame(ws: ClientConnection) -> Welcome | Ack:
    with anyio.fail_after(PATIENCE):
        message = await ws.recv()
    return protocol.decode_server_frame(message)


async def handshake(ws: ClientConnection, process: str, **kw: Any) -> Welcome:
    await ws.send(hello_text(process, **kw))
    reply = await recv_frame(ws)
    assert isinstance(reply, Welcome), reply
    assert reply.protocol == PROTOCOL_VERSION
    return reply


async def expect_close(ws: ClientConnection) -> tuple[int, str]:
    """Wait for the server to close the connection; returns the code and reason it sent."""
    with pytest.raises(ConnectionClosed) as info:
        with anyio.fail_after(PATIENCE):
            while True:
                await ws.recv()
    assert info.value.rcvd is not None, f"no close frame received: {info.value!r}"
    return info.value.rcvd.code, info.value.rcvd.reason


async def wait_logged(caplog: pytest.LogCaptureFixture, *fragments: str) -> logging.LogRecord:
    """The server may log just after the client saw the refusal: poll briefly."""
    with anyio.fail_after(PATIENCE):
        while True:
            for record in caplog.records:
                if record.name == LOGGER and record.levelno >= logging.WARNING:
                    text = record.getMessage()
                    if all(f in text for f in fragments):
                        return record
            await anyio.sleep(0.01)


class Bystander:
    """A well-behaved client connected before the misbehaving one; checks the server still serves."""

    def __init__(self, server: IngestServer, ws: ClientConnection) -> None:
        self.server = server
        self.ws = ws
        self.process = "bystander-1"
        self.seq = 0
        self.fresh = 0

    async def send_and_confirm(self, ws: ClientConnection, process: str, first: int) -> None:
        events = make_events(range(first, first + 4), process=process)
        await ws.send(batch_text(events))
        ack = await recv_frame(ws)
        assert ack == Ack(seq=first + 3)
        assert stored_seqs(self.server.store, process)[-4:] == [first, first + 1, first + 2, first + 3]

    async def check(self) -> None:
        """The connection made before still works, and so does a brand new one."""
        await self.send_and_confirm(self.ws, self.process, self.seq + 1)
        self.seq += 4
        self.fresh += 1
        process = f"fresh-{self.fresh}"
        async with client(self.server) as ws:
            await handshake(ws, process)
            await self.send_and_confirm(ws, process, 1)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[IngestServer]:
    store = Store(tmp_path)
    ingest = IngestServer(store, max_size=MAX_SIZE)
    url = await ingest.start()
    assert url == f"ws://127.0.0.1:{ingest.port}/" and ingest.port != 0
    yield ingest
    await ingest.close()
    store.close()


@pytest.fixture
async def bystander(server: IngestServer, caplog: pytest.LogCaptureFixture) -> AsyncIterator[Bystander]:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with client(server) as ws:
        await handshake(ws, "bystander-1")
        by = Bystander(server, ws)
        await by.check()
        yield by


# Before the upgrade: token and Origin ----------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "logged"),
    [
        pytest.param(lambda token: {"Authorization": "Bearer nope"}, "wrong token", id="wrong-bearer"),
        pytest.param(lambda token: {}, "missing token", id="no-header"),
        pytest.param(lambda token: {"Authorization": "Bearer "}, "missing token", id="empty-bearer"),
        pytest.param(lambda token: {"Authorization": token}, "missing token", id="token-without-scheme"),
        pytest.param(lambda token: {"Authorization": f"Basic {token}"}, "missing token", id="basic-scheme"),
        pytest.param(lambda token: {"Authorization": f"Bearer {token}x"}, "wrong token", id="token-prefix"),
    ],
)
async def test_bad_token_is_refused_with_401(
    server: IngestServer,
    bystander: Bystander,
    caplog: pytest.LogCaptureFixture,
    headers: Callable[[str], dict[str, str]],
    logged: str,
) -> None:
    with pytest.raises(InvalidStatus) as info:
        async with client(server, additional_headers=headers(server.token)):
            pass
    assert info.value.response.status_code == 401
    assert b"token" in info.value.response.body
    await wait_logged(caplog, "refused", logged)
    assert "nope" not in caplog.text and server.token not in caplog.text  # tokens are not logged
    await bystander.check()


async def test_token_in_query_is_accepted(server: IngestServer, bystander: Bystander) -> None:
    async with client(server, url=f"{server.url}?token={server.token}", additional_headers={}) as ws:
        await handshake(ws, "query-1")
        await ws.send(batch_text(make_events([1, 2], process="query-1")))
        assert await recv_frame(ws) == Ack(seq=2)
    assert stored_seqs(server.store, "query-1") == [1, 2]
    await bystander.check()


async def test_wrong_token_in_query_is_refused(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InvalidStatus) as info:
        async with client(server, url=f"{server.url}?token=nope", additional_headers={}):
            pass
    assert info.value.response.status_code == 401
    await wait_logged(caplog, "refused", "wrong token")
    await bystander.check()


@pytest.mark.parametrize("origin", ["http://localhost:8000", "https://evil.example", "null"])
async def test_any_origin_is_refused_with_403(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture, origin: str
) -> None:
    # The right token does not help: a browser page must never feed the store.
    with pytest.raises(InvalidStatus) as info:
        async with client(server, origin=origin):
            pass
    assert info.value.response.status_code == 403
    record = await wait_logged(caplog, "refused", "Origin")
    assert origin in record.getMessage()
    await bystander.check()


# The handshake -----------------------------------------------------------------------------------


async def test_first_frame_not_a_hello_closes_1008(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    async with client(server) as ws:
        await ws.send(batch_text(make_events([1], process="eager-1")))
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_POLICY
    assert "hello" in reason
    await wait_logged(caplog, "not hello")
    assert stored_seqs(server.store, "eager-1") == []
    await bystander.check()


@pytest.mark.parametrize("version", [0, PROTOCOL_VERSION + 1, 99])
async def test_hello_of_another_protocol_version_closes_1008(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture, version: int
) -> None:
    async with client(server) as ws:
        await ws.send(hello_text("future-1", version=version))
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_POLICY
    assert str(version) in reason and str(PROTOCOL_VERSION) in reason, reason
    await wait_logged(caplog, f"protocol {version}", f"speaks {PROTOCOL_VERSION}")
    await bystander.check()


async def test_future_hello_with_other_fields_is_told_the_version(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    """A client of a later protocol may send a hello shaped differently (fields added or dropped).

    The one thing it needs back is which version this server speaks, so the version must be read
    before the rest of the hello is validated.
    """
    future = {"type": "hello", "protocol": PROTOCOL_VERSION + 1, "run": RUN, "client": {"pid": 1}}
    async with client(server) as ws:
        await ws.send(json.dumps(future))
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_POLICY, (code, reason)
    assert str(PROTOCOL_VERSION + 1) in reason and f"speaks {PROTOCOL_VERSION}" in reason, reason
    await bystander.check()


async def test_undecodable_first_frame_closes_1007(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    async with client(server) as ws:
        await ws.send("GET / HTTP/1.1")
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_MALFORMED
    assert reason.startswith("bad hello")
    await wait_logged(caplog, "bad hello")
    await bystander.check()


async def test_no_hello_in_time_closes_1008(
    server: IngestServer,
    bystander: Bystander,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(websocket, "HELLO_TIMEOUT", 0.2)
    async with client(server) as ws:
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_POLICY
    assert "hello" in reason
    await wait_logged(caplog, "no hello")
    await bystander.check()


# After the handshake: bad messages ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_line", "logged"),
    [
        pytest.param('{"type": "test_started", "run_id": ', "malformed frame", id="truncated-json"),
        pytest.param("not json at all", "malformed frame", id="not-json"),
        pytest.param('{"type": "test_exploded", "run_id": "run-ws"}', "invalid frame", id="unknown-type"),
        pytest.param(
            '{"run_id": "run-ws", "process": "bad-1", "seq": 9, "ts": 1.0}', "invalid frame", id="no-type"
        ),
        pytest.param(
            '{"type": "test_started", "run_id": "run-ws", "process": "bad-1"}',
            "invalid frame",
            id="missing-fields",
        ),
        pytest.param(
            '{"type": "test_started", "run_id": "run-ws", "process": "bad-1", "seq": "x", "ts": 1,'
            ' "nodeid": "t", "worker": "w"}',
            "invalid frame",
            id="wrong-field-type",
        ),
        pytest.param("[1, 2, 3]", "invalid quick pass", id="json-array"),  # an array: a short record
        pytest.param(hello_text("bad-1"), "unexpected hello", id="second-hello"),
    ],
)
async def test_bad_frame_after_hello_closes_1007_and_stores_nothing_of_its_message(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture, bad_line: str, logged: str
) -> None:
    async with client(server) as ws:
        await handshake(ws, "bad-1")
        await ws.send(batch_text(make_events([1, 2], process="bad-1")))
        assert await recv_frame(ws) == Ack(seq=2)
        # good lines around the bad one: the message is refused as a whole
        good = make_events([3, 4], process="bad-1")
        first, last = (protocol.encode(e).decode() for e in good)
        await ws.send(f"{first}\n{bad_line}\n{last}\n")
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_MALFORMED
    assert logged in reason and len(reason.encode()) <= 123, reason
    await wait_logged(caplog, "closing", "bad-1", logged)
    assert stored_seqs(server.store, "bad-1") == [1, 2]
    await bystander.check()


@pytest.mark.parametrize(
    ("run_id", "process"), [("other-run", "foreign-1"), (RUN, "someone-else"), ("other-run", "someone-else")]
)
async def test_event_of_another_run_or_process_closes_1007(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture, run_id: str, process: str
) -> None:
    async with client(server) as ws:
        await handshake(ws, "foreign-1")
        stray = make_events([1], run_id=run_id, process=process) + make_events([2], process="foreign-1")
        await ws.send(batch_text(stray))
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_MALFORMED
    assert f"{run_id}/{process}" in reason and f"{RUN}/foreign-1" in reason, reason
    await wait_logged(caplog, "closing", f"{run_id}/{process}")
    assert stored_seqs(server.store, process, run_id) == [] and stored_seqs(server.store, "foreign-1") == []
    await bystander.check()


def big_batch(process: str, size: int) -> str:
    """One test_finished event whose message pads the frame to exactly ``size`` bytes."""
    event = make_events([2], process=process)[0]
    assert isinstance(event, protocol.TestFinished)
    base = len(batch_text([event]).encode())
    padded = protocol.TestFinished(
        **{
            **{f: getattr(event, f) for f in event.__struct_fields__},
            "message": "x" * (size - base - len(',"message":""')),
        }
    )
    text = batch_text([padded])
    assert len(text.encode()) == size
    return text


async def test_message_over_max_size_closes_1009(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    async with client(server) as ws:
        await handshake(ws, "huge-1")
        await ws.send(big_batch("huge-1", MAX_SIZE + 1))
        code, _ = await expect_close(ws)
    assert code == 1009
    await wait_logged(caplog, "message over", str(MAX_SIZE))
    assert stored_seqs(server.store, "huge-1") == []
    await bystander.check()


async def test_message_of_exactly_max_size_is_accepted(server: IngestServer, bystander: Bystander) -> None:
    async with client(server) as ws:
        await handshake(ws, "big-1")
        await ws.send(big_batch("big-1", MAX_SIZE))
        assert await recv_frame(ws) == Ack(seq=2)
    assert stored_seqs(server.store, "big-1") == [2]
    await bystander.check()


async def test_oversized_hello_closes_1009(
    server: IngestServer, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    async with client(server) as ws:
        await ws.send(hello_text("x" * MAX_SIZE))
        code, _ = await expect_close(ws)
    assert code == 1009
    await wait_logged(caplog, "message over")
    await bystander.check()


# Happy path --------------------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
async def test_batch_is_stored_and_acked_once(
    server: IngestServer, bystander: Bystander, binary: bool
) -> None:
    store = server.store
    events = make_events([3, 1, 2, 5, 4, 6], process="happy-1")  # arrival order need not be seq order
    body = batch_text(events)
    async with client(server) as ws:
        welcome = await handshake(ws, "happy-1")
        assert welcome.server_pid > 0
        assert server.connections[(RUN, "happy-1")] is not None
        await ws.send(body.encode() if binary else body)
        assert await recv_frame(ws) == Ack(seq=6)
        assert stored_seqs(store, "happy-1") == [1, 2, 3, 4, 5, 6]
        tests = store.tests(RUN)
        assert [(t["nodeid"], t["status"]) for t in tests] == [
            (f"test_mod.py::test_{n}", "passed") for n in (1, 2, 3)
        ]
        before = store.db.execute("SELECT count(*) FROM events").fetchone()[0]
        total_changes = store.db.total_changes

        # the same batch again (a client that did not see the ack): acked, nothing new stored
        await ws.send(body.encode() if binary else body)
        assert await recv_frame(ws) == Ack(seq=6)
        assert store.db.execute("SELECT count(*) FROM events").fetchone()[0] == before
        assert store.db.total_changes == total_changes

        # empty lines and a message of only blank lines are harmless
        await ws.send("\n\n" + batch_text(make_events([7], process="happy-1")) + "\n\n")
        assert await recv_frame(ws) == Ack(seq=7)
        await ws.send("\n \n")
        await ws.send(batch_text(make_events([8], process="happy-1")))
        assert await recv_frame(ws) == Ack(seq=8)  # no ack was sent for the blank message
    assert stored_seqs(store, "happy-1") == list(range(1, 9))
    with anyio.fail_after(PATIENCE):
        while (RUN, "happy-1") in server.connections:
            await anyio.sleep(0.01)
    await bystander.check()


async def test_acks_are_paced_when_the_client_asks(server: IngestServer, bystander: Bystander) -> None:
    """A client that sets ``ack_interval`` gets one ack for several quick messages, no later than
    the interval after the first, and its goodbye acknowledged at once."""
    interval = 3.0  # long beside what a loaded machine adds to a message's way, so the pacing shows
    async with client(server) as ws:
        await ws.send(hello_text("paced-1").replace('"pid"', f'"ack_interval":{interval},"pid"'))
        assert isinstance(await recv_frame(ws), Welcome)
        started = anyio.current_time()
        for seq in (1, 2, 3, 4):
            await ws.send(batch_text(make_events([seq], process="paced-1")))
        first = await recv_frame(ws)  # the first message's ack is due at once (none was sent yet)
        assert first == Ack(seq=1)
        second = await recv_frame(ws)
        waited = anyio.current_time() - started
        assert second == Ack(seq=4), "the three later messages are acknowledged together"
        assert interval * 0.8 <= waited <= interval + PATIENCE
        assert stored_seqs(server.store, "paced-1") == [1, 2, 3, 4]

        goodbye = protocol.ProcessFinished(run_id=RUN, process="paced-1", seq=5, ts=NOW, events=5)
        await ws.send(batch_text([goodbye]))
        with anyio.fail_after(interval / 2):  # not held: the client waits on it to close
            assert await recv_frame(ws) == Ack(seq=5)
    await bystander.check()


async def test_many_clients_at_once(server: IngestServer, bystander: Bystander) -> None:
    async def one(n: int) -> None:
        process = f"gw{n}-1"
        async with client(server) as ws:
            await handshake(ws, process)
            for first in range(1, 200, 50):
                await ws.send(batch_text(make_events(range(first, first + 50), process=process)))
                assert await recv_frame(ws) == Ack(seq=first + 49)

    async with anyio.create_task_group() as tasks:
        for n in range(8):
            tasks.start_soon(one, n)
    for n in range(8):
        assert stored_seqs(server.store, f"gw{n}-1") == list(range(1, 201))
    await bystander.check()


# Hello with a spool ------------------------------------------------------------------------------


async def test_hello_with_spool_ingests_it_before_welcome(server: IngestServer, bystander: Bystander) -> None:
    store = server.store
    name = f"{RUN}.late-1.jsonl"
    folder = spool_dir(store.dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(protocol.encode_lines(list(make_events(range(1, 6), process="late-1"))))
    assert stored_seqs(store, "late-1") == []
    async with client(server) as ws:
        await handshake(ws, "late-1", spool=name)
        # already in the store when the welcome arrived, before any message of the connection
        assert stored_seqs(store, "late-1") == [1, 2, 3, 4, 5]
        assert store.spool_offset(name) == (folder / name).stat().st_size
        await ws.send(batch_text(make_events(range(6, 9), process="late-1")))
        assert await recv_frame(ws) == Ack(seq=8)
        # replaying what the spool held stores nothing twice
        await ws.send(batch_text(make_events(range(1, 6), process="late-1")))
        assert await recv_frame(ws) == Ack(seq=5)
    assert stored_seqs(store, "late-1") == list(range(1, 9))
    await bystander.check()


async def test_hello_with_missing_spool_still_welcomed(server: IngestServer, bystander: Bystander) -> None:
    async with client(server) as ws:
        await handshake(ws, "nospool-1", spool=f"{RUN}.nospool-1.jsonl")
        await ws.send(batch_text(make_events([1], process="nospool-1")))
        assert await recv_frame(ws) == Ack(seq=1)
    await bystander.check()


@pytest.mark.parametrize("name", ["../outside.jsonl", "/tmp/../outside.jsonl", ".."])
async def test_hello_spool_name_cannot_leave_the_spool_folder(
    server: IngestServer, bystander: Bystander, name: str
) -> None:
    store = server.store
    outside = store.dir / "outside.jsonl"
    outside.write_bytes(protocol.encode_lines(list(make_events([1, 2], process="escape-1"))))
    async with client(server) as ws:
        await handshake(ws, "escape-1", spool=name)
    assert stored_seqs(store, "escape-1") == []
    assert outside.exists()
    await bystander.check()


# Packed messages: output as raw bytes -------------------------------------------------------------


def raw_output(process: str, seq: int, data: bytes, *, first: int = 1, run_id: str = RUN) -> protocol.Output:
    return protocol.Output(
        run_id=run_id,
        process=process,
        seq=seq,
        ts=NOW + seq,
        nodeid="test_mod.py::test_raw",
        worker="main",
        phase="call",
        stream="stdout",
        first=first,
        stream_first=first,
        count=data.count(b"\n") + 1,
        data=data,
    )


def packed(events: Sequence[Event]) -> bytes:
    return protocol.packed_message([protocol.pack(e) for e in events])


async def test_packed_output_is_stored_as_the_lines_written_in_valid_utf8(
    server: IngestServer, bystander: Bystander
) -> None:
    from hostile_peers import stored_lines

    async with client(server) as ws:
        await handshake(ws, "raw-1")
        written = [b"plain line", "caf\u00e9 \u2603".encode(), b"bad \xff\xfe bytes", b"", b"cut \xe2\x98"]
        first = raw_output("raw-1", 1, b"\n".join(written[:2]))
        second = raw_output("raw-1", 2, b"\n".join(written[2:]), first=3)
        # sent in 4 KB frames of one message, as the plugin's sender does
        message = packed([first, second])
        await ws.send([message[i : i + 4096] for i in range(0, len(message), 4096)])
        assert await recv_frame(ws) == Ack(seq=2)
    expected = [line.decode("utf-8", "replace") for line in written]
    assert stored_lines(server.store, RUN, "test_mod.py::test_raw") == expected
    await bystander.check()


@pytest.mark.parametrize(
    ("message", "logged"),
    [
        pytest.param(lambda: packed(make_events([3, 4], process="bad-1"))[:-3], "malformed", id="truncated"),
        pytest.param(
            lambda: packed(make_events([3, 4], process="bad-1")) + b"\x00", "trailing", id="trailing"
        ),
        pytest.param(lambda: b"\xdd\xff\xff\xff\xff", "malformed", id="count-beyond-message"),
        pytest.param(
            lambda: msgspec.msgpack.encode(
                [{**msgspec.to_builtins(make_events([3], process="bad-1")[0]), "seq": "x"}]
            ),
            "invalid frame",
            id="wrong-field-type",
        ),
        pytest.param(
            lambda: msgspec.msgpack.encode([json.loads(hello_text("bad-1"))]), "invalid frame", id="hello"
        ),
        pytest.param(
            lambda: packed([raw_output("someone-else", 3, b"x")]),
            "on the connection of",
            id="another-process",
        ),
    ],
)
async def test_bad_packed_message_closes_1007_and_stores_nothing_of_it(
    server: IngestServer,
    bystander: Bystander,
    caplog: pytest.LogCaptureFixture,
    message: Callable[[], bytes],
    logged: str,
) -> None:
    async with client(server) as ws:
        await handshake(ws, "bad-1")
        await ws.send(packed(make_events([1, 2], process="bad-1")))
        assert await recv_frame(ws) == Ack(seq=2)
        await ws.send(message())
        code, reason = await expect_close(ws)
    assert code == protocol.CLOSE_MALFORMED
    assert logged in reason, reason
    await wait_logged(caplog, "closing", "bad-1", logged)
    assert stored_seqs(server.store, "bad-1") == [1, 2]
    await bystander.check()


async def test_a_protocol_1_client_is_still_served(server: IngestServer, bystander: Bystander) -> None:
    """A plugin of the version before: hello 1, JSON lines as text and as binary messages."""
    async with client(server) as ws:
        welcome = await handshake(ws, "old-1", version=1)
        assert welcome.protocol == PROTOCOL_VERSION
        await ws.send(batch_text(make_events([1, 2], process="old-1")))
        assert await recv_frame(ws) == Ack(seq=2)
        await ws.send(batch_text(make_events([3, 4], process="old-1")).encode())
        assert await recv_frame(ws) == Ack(seq=4)
    assert stored_seqs(server.store, "old-1") == [1, 2, 3, 4]
    await bystander.check()
