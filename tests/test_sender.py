"""The plugin's `Sender` against no server, an unreachable one, and a real `mcpdebug serve`.

Whatever happens to the server, every event sent must end up in the store or in the spool file (so
the next server start-up or `ingest_spool` takes it in), and `send()` must stay cheap and silent.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import RunningServer, start_server
from helpers import NOW
from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import read_server_info, spool_dir
from pytest_mcpdebug.protocol import Event, plain
from pytest_mcpdebug.recording import sender as sender_module
from pytest_mcpdebug.recording.connection import CONNECT_TIMEOUT
from pytest_mcpdebug.recording.sender import SPOOL_INTERVAL, Discover, Sender
from pytest_mcpdebug.recording.spool import spool_file_name

RUN = "run-sender"
PROCESS = f"main-{os.getpid()}"
PATIENCE = 60.0
"""Deadline for what happens promptly unless the machine is very loaded (a server's handshake took 3 s
at a load average of 10): a test waits for the condition itself, never a fixed time."""


# Helpers ----------------------------------------------------------------------------------------


def make_events(seqs: Sequence[int] | range, message: str = "") -> list[Event]:
    """Odd seq: test_started, even seq: test_finished, of test ``(seq + 1) // 2``."""
    events: list[Event] = []
    for seq in seqs:
        nodeid = f"test_mod.py::test_{(seq + 1) // 2}"
        if seq % 2 == 0:
            events.append(
                protocol.TestFinished(
                    run_id=RUN,
                    process=PROCESS,
                    seq=seq,
                    ts=NOW + seq,
                    nodeid=nodeid,
                    worker="main",
                    outcome="failed",
                    duration=0.25,
                    message=message,
                )
            )
        else:
            events.append(
                protocol.TestStarted(
                    run_id=RUN, process=PROCESS, seq=seq, ts=NOW + seq, nodeid=nodeid, worker="main"
                )
            )
    return events


def new_sender(directory: Path, discover: Discover, **options: float) -> Sender:
    hello = protocol.Hello(
        protocol=protocol.HELLO_VERSION, run_id=RUN, process=PROCESS, worker="main", pid=os.getpid()
    )  # as the plugin says hello
    return Sender(hello=hello, spool_path=expected_spool(directory), discover=discover, **options)  # type: ignore[arg-type]


def expected_spool(directory: Path) -> Path:
    return spool_dir(directory) / spool_file_name(RUN, PROCESS)


def discover_in(directory: Path) -> Discover:
    """What the plugin does: read `server.json` (ignored once its pid is dead)."""

    def discover() -> tuple[str, str] | None:
        info = read_server_info(directory)
        return (info.url, info.token) if info else None

    return discover


def spooled_events(path: Path) -> list[Event]:
    return spooled_events_of(path.read_bytes())


def spooled_events_of(data: bytes) -> list[Event]:
    assert data.endswith(b"\n"), "the spool must end with a complete line"
    frames = [protocol.decode_spooled_line(line) for line in protocol.split_lines(data)]
    assert all(not isinstance(f, protocol.Hello) for f in frames)
    return frames  # type: ignore[return-value]


def stored_seqs(directory: Path) -> list[int]:
    store = Store(directory)
    try:
        rows = store.db.execute(
            "SELECT seq FROM events WHERE run_id=? AND process=? ORDER BY seq", (RUN, PROCESS)
        ).fetchall()
        return [r[0] for r in rows]
    finally:
        store.close()


def wait_for(predicate, timeout: float = PATIENCE) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def connect(sender: Sender) -> Sender:
    """Start ``sender`` and wait for its first connection attempt to be over, however long the
    server takes to answer (`Sender.start` alone waits `CONNECT_TIMEOUT`, as a test run does)."""
    sender.start(wait=PATIENCE)
    return sender


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def servers() -> Iterator[list[RunningServer]]:
    """Start servers with ``servers.append(start_server(...))``; all are killed at the end."""
    started: list[RunningServer] = []
    yield started
    for running in started:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(10)


@pytest.fixture
def mcpdir(tmp_path: Path) -> Path:
    return tmp_path / ".mcpdebug"


# Without a server --------------------------------------------------------------------------------


