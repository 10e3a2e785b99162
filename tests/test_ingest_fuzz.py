"""Hostile peers on the ingest WebSocket: a real `mcpdebug serve` takes hypothesis-generated abuse
while a real `pytest --mcp-debug` run streams into it, and stores that run complete.

The long run (tens of thousands of frames, thousands of dropped connections, the server's memory)
is `benchmarks/chaos_ingest.py`; this is its bounded version for the suite.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hostile_peers import Outcome, Peer, peers, play, stored_lines
from hypothesis import HealthCheck, given, settings
from websockets.asyncio.client import connect

from conftest import start_server
from helpers import NOW, Events, start_inner
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

PEERS = 250
TESTS, LINES = 40, 25
STREAMED_SUITE = f"""
import os, pathlib, time
import pytest

@pytest.mark.parametrize("i", range({TESTS}))
def test_lines(i):
    for j in range({LINES}):
        print(f"test {{i}} line {{j}}")
    time.sleep(0.02)

def test_zz_waits_for_the_fuzzing_to_end():
    release = pathlib.Path(os.environ["FUZZ_RELEASE"])
    deadline = time.time() + 120
    while not release.exists() and time.time() < deadline:
        time.sleep(0.02)
    print("released")
"""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def test_hostile_peers_never_break_the_ingest_and_a_real_run_is_stored_complete(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # few runs kept: the peers' runs are evicted as they finish, while the real run (running) stays
    server = start_server(pytester.path / ".mcpdebug", "--max-runs", "5")
    pytester.makepyfile(test_streamed=STREAMED_SUITE)
    release = pytester.path / "release"
    monkeypatch.setenv("FUZZ_RELEASE", str(release))
    inner = start_inner(pytester, "--mcp-debug")
    outcome = Outcome()
    rss_before = rss_kb(server.process.pid) if sys.platform == "linux" else 0

    @settings(
        max_examples=PEERS,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(peer=peers(max_size=protocol.MAX_MESSAGE_BYTES, oversized_rate=0.002))
    def hostile(peer: Any) -> None:
        play(peer, server.url, server.token, outcome)
        assert server.process.poll() is None, "the server died"

    try:
        hostile()
        # Two peers every run has, whatever hypothesis drew: each refusal must be in the log.
        play(Peer("raw", None, headers={"Authorization": "Bearer wrong"}), server.url, server.token, outcome)
        play(Peer("ws", "not a hello"), server.url, server.token, outcome)
        release.touch()
        output = inner.communicate(timeout=120)[0].decode()
        rss_after = rss_kb(server.process.pid) if rss_before else 0
    finally:
        release.touch()
        if inner.poll() is None:
            inner.kill()
        server.stop()
    assert inner.returncode == 0, output[-3000:]
    assert f"{TESTS + 1} passed" in output
    assert outcome.frames > PEERS, outcome
    assert rss_after - rss_before < 100_000, f"the server grew from {rss_before} to {rss_after} KB"
    log = server.log.read_text()
    assert "Traceback" not in log and "error on the connection" not in log, log[-3000:]
    assert "closing" in log and "refused" in log, "the peers were refused, and said so"

    store = Store(server.directory, create=False)
    runs = [r for r in store.runs() if r["status"] == "finished" and r["exit_status"] == 0]
    real = next(r for r in runs if r["counts"].get("passed") == TESTS + 1)
    for i in range(TESTS):
        nodeid = f"test_streamed.py::test_lines[{i}]"
        assert stored_lines(store, real["run_id"], nodeid) == [f"test {i} line {j}" for j in range(LINES)]
    assert stored_lines(store, real["run_id"], "test_streamed.py::test_zz_waits_for_the_fuzzing_to_end") == [
        "released"
    ]
    store.close()


@pytest.mark.anyio
async def test_a_peer_cannot_answer_for_or_take_over_another_process_session(tmp_path: Path) -> None:
    """Replies are matched to the process a request was sent to; a held session id stays its owner's."""
    store = Store(tmp_path / ".mcpdebug")
    server = IngestServer(store)
    await server.start()
    auth = {"Authorization": f"Bearer {server.token}"}
    victim_events, thief_events = Events("run-a", "main-1", t0=NOW), Events("run-b", "main-2", t0=NOW)

    def hello(events: Events) -> str:
        return json.dumps(
            {"type": "hello", "protocol": 1, "run_id": events.run_id, "process": events.process}
            | {"worker": "main", "pid": os.getpid()}
        )

    def held(events: Events) -> str:
        return protocol.encode(
            events(protocol.Held, session="run-a-main-1", nodeid="t.py::t", worker="main", when="call")
        ).decode()

    try:
        async with (
            connect(server.url, additional_headers=auth, proxy=None) as victim,
            connect(server.url, additional_headers=auth, proxy=None) as thief,
        ):
            for ws, events in ((victim, victim_events), (thief, thief_events)):
                await ws.send(hello(events))
                await ws.recv()  # welcome
                await ws.send(held(events))
                await ws.recv()  # ack
            session = server.sessions.get("run-a-main-1")
            assert session.key == ("run-a", "main-1"), "the second Held of that id did not take it over"

            async with anyio.create_task_group() as tasks:
                answers: list[dict[str, Any]] = []

                async def ask() -> None:
                    answers.append(await server.sessions.request("run-a-main-1", "locals", {}, timeout=60))

                tasks.start_soon(ask)
                request = protocol.decode_server_frame(await victim.recv())
                assert isinstance(request, protocol.Request)
                forged = protocol.Reply(id=request.id, result={"locals": "forged"})
                await thief.send(protocol.encode(forged).decode())
                await anyio.sleep(0.1)
                assert not answers, "a reply from another process answered the request"
                real = protocol.Reply(id=request.id, result={"locals": "real"})
                await victim.send(protocol.encode(real).decode())
            assert answers == [{"locals": "real"}]
    finally:
        await server.close()
        store.close()


def test_a_run_id_never_names_a_path_outside_the_store(tmp_path: Path) -> None:
    """Decoding refuses such run ids; the store holds even for one that got in some other way
    (`..` used to make the eviction of its run delete the whole `.mcpdebug/` folder)."""
    folder = tmp_path / ".mcpdebug"
    store = Store(folder)
    (folder / "processes").mkdir()
    (folder / "victim.log").write_text("keep me")
    for run_id in ("..", ".", "../victim", "", "a/b"):
        events = Events(run_id, t0=NOW)
        store.apply([events.run_started(), *events.test("t.py::t", output=[("call", "stdout", ["x"])])])
        store.delete_runs([run_id])
    assert (folder / "store.sqlite3").exists() and (folder / "victim.log").read_text() == "keep me"
    assert {p.name for p in (folder / "output").iterdir()} <= {"_..", "_.", "_.._victim", "_", "a_b"}
    store.close()
