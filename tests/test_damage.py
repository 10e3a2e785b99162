"""Damaged files cost little, keep what was intact, and say so once: spool garbage, a spool cut
mid-write, a store corrupted, deleted or read-only, a full disk under the server. Also how the store
names runs and tests whose processes died."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import Events
from mcpdebug.ingest.spool import DAMAGED_DIR, ingest_spool
from mcpdebug.store import Store
from mcpdebug.views import hang as hang_view
from mcpdebug.views import lookup, output_search
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import spool_dir
from pytest_mcpdebug.limits import Limits

RUN = "20261124-010203-abcdef"
HOST = socket.gethostname()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def finished_run(events: Events, pid: int) -> list[protocol.Event]:
    return [
        events.run_started(pid=pid, host=HOST),
        events.start(pid=pid, host=HOST),
        *events.test("t.py::test_a", output=[("call", "stdout", ["alpha", "beta"])]),
        *events.test("t.py::test_b", "failed", message="boom"),
        *events.run_finished(1),
    ]


def write_spool(directory: Path, name: str, parts: list[bytes]) -> Path:
    path = spool_dir(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(parts))
    return path


# Spool files ------------------------------------------------------------------------------------------


def test_garbage_in_a_spool_file_is_skipped_once_and_the_file_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = finished_run(Events(RUN, process="main-7"), pid=dead_pid())
    lines = [protocol.encode(e) + b"\n" for e in events]
    garbage = [b"\0" * 5000 + b"\n", b"{not json}\n", b"\0\0\0" + lines[3]]  # the last one is still whole
    spool = write_spool(tmp_path, f"{RUN}.main-7.jsonl", [*lines[:3], *garbage, *lines[4:]])
    store = Store(tmp_path)
    with caplog.at_level(logging.WARNING, "mcpdebug.ingest"):
        report = ingest_spool(store)
    assert report.new == len(events)  # every intact event, the one behind NULs too
    [message] = report.damaged
    assert caplog.text.count("is damaged") == 1  # one warning for the file, not one per line
    assert "skipped 2 bad line(s)" in message and f"kept its {len(events):,} good event(s)" in message
    assert not spool.exists() and (spool.parent / DAMAGED_DIR / spool.name).exists()
    assert store.run(RUN)["counts"] == {"passed": 1, "failed": 1}  # type: ignore[index]
    assert ingest_spool(store).files == 0  # set aside: never read again


def test_a_write_ahead_copy_ends_at_its_first_nul_without_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process killed while copying a test's end into its mapped ``.wal``: whole lines, then part
    of one, then the room the file was grown by (NULs). Every whole event is kept, nothing is called
    damaged, and the copy of a finished process is removed."""
    events = finished_run(Events(RUN, process="main-9"), pid=dead_pid())
    lines = [protocol.encode(e) + b"\n" for e in events]
    cut = lines[-1][: len(lines[-1]) // 2]
    wal = write_spool(tmp_path, f"{RUN}.main-9.wal", [*lines[:-1], cut, b"\0" * 1_048_576])
    store = Store(tmp_path)
    with caplog.at_level(logging.WARNING, "mcpdebug.ingest"):
        report = ingest_spool(store)
    assert report.new == len(events) - 1 and report.bad_lines == 0 and not report.damaged
    assert "damaged" not in caplog.text
    assert not (wal.parent / DAMAGED_DIR / wal.name).exists()


def test_a_huge_file_of_nuls_is_read_once_in_bounded_memory(tmp_path: Path) -> None:
    spool = spool_dir(tmp_path) / f"{RUN}.gw0-1.jsonl"
    spool.parent.mkdir(parents=True)
    with open(spool, "wb") as fh:  # more than any event can be, without a single line break
        fh.truncate(protocol.MAX_MESSAGE_BYTES + 4 * 1024 * 1024)
    store = Store(tmp_path)
    import tracemalloc

    tracemalloc.start()
    report = ingest_spool(store)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * protocol.MAX_MESSAGE_BYTES  # never the whole file
    [message] = report.damaged
    assert "without a line break" in message and "kept its 0 good event(s)" in message
    assert (spool.parent / DAMAGED_DIR / spool.name).exists()


def test_a_spool_cut_mid_write_keeps_every_whole_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = finished_run(Events(RUN, process="main-8"), pid=dead_pid())[:-2]  # died before its end
    lines = [protocol.encode(e) + b"\n" for e in events]
    spool = write_spool(tmp_path, f"{RUN}.main-8.jsonl", [*lines, lines[0][:17]])
    store = Store(tmp_path)
    with caplog.at_level(logging.WARNING, "mcpdebug.ingest"):
        assert ingest_spool(store).new == len(events)
    assert "ended with an unfinished line (17 bytes" in caplog.text
    assert not spool.exists()
    assert store.run(RUN)["status"] == "crashed"  # type: ignore[index]


# The store file ----------------------------------------------------------------------------------------


def test_a_corrupted_store_is_set_aside_and_rebuilt_from_what_remains(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = Events("20261124-000001-000001", process="main-9")
    store.apply(finished_run(old, pid=dead_pid()))  # its output is in an output file
    store.close()
    pending = finished_run(Events(RUN, process="main-10"), pid=dead_pid())
    write_spool(tmp_path, f"{RUN}.main-10.jsonl", [protocol.encode(e) + b"\n" for e in pending])
    (tmp_path / "store.sqlite3").write_bytes(os.urandom(16384))
    (tmp_path / "store.sqlite3-wal").unlink(missing_ok=True)

    reopened = Store(tmp_path)
    message = rebuild_message(reopened)
    assert "was corrupted" in message and "1 run(s) from spool files" in message
    assert "the output of 1 test(s) of 1 other run(s) from output files" in message
    assert "damaged-store-" in message
    recovered = reopened.run("20261124-000001-000001")
    assert recovered is not None and recovered["status"] == "recovered"
    assert reopened.tests(recovered["run_id"])[0]["status"] == "unknown"
    assert reopened.run(RUN)["counts"] == {"passed": 1, "failed": 1}  # type: ignore[index]
    [aside] = tmp_path.glob("damaged-store-*")
    assert (aside / "store.sqlite3").exists()


def rebuild_message(store: Store) -> str:
    from mcpdebug.ingest.recovery import rebuild

    message = rebuild(store)
    assert message is not None
    return message


def test_a_store_deleted_while_open_keeps_its_content(tmp_path: Path) -> None:
    store = Store(tmp_path)
    events = Events(RUN, process="main-11")
    store.apply(finished_run(events, pid=os.getpid())[:5])
    for name in ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    store.apply([events(protocol.TestStarted, nodeid="t.py::test_c", worker="main")])
    assert (tmp_path / "store.sqlite3").exists()
    again = Store(tmp_path)  # what another process (the CLI) sees
    assert {t["nodeid"] for t in again.tests(RUN)} == {"t.py::test_a", "t.py::test_c"}


def test_a_store_corrupted_while_open_is_rebuilt_on_the_next_read(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.apply(finished_run(Events(RUN, process="main-12"), pid=dead_pid()))
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()  # a new connection reads the file, as a tool call's thread does
    with open(tmp_path / "store.sqlite3", "r+b") as fh:
        fh.write(os.urandom(8192))
    statuses = lookup.reading(store, lambda: [(r["run_id"], r["status"]) for r in store.runs()])
    assert statuses == [(RUN, "recovered")]  # its output survived; its outcomes were in the database


def test_a_read_only_store_is_readable(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.apply(finished_run(Events(RUN, process="main-13"), pid=dead_pid()))
    store.close()
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: the store cannot be made read-only for this process")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        shown = subprocess.run(
            [*prefix, str(Path(sys.executable).parent / "mcpdebug"), "show", "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert shown.returncode == 0, shown.stderr
    assert f"Run {RUN} (pytest): finished" in shown.stdout and "FAILED t.py::test_b" in shown.stdout
    assert "is read-only here" in shown.stderr


# Dead runs and crashed tests ---------------------------------------------------------------------------


def test_a_run_killed_before_its_start_was_stored_is_crashed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    worker = Events(RUN, process="gw0-1", worker="gw0")
    store.apply(
        [
            worker.start(pid=dead_pid(), host=HOST),
            worker(protocol.TestStarted, nodeid="t.py::x", worker="gw0"),
        ]
    )
    [run] = store.runs()
    assert run["status"] == "crashed" and run["counts"] == {"running": 1}


def test_a_connection_lost_from_another_host_names_its_run_crashed_until_it_returns(tmp_path: Path) -> None:
    store = Store(tmp_path)
    main = Events(RUN, process="main-5")
    store.apply([main.run_started(pid=5, host="ci-runner"), main.start(pid=5, host="ci-runner")])
    assert store.run(RUN)["status"] == "running"  # type: ignore[index]
    store.connection_closed(RUN, "main-5")
    assert store.run(RUN)["status"] == "crashed"  # type: ignore[index]
    store.connection_opened(RUN)  # it had lost the server, not died
    assert store.run(RUN)["status"] == "running"  # type: ignore[index]


def test_a_run_from_another_host_silent_for_an_hour_is_crashed(tmp_path: Path) -> None:
    """A spool copied from a CI machine where the run died: no pid to check, no connection to lose."""
    store = Store(tmp_path)
    main = Events(RUN, process="main-6")
    store.apply([main.run_started(pid=6, host="ci-runner"), main.start(pid=6, host="ci-runner")])
    assert store.run(RUN)["status"] == "running"  # type: ignore[index]
    store.db.execute("UPDATE runs SET last_event=last_event-7200, stored=stored-7200")
    assert store.run(RUN)["status"] == "crashed"  # type: ignore[index]


def test_get_failure_of_a_test_whose_worker_died_shows_what_exists(tmp_path: Path) -> None:
    store = Store(tmp_path)
    worker = Events(RUN, process="gw0-3", worker="gw0")
    controller = Events(RUN, process="controller-2", worker="controller")
    crash = "worker 'gw0' crashed while running 't.py::test_b'"
    store.apply(
        [
            controller.run_started(pid=dead_pid(), host=HOST),
            worker.start(pid=dead_pid(), host=HOST),
            *worker.test("t.py::test_a", "failed", message="assert 1 == 2"),
            worker(protocol.TestStarted, nodeid="t.py::test_b", worker="gw0"),
            worker.output("t.py::test_b", ["last words"]),
            controller(
                protocol.PhaseFinished,
                nodeid="t.py::test_b",
                worker="gw0",
                when="call",
                outcome="failed",
                duration=0.0,
                message=crash,
                longrepr=crash,
            ),
            controller(
                protocol.TestFinished, nodeid="t.py::test_b", worker="gw0", outcome="failed", duration=0.0
            ),
            *controller.run_finished(1),
        ]
    )
    store.apply(
        [
            worker(
                protocol.FailureSnapshot,
                nodeid="t.py::test_a",
                worker="gw0",
                when="call",
                snapshot=protocol.Snapshot(
                    exception=protocol.SnapshotException(type="AssertionError", message="assert 1 == 2")
                ),
            )
        ]
    )
    run = store.run(RUN)
    assert run is not None
    text = hang_view.failure_or_hang(store, run, "test_b").text
    assert text.startswith(f"FAILED t.py::test_b (call) in run {RUN}: {crash}")
    assert "No snapshot of its frames" in text and "last words" in text
    assert "get_output(" in text and "get_variables" not in text  # only calls that work


def test_a_search_says_how_many_middle_lines_were_dropped(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_test_output=64 * 1024))
    events = Events(RUN, process="main-14")
    lines = [f"line {i:05d} " + "x" * 60 for i in range(3000)]
    store.apply(
        [
            events.run_started(pid=os.getpid(), host=HOST),
            events.start(pid=os.getpid(), host=HOST),
            *events.test("t.py::test_big", output=[("call", "stdout", lines)]),
        ]
    )
    run = store.run(RUN)
    assert run is not None
    found = output_search.search_output(
        store, run, "line 01500 ", "t.py::test_big"
    )  # an answer, not an error
    assert found.total == 0
    assert "lines in the middle of the output were dropped when recorded" in found.render()


# A full disk under the server ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_full_disk_closes_the_stream_with_a_reason_and_the_server_stays_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    from mcpdebug.ingest.websocket import IngestServer

    disk = tmp_path / "disk"
    disk.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)]).returncode
    ):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        store = Store(disk / ".mcpdebug")
        ingest = IngestServer(store)
        await ingest.start()
        events = Events(RUN, process="main-20")
        auth = {"Authorization": f"Bearer {ingest.token}"}

        async def hello(ws: object) -> None:
            await ws.send(
                protocol.encode(
                    protocol.Hello(
                        protocol=protocol.PROTOCOL_VERSION,
                        run_id=RUN,
                        process="main-20",
                        worker="main",
                        pid=os.getpid(),
                    )
                ).decode()
            )  # type: ignore[attr-defined]
            assert isinstance(protocol.decode_server_frame(await ws.recv()), protocol.Welcome)  # type: ignore[attr-defined]

        with caplog.at_level(logging.WARNING, "mcpdebug.ingest"):
            async with connect(ingest.url, additional_headers=auth) as ws:
                await hello(ws)
                await ws.send(protocol.encode(events.run_started(pid=os.getpid(), host=HOST)))
                with pytest.raises(ConnectionClosed) as closed:
                    for n in range(200):
                        await ws.send(protocol.encode(events.output(f"t.py::test_{n}", ["y" * 100_000])))
                        await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
            assert "the server cannot store events" in closed.value.rcvd.reason
            assert "they stay with the test process" in caplog.text
            async with connect(ingest.url, additional_headers=auth) as ws:  # still up, still answering
                await hello(ws)
        assert store.run(RUN) is not None  # what was stored before the disk filled is kept
        await ingest.close()
        store.close()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