def test_no_server_spools_every_event(mcpdir: Path) -> None:
    calls: list[float] = []

    def discover() -> None:
        calls.append(time.monotonic())
        return None

    sender = new_sender(mcpdir, discover)
    assert sender.spool_path is None  # nothing written yet
    sender.start(wait=PATIENCE)
    assert sender.first_attempt(0), "start returned before its first attempt was over"
    assert calls and sender.connected_url is None
    events = make_events(range(1, 1001), message="boom\nwith a second line and ünïcode")
    for i, event in enumerate(events):
        sender.send(event)
        if i == 500:
            time.sleep(0.1)  # let the thread write part of it while the rest is still being sent
    sender.close()
    assert sender.spool_path == expected_spool(mcpdir)
    assert spooled_events(expected_spool(mcpdir)) == events
    assert (sender.sent, sender.spooled) == (0, len(events))
    assert sender.warnings == []

    # the spool is what a server takes in at start-up
    store = Store(mcpdir)
    report = ingest_spool(store)
    assert (report.events, report.new, report.bad_lines) == (1000, 1000, 0)
    assert len(store.tests(RUN)) == 500 and all(t["status"] == "failed" for t in store.tests(RUN))
    store.close()


def test_a_poke_delivers_what_is_queued_at_once_not_at_the_next_interval(
    mcpdir: Path, servers: list[RunningServer]
) -> None:
    """What the controller's relay does as each message of a remote worker arrives: the events go to
    the spool, or to the server, then, though the thread would sleep an hour."""
    sender = new_sender(mcpdir, lambda: None, interval=3600.0)
    sender.start(wait=PATIENCE)
    events = make_events(range(1, 5))
    for event in events[:2]:
        sender.send(event)
    sender.poke()
    wait_for(lambda: expected_spool(mcpdir).exists() and spooled_events(expected_spool(mcpdir)) == events[:2])
    sender.send(events[2])
    sender.poke()
    wait_for(lambda: spooled_events(expected_spool(mcpdir)) == events[:3])
    sender.send(events[3])
    sender.close()  # not an hour either
    assert spooled_events(expected_spool(mcpdir)) == events

    streamed = mcpdir.parent / "streamed" / ".mcpdebug"
    servers.append(start_server(streamed))
    sender = connect(new_sender(streamed, discover_in(streamed), interval=3600.0))
    assert sender.connected_url is not None
    for event in events[:2]:
        sender.send(event)
    sender.poke()
    wait_for(lambda: stored_seqs(streamed) == [1, 2])
    sender.close()


def test_unreachable_server_warns_once_and_spools(mcpdir: Path) -> None:
    url = f"ws://127.0.0.1:{closed_port()}/"
    calls: list[float] = []

    def discover() -> tuple[str, str]:
        calls.append(time.monotonic())
        return url, "some-token"

    sender = new_sender(mcpdir, discover)
    sender.start(wait=PATIENCE)
    assert sender.first_attempt(0) and len(sender.warnings) == 1  # refused at once: said at the start
    events = make_events(range(1, 201))
    for event in events[:100]:
        sender.send(event)
    wait_for(lambda: len(calls) >= 2)  # it retried, and failed again
    for event in events[100:]:
        sender.send(event)
    sender.close()
    assert len(sender.warnings) == 1, sender.warnings
    assert "unreachable" in sender.warnings[0] and url in sender.warnings[0]
    assert sender.connected_url is None
    assert (sender.sent, sender.spooled) == (0, 200)
    assert spooled_events(expected_spool(mcpdir)) == events


def test_sends_past_the_queue_limit_lose_nothing(mcpdir: Path) -> None:
    """100,000 sends, past `MAX_PENDING`: the test thread spools the overflow itself. What a send
    costs is measured by `benchmarks/latencies.py`, not here."""
    events = make_events(range(1, 100_001))
    sender = new_sender(mcpdir, lambda: None)
    sender.start()
    for event in events:
        sender.send(event)
    sender.close()
    # nothing lost or doubled, even when the test thread spooled an overflow itself
    assert sender.spooled == 100_000
    assert sorted(e.seq for e in spooled_events(expected_spool(mcpdir))) == list(range(1, 100_001))


def test_an_overflow_spooled_while_the_thread_drains_never_raises(
    mcpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test thread spooling an overflow and the sender thread taking a batch drain one queue at
    once: neither may find it empty half-way (``send`` raised IndexError into a test on a loaded
    machine). Threads switched as often as they can be, a small limit, twenty rounds."""
    monkeypatch.setattr(sender_module, "MAX_PENDING", 50)
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in range(20):
            folder = mcpdir / str(round_)
            sender = new_sender(folder, lambda: None, interval=0.0005)
            sender.start()
            try:
                for event in make_events(range(1, 10_001)):
                    sender.send(event)
            finally:
                sender.close()
            assert sorted(e.seq for e in spooled_events(expected_spool(folder))) == list(range(1, 10_001))
    finally:
        sys.setswitchinterval(interval)
    assert died == [], "the sender thread died"


# With a live server ------------------------------------------------------------------------------


def test_live_server_receives_the_stream(mcpdir: Path, servers: list[RunningServer]) -> None:
    servers.append(server := start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.connected_url == server.url
    events = make_events(range(1, 3001))
    for event in events[:1000]:
        sender.send(event)
    wait_for(lambda: len(stored_seqs(mcpdir)) >= 1000)  # streamed while the run goes on, not at close
    for event in events[1000:]:
        sender.send(event)
    sender.close()
    assert sender.warnings == []
    assert sender.sent >= len(events) and sender.spooled == 0
    assert sender.spool_path is None and not expected_spool(mcpdir).exists()
    assert stored_seqs(mcpdir) == list(range(1, 3001))
    assert server.process.poll() is None  # the client going away does not bother the server


def written_ahead(path: Path) -> list[Event]:
    """A write-ahead copy as the server reads it once its process is gone: up to its first NUL (the
    room the file was grown by and that was not used yet)."""
    data = path.read_bytes()
    written, _, room = data.partition(b"\0")
    assert not room.strip(b"\0"), "nothing is written after the first NUL"
    return spooled_events_of(written)


def test_a_checkpoint_puts_the_queue_in_the_kernel_at_once(mcpdir: Path) -> None:
    """No waiting for the sender thread's next flush: what a test queued is in the write-ahead copy
    (mapped: the page cache's, so a killed process leaves it) when it ends, and the sender thread
    spools it with its next batch; a clean end deletes the copy."""
    sender = new_sender(mcpdir, lambda: None, interval=60.0)  # no flush of its own during the test
    sender.start()
    events = make_events(range(1, 7))
    for event in events:
        sender.send(event)
    sender.checkpoint()  # what the reporter does at each test's end, in the test thread
    wal = expected_spool(mcpdir).with_suffix(".wal")
    assert written_ahead(wal) == events
    # As the server finds it if the process is killed now: every event, no damage reported.
    copy = mcpdir.parent / "after-a-kill" / mcpdir.name
    shutil.copytree(mcpdir, copy)
    report = ingest_spool(Store(copy), live_wal=True)
    assert report.new == len(events) and report.bad_lines == 0
    sender.close()
    assert spooled_events(expected_spool(mcpdir)) == events and not wal.exists()
    assert sender.spooled == len(events) and sender.dropped == 0


def quick_pass(seq: int) -> protocol.QuickPass:
    phases = [
        ("setup", 0.001, NOW + seq),
        ("call", 0.002, NOW + seq + 0.1),
        ("teardown", 0.001, NOW + seq + 0.2),
    ]
    return protocol.QuickPass(
        RUN, PROCESS, seq, NOW + seq, f"test_mod.py::test_{seq}", "main", "test_mod.py", 9, 1, phases
    )


def short_record(record: protocol.QuickPass) -> tuple[int, bytes]:
    """What the reporter hands `Sender.send_quick` at a quiet pass's end: its seq and short record."""
    return record.seq, plain.quick_line(msgspec.structs.astuple(record))


def as_read(event: Event) -> Event:
    """An event as the server reads it back (a quiet pass's phases become structs)."""
    return protocol.decode_client_frame(protocol.encode(event))  # type: ignore[return-value]


def test_a_quiet_pass_with_a_clock_gone_wrong_is_still_a_valid_event() -> None:
    """JSON has no NaN or infinity: its event, however it travels or is spooled, has 0 instead."""
    broken = protocol.QuickPass(
        RUN,
        PROCESS,
        7,
        NOW,
        "test_mod.py::test_7",
        "main",
        "test_mod.py",
        3,
        1,
        [("call", math.inf, math.nan)],
    )
    event = as_read(broken.event())
    assert event.passed_phases == [protocol.PassedPhase("call", 0.0, 0.0)]  # type: ignore[attr-defined]
    assert protocol.decode_spooled_line(protocol.encode_quick(broken)) == event


def test_a_quiet_pass_is_written_ahead_short_and_arrives_as_its_test_finished(mcpdir: Path) -> None:
    """A quiet pass's end copies its short record (`protocol.quick`) into the write-ahead file, and the
    sender thread spools it as it is; the server reads either as the `TestFinished` it stands for."""
    sender = new_sender(mcpdir, lambda: None, interval=60.0)
    sender.start()
    sender.send(make_events([1])[0])
    sender.checkpoint()
    for seq in (2, 3):
        sender.send_quick(*short_record(quick_pass(seq)))  # nothing older waits: straight into the copy
    wal = expected_spool(mcpdir).with_suffix(".wal")
    assert wal.read_bytes().split(b"\n")[1].startswith(b'["run-sender",')  # the short form
    expected = [make_events([1])[0], *(as_read(quick_pass(seq).event()) for seq in (2, 3))]
    assert [e.outcome for e in expected[1:]] == ["passed", "passed"]  # type: ignore[attr-defined]
    assert expected[1].line == 10 and expected[1].duration == pytest.approx(0.004)  # type: ignore[attr-defined]
    copy = mcpdir.parent / "after-a-kill" / mcpdir.name  # as the server finds it after a kill
    shutil.copytree(mcpdir, copy)
    store = Store(copy)
    report = ingest_spool(store, live_wal=True)
    assert report.new == 3 and report.bad_lines == 0
    test = store.test(RUN, "test_mod.py::test_2")
    assert test is not None and test["status"] == "passed"
    store.close()
    sender.send(make_events([5])[0])  # something older waits: the quiet pass is queued as its event
    sender.send_quick(*short_record(quick_pass(4)))
    sender.close()
    spool = expected_spool(mcpdir)
    assert spooled_events(spool) == [*expected, make_events([5])[0], as_read(quick_pass(4).event())]
    assert spool.read_bytes().split(b"\n")[1].startswith(b'["run-sender",')  # spooled as it is
    assert (
        protocol.decode_client_frame(protocol.event_line(spool.read_bytes().split(b"\n")[1])) == expected[1]
    )
    assert not wal.exists()


class WelcomingServer:
    """A WebSocket server on port 0 that speaks protocol ``version``: it refuses a hello of a later
    version (as `mcpdebug serve` does), welcomes one client, acknowledges each message, and keeps what
    it was sent. With ``version`` 2 it is, as far as a client can tell, a server of protocol 2. With a
    ``delay`` it is a server on a loaded machine, which takes that long to welcome a client."""

    def __init__(self, version: int, delay: float = 0.0) -> None:
        from websockets.sync.server import serve

        self.version = version
        self.delay = delay
        self.messages: list[bytes | str] = []
        self._server = serve(self._handle, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handle(self, ws: Any) -> None:
        hello = protocol.hello_version(ws.recv())
        if hello is None or hello > self.version:
            ws.close(protocol.CLOSE_POLICY, f"protocol {hello} unsupported; server speaks {self.version}")
            return
        time.sleep(self.delay)
        ws.send(protocol.encode(protocol.Welcome(protocol=self.version, server_pid=os.getpid())).decode())
        for message in ws:
            self.messages.append(message)
            if protocol.is_packed_message(message):
                seq = max(e.seq for e in protocol.decode_packed_message(message))  # type: ignore[arg-type]
            else:
                seq = max(protocol.decode_spooled_line(line).seq for line in protocol.split_lines(message))  # type: ignore[union-attr]
            ws.send(protocol.encode(protocol.Ack(seq=seq)).decode())

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


@pytest.mark.parametrize("version", [2, protocol.PROTOCOL_VERSION])
def test_quiet_passes_travel_as_the_server_reads_them(mcpdir: Path, version: int) -> None:
    """A server of protocol 2 takes the plugin's hello; to it a quiet pass goes as its packed
    `TestFinished`. To a server whose welcome says 3 or more it goes as the short record its write-ahead
    copy holds (no event built in the test process). Either way the server reads the same events."""
    peer = WelcomingServer(version)
    try:
        sender = connect(new_sender(mcpdir, lambda: (peer.url, "token"), interval=60.0))
        assert sender.connected and sender.server_protocol == version
        sender.send(make_events([1])[0])
        sender.checkpoint()
        for seq in (2, 3):
            sender.send_quick(*short_record(quick_pass(seq)))
        sender.close()
    finally:
        peer.close()
    assert sender.warnings == [] and sender.acked == 3 and sender.spool_path is None
    received: list[Event] = []
    short = []
    for message in peer.messages:
        if protocol.is_packed_message(message):
            received += protocol.decode_packed_message(message)  # type: ignore[arg-type]
        else:
            lines = protocol.split_lines(message)
            short += [line for line in lines if line.startswith(b"[")]
            received += [protocol.decode_spooled_line(line) for line in lines]  # type: ignore[misc]
    assert [as_read(e) for e in received] == [
        as_read(make_events([1])[0]),
        *(as_read(quick_pass(seq).event()) for seq in (2, 3)),
    ]
    expected_short = [protocol.encode_quick(quick_pass(seq)) for seq in (2, 3)]
    assert short == (expected_short if version >= protocol.SHORT_RECORDS_VERSION else [])


def test_close_after_everything_was_acknowledged_does_not_wait_for_a_tick(mcpdir: Path) -> None:
    """pytest's summary runs between the last events' send and the close: by the close the server has
    acknowledged everything, so no ack comes to wake the sender thread from its receive. It is woken,
    not left until its next tick (here a minute away)."""
    peer = WelcomingServer(protocol.PROTOCOL_VERSION)
    try:
        sender = connect(new_sender(mcpdir, lambda: (peer.url, "token"), interval=3600.0))
        assert sender.connected
        sender.send_quick(*short_record(quick_pass(1)))
        sender.checkpoint(now=True)
        wait_for(lambda: sender.acked == 1)
        sender.close()
    finally:
        peer.close()
    # Not woken, the thread would sit in its receive for the hour: `close` would give up on it after
    # `CLOSE_TIMEOUT` and spool what it holds, with a warning.
    assert sender.warnings == [] and sender.spool_path is None and not expected_spool(mcpdir).exists()


def test_a_server_slow_to_answer_is_streamed_to_once_it_does(mcpdir: Path) -> None:
    """A server on a loaded machine took 2.4-3 s to answer a connection: the first attempt goes on past
    the test thread's wait (`CONNECT_TIMEOUT`, what a run waits before its first test), and what was
    sent meanwhile is streamed once the server answers, not spooled with an "unreachable" warning."""
    peer = WelcomingServer(protocol.PROTOCOL_VERSION, delay=CONNECT_TIMEOUT + 1.0)
    try:
        sender = new_sender(mcpdir, lambda: (peer.url, "token"))
        sender.start()
        for event in make_events(range(1, 101)):
            sender.send(event)
        wait_for(lambda: sender.acked == 100)
        sender.close()
    finally:
        peer.close()
    assert sender.warnings == [] and sender.spool_path is None and sender.spooled == 0


def test_quiet_passes_streamed_to_mcpdebug_serve_are_stored_as_passed_tests(
    mcpdir: Path, servers: list[RunningServer]
) -> None:
    """The real server reads the short records it is sent: each quiet pass is a passed test, with
    where it is and how long each phase took."""
    servers.append(start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.server_protocol >= protocol.SHORT_RECORDS_VERSION
    for seq in (1, 2, 3):
        sender.send_quick(*short_record(quick_pass(seq)))
    sender.close()
    assert stored_seqs(mcpdir) == [1, 2, 3] and sender.acked == 3
    store = Store(mcpdir)
    try:
        test = store.test(RUN, "test_mod.py::test_2")
        assert test is not None and test["status"] == "passed"
        assert (test["file"], test["line"], test["duration"]) == ("test_mod.py", 10, pytest.approx(0.004))
        phases = [(p["phase"], p["outcome"], p["duration"]) for p in store.phases(RUN, "test_mod.py::test_2")]
        assert phases == [
            ("setup", "passed", 0.001),
            ("call", "passed", 0.002),
            ("teardown", "passed", 0.001),
        ]
    finally:
        store.close()


def spooled_with_time(spool: Path, count: int) -> int:
    """When the spool came to hold ``count`` events (its modification time, in ns): waits for them."""
    while True:
        wait_for(lambda: spool.exists() and len(spooled_events(spool)) >= count)
        before = spool.stat().st_mtime_ns
        events = len(spooled_events(spool))
        if spool.stat().st_mtime_ns == before:  # no write between the look and the count
            assert events == count, f"{events} events spooled, not {count}"
            return before


def test_without_a_server_written_ahead_events_reach_the_spool_once_a_second(mcpdir: Path) -> None:
    """They are in the kernel already: the sender thread spools them with its first tick after
    `SPOOL_INTERVAL` (not at every tick), read from the file's modification times, which a loaded
    machine can only push apart."""
    sender = new_sender(mcpdir, lambda: None, interval=0.01)
    sender.start()
    spool = expected_spool(mcpdir)
    sender.send(make_events([1])[0])  # not written ahead: spooled at the next tick
    first = spooled_with_time(spool, 1)
    sender.send_quick(*short_record(quick_pass(2)))
    second = spooled_with_time(spool, 2)
    assert (second - first) / 1e9 >= SPOOL_INTERVAL - 0.05  # the file's clock ticks a few ms at a time
    sender.close()
    assert [e.seq for e in spooled_events(spool)] == [1, 2]


def test_without_a_server_an_event_to_write_takes_the_written_ahead_ones_along(
    mcpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something that is not written ahead is spooled at the next tick, with what the write-ahead copy
    holds before it, in order: not an hour later, however long the spool interval."""
    monkeypatch.setattr(sender_module, "SPOOL_INTERVAL", 3600.0)
    sender = new_sender(mcpdir, lambda: None, interval=0.01)
    sender.start()
    spool = expected_spool(mcpdir)
    sender.send(make_events([1])[0])
    wait_for(lambda: spool.exists() and len(spooled_events(spool)) == 1)
    sender.send_quick(*short_record(quick_pass(2)))
    sender.send_quick(*short_record(quick_pass(3)))
    sender.send(make_events([4])[0])  # something to write now: the quiet passes go first, in order
    wait_for(lambda: len(spooled_events(spool)) == 4)
    sender.send_quick(*short_record(quick_pass(5)))
    sender.close()  # the end spools what waits
    assert [e.seq for e in spooled_events(spool)] == [1, 2, 3, 4, 5]


def test_a_checkpoint_while_streaming_writes_ahead_and_a_clean_end_deletes_it(
    mcpdir: Path, servers: list[RunningServer]
) -> None:
    servers.append(start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.connected
    events = make_events(range(1, 5))
    for event in events:
        sender.send(event)
    sender.checkpoint()
    wal = expected_spool(mcpdir).with_suffix(".wal")
    assert written_ahead(wal) == events  # a copy in the kernel before the next test starts
    sender.close()
    assert not wal.exists() and sender.spool_path is None  # all acknowledged: the copy is not needed
    assert stored_seqs(mcpdir) == [1, 2, 3, 4] and sender.acked == 4


def send_timed(sender: Sender, events: list[Event], durations: list[float], pace: int = 50) -> None:
    for i, event in enumerate(events):
        began = time.perf_counter()
        sender.send(event)
        durations.append(time.perf_counter() - began)
        if i % pace == pace - 1:
            time.sleep(0.005)


def test_server_killed_mid_stream(mcpdir: Path, servers: list[RunningServer]) -> None:
    servers.append(server := start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.connected_url == server.url
    events = make_events(range(1, 4001), message="x" * 200)
    durations: list[float] = []
    send_timed(sender, events[:2000], durations)
    wait_for(lambda: len(stored_seqs(mcpdir)) > 0)
    server.process.kill()
    server.process.wait(10)
    send_timed(sender, events[2000:], durations)
    wait_for(lambda: sender.connected_url is None)

    began = time.monotonic()
    sender.close(timeout=PATIENCE)
    assert time.monotonic() - began < PATIENCE / 2, "close waited for acknowledgements from no server"

    # How long a send takes meanwhile is measured by `benchmarks/latencies.py`; a send that waited on
    # the network would wait as long as the connection does
    assert max(durations) < 5.0, f"slowest send took {max(durations):.2f} s"
    assert len(sender.warnings) == 1, sender.warnings
    assert "lost the server" in sender.warnings[0] and server.url in sender.warnings[0]
    assert sender.sent > 0 and sender.spooled > 0
    stored = set(stored_seqs(mcpdir))
    spooled = [e.seq for e in spooled_events(expected_spool(mcpdir))]
    assert stored and spooled
    assert stored | set(spooled) == set(range(1, 4001)), "events lost between the server and the spool"

    # a new server on the same folder takes the spool in at start-up: each event once
    servers.append(start_server(mcpdir))
    assert stored_seqs(mcpdir) == list(range(1, 4001))
    store = Store(mcpdir)
    assert len(store.tests(RUN)) == 2000 and {t["status"] for t in store.tests(RUN)} == {"failed"}
    again = ingest_spool(store)
    assert again.new == 0
    store.close()
    assert stored_seqs(mcpdir) == list(range(1, 4001))


def test_reconnects_to_a_new_server_and_hands_over_its_spool(
    mcpdir: Path, servers: list[RunningServer]
) -> None:
    servers.append(first := start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.connected_url == first.url
    events = make_events(range(1, 1501))
    for event in events[:500]:
        sender.send(event)
    wait_for(lambda: len(stored_seqs(mcpdir)) == 500)
    first.process.kill()
    first.process.wait(10)
    for event in events[500:1000]:
        sender.send(event)
    wait_for(lambda: sender.spooled >= 500)  # no server: these wait in the spool
    servers.append(second := start_server(mcpdir))
    wait_for(lambda: sender.connected_url == second.url)
    for event in events[1000:]:
        sender.send(event)
    sender.close()
    assert [w for w in sender.warnings if "lost the server" in w] == [sender.warnings[0]]
    # all in the store now, without another restart or `ingest_spool`
    assert stored_seqs(mcpdir) == list(range(1, 1501))


def test_close_with_a_stalled_server_keeps_every_event(mcpdir: Path, servers: list[RunningServer]) -> None:
    """A server that stops reading (event loop blocked, process stopped) must not cost events.

    close() gives up waiting after its timeout; whatever the server did not acknowledge by then must
    be in the spool when close() returns, because the process may exit right after.
    """
    servers.append(server := start_server(mcpdir))
    sender = connect(new_sender(mcpdir, discover_in(mcpdir)))
    assert sender.connected_url == server.url
    first = make_events(range(1, 101))
    for event in first:
        sender.send(event)
    wait_for(lambda: len(stored_seqs(mcpdir)) == 100)
    server.process.send_signal(signal.SIGSTOP)
    try:
        # ~16 MB: more than the socket buffers hold, so the sender thread blocks in send()
        events = make_events(range(101, 2101), message="y" * 8000)
        for event in events:
            sender.send(event)
        began = time.monotonic()
        sender.close(timeout=1.0)  # the thread is stuck in a send: given up on after its timeout
        elapsed = time.monotonic() - began
        # what survives if the test process exits now, as pytest does right after close()
        path = expected_spool(mcpdir)
        spooled = {e.seq for e in spooled_events(path)} if path.exists() else set()
    finally:
        server.process.kill()  # the server never comes back: what it did not commit is gone
        server.process.wait(10)
    assert elapsed < PATIENCE, "close waited on a server that stopped reading"
    missing = set(range(1, 2101)) - set(stored_seqs(mcpdir)) - spooled
    assert not missing, f"{len(missing)} events in neither the store nor the spool when close() returned"
