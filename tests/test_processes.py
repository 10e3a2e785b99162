"""`mcpdebug run` and `mcpdebug forward` as a user meets them: real commands, a real `mcpdebug serve`
(killed with SIGKILL where durability is the point), and what the store then holds.

Every check reads the store the way the server and CLI do, after taking in what was spooled.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import MCPDEBUG, RunningServer, start_server
from helpers import recorded, run_inner, wait_for
from mcpdebug.store import Store
from mcpdebug.views import failure as failure_view
from mcpdebug.views import lookup
from mcpdebug.views import processes as processes_view
from pytest_mcpdebug import protocol
from pytest_mcpdebug.recording.sender import Sender
from pytest_mcpdebug.recording.spool import spool_file_name


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def servers() -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for running in started:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(10)


@pytest.fixture
def runners() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def run_cli(
    project: Path, *args: str, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([MCPDEBUG, *args], cwd=project, capture_output=True, timeout=timeout, **kwargs)


def start_cli(project: Path, *args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([MCPDEBUG, *args], cwd=project, **kwargs)


def sessions(project: Path) -> list[dict[str, Any]]:
    store = recorded(project / ".mcpdebug")
    try:
        return store.process_sessions()
    finally:
        store.close()


def lines_of(project: Path, label: str) -> list[str]:
    """Every stored line of a session, in order (its output file is one line per line)."""
    store = recorded(project / ".mcpdebug")
    try:
        try:
            session = processes_view.find(store, label)
        except lookup.NotFound:
            return []
        unit = store.db.execute(
            "SELECT id FROM outputs WHERE run_id=? AND unit=''", (session["run_id"],)
        ).fetchone()
        if unit is None:
            return []
        path = store.outputs.path(session["run_id"], unit[0])
        return path.read_text().splitlines()
    finally:
        store.close()


def script(project: Path, name: str, body: str) -> str:
    (project / name).write_text(textwrap.dedent(body))
    return name


# mcpdebug run ---------------------------------------------------------------------------------------


def test_run_streams_both_streams_and_exits_with_the_commands_status(project: Path, servers) -> None:
    servers.append(start_server(project / ".mcpdebug"))
    code = "import sys; print('ready'); print('ERROR bad thing', file=sys.stderr); sys.exit(3)"
    result = run_cli(project, "run", "--label", "backend", "--", sys.executable, "-c", code)
    assert result.returncode == 3
    assert result.stdout == b"ready\n"  # copied through, like tee
    assert b"ERROR bad thing\n" in result.stderr
    assert b'session "backend"' in result.stderr
    [session] = sessions(project)
    assert (session["label"], session["mode"], session["status"]) == ("backend", "run", "crashed")
    assert session["exit_code"] == 3 and session["finished"] is not None
    assert session["command"] == [sys.executable, "-c", code] and session["cwd"] == str(project)
    assert lines_of(project, "backend") == ["ready", "ERROR bad thing"]
    logs = run_cli(project, "logs", "backend", "--grep", "ERROR")  # the CLI takes the label as a run
    assert b">>> 2: [stderr] ERROR bad thing <<<" in logs.stdout, logs.stdout


def test_a_server_url_with_its_token_streams_and_never_shows_the_token(
    project: Path, servers, tmp_path: Path
) -> None:
    """`--server-url ws://...?token=T` (what `server.json` holds, pasted into CI): the session streams
    with the token in its connection's header, and what it prints names the server without it."""
    server = start_server(tmp_path / "elsewhere" / ".mcpdebug")
    servers.append(server)
    url = f"{server.url}?token={server.token}"
    result = run_cli(
        project, "run", "--label", "api", "--server-url", url, "--", sys.executable, "-c", "print(1)"
    )
    assert result.returncode == 0, result.stderr
    said = result.stderr.decode()
    assert 'session "api" (run ' in said and f"streaming to {server.url}" in said, said
    assert server.token not in said + result.stdout.decode()
    store = recorded(server.directory)
    try:
        [session] = store.process_sessions()
        assert session["label"] == "api" and session["exit_code"] == 0
    finally:
        store.close()


def test_a_signal_goes_to_the_command_and_ctrl_c_ends_it(project: Path, runners) -> None:
    name = script(
        project,
        "traps.py",
        """
        import signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *_: print("got SIGUSR1", flush=True))
        print("waiting", flush=True)
        while True:
            time.sleep(0.05)
        """,
    )
    runner = start_cli(project, "run", "--", sys.executable, name)
    runners.append(runner)
    assert runner.stdout is not None
    assert runner.stdout.readline() == b"waiting\n"
    runner.send_signal(signal.SIGUSR1)
    assert runner.stdout.readline() == b"got SIGUSR1\n"
    runner.send_signal(signal.SIGINT)
    assert runner.wait(60) == 128 + signal.SIGINT  # as a shell reports a command ended by SIGINT
    [session] = sessions(project)  # no server: it was spooled, and is read from there
    assert session["status"] == "stopped" and session["exit_code"] == -signal.SIGINT
    stored = lines_of(project, "traps")
    assert stored[:2] == ["waiting", "got SIGUSR1"] and stored[-1] == "KeyboardInterrupt"


def test_two_runners_asking_for_backend_get_backend_and_backend_2(project: Path, servers, runners) -> None:
    servers.append(start_server(project / ".mcpdebug"))
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    for _ in range(2):
        runners.append(start_cli(project, "run", "--label", "backend", "--", *sleeper))
        # one after the other: which one gets "backend" is then known
        wait_for(lambda: len(sessions(project)) == len(runners))
    first, second = sorted(sessions(project), key=lambda s: s["started"])
    assert (first["label"], second["label"]) == ("backend", "backend-2")
    runners[0].send_signal(signal.SIGTERM)
    assert runners[0].wait(60) == 128 + signal.SIGTERM
    runners.append(start_cli(project, "run", "--label", "backend", "--", *sleeper))
    wait_for(lambda: len(sessions(project)) == 3)
    newest = sessions(project)[0]
    assert newest["label"] == "backend"  # its first holder ended: the label is free again


def test_100000_lines_through_two_server_kills_are_stored_exactly_once(
    project: Path, servers, runners
) -> None:
    mcpdir = project / ".mcpdebug"
    servers.append(start_server(mcpdir))
    name = script(
        project,
        "count.py",
        """
        import sys, time
        for i in range(1, 100_001):
            print(f"line {i:06d}")
            if i % 1000 == 0:
                sys.stdout.flush()
                time.sleep(0.03)
        """,
    )
    runner = start_cli(project, "run", "--quiet", "--label", "counter", "--", sys.executable, name)
    runners.append(runner)
    for _ in range(2):
        time.sleep(1.0)
        servers[-1].process.kill()  # SIGKILL: no goodbye, unacknowledged events in flight
        servers[-1].process.wait(10)
        time.sleep(0.5)
        servers.append(start_server(mcpdir))
    assert runner.wait(120) == 0
    stored = lines_of(project, "counter")
    assert len(stored) == 100_000
    assert stored == [f"line {i:06d}" for i in range(1, 100_001)]  # none lost, none doubled, in order
    [session] = sessions(project)
    assert session["status"] == "stopped" and session["lines"] == 100_000


def test_without_any_server_the_session_is_spooled_and_ingested_later(project: Path) -> None:
    result = run_cli(project, "run", "--label", "offline", "--", sys.executable, "-c", "print('hi')")
    assert result.returncode == 0 and result.stdout == b"hi\n"
    assert b"no mcpdebug server reachable" in result.stderr
    assert list((project / ".mcpdebug" / "spool").glob("*.jsonl"))
    [session] = sessions(project)
    assert session["label"] == "offline" and session["status"] == "stopped"


def test_run_reports_a_command_that_cannot_start(project: Path) -> None:
    result = run_cli(project, "run", "--", "no-such-command-here")
    assert result.returncode == 127
    assert b"cannot run 'no-such-command-here'" in result.stderr
    [session] = sessions(project)
    assert session["status"] == "crashed" and "No such file" in session["message"]
    usage = run_cli(project, "run")
    assert usage.returncode == 2 and b"give the command to run" in usage.stderr


# mcpdebug forward -------------------------------------------------------------------------------------


def test_forward_follows_a_file_through_two_rotations_and_a_truncation(project: Path, servers) -> None:
    servers.append(start_server(project / ".mcpdebug"))
    log = project / "app.log"
    log.write_text("".join(f"early {i}\n" for i in range(3)))
    forward = start_cli(project, "forward", "--label", "app", str(log))
    expected = [f"early {i}" for i in range(3)]

    def write(prefix: str, count: int) -> None:
        with open(log, "a") as f:
            for i in range(count):
                f.write(f"{prefix} {i}\n")
                f.flush()
        expected.extend(f"{prefix} {i}" for i in range(count))

    wait_for(lambda: lines_of(project, "app") == expected)
    write("first", 200)
    os.rename(log, project / "app.log.1")  # rotation: the writer finishes the old file, then a new one
    write_old = open(project / "app.log.1", "a")  # noqa: SIM115
    write_old.write("late in the old file\n")
    write_old.close()
    expected.append("late in the old file")
    write("second", 200)
    wait_for(lambda: len(lines_of(project, "app")) == len(expected))
    os.rename(log, project / "app.log.2")
    write("third", 200)
    wait_for(lambda: len(lines_of(project, "app")) == len(expected))
    log.write_text("")  # copytruncate-style: the same file, emptied
    time.sleep(0.3)
    write("after truncation", 5)
    wait_for(lambda: len(lines_of(project, "app")) >= len(expected))
    forward.send_signal(signal.SIGINT)
    assert forward.wait(60) == 0
    assert lines_of(project, "app") == expected  # nothing lost or doubled
    [session] = sessions(project)
    assert (session["mode"], session["status"], session["source"]) == ("forward", "stopped", str(log))


def test_forward_reads_stdin_and_a_named_pipe(project: Path, runners) -> None:
    piped = run_cli(project, "forward", "--label", "k8s", "-", input=b"one\ntwo\nno newline")
    assert piped.returncode == 0
    assert lines_of(project, "k8s") == ["one", "two", "no newline"]
    fifo = project / "events.fifo"
    os.mkfifo(fifo)
    forward = start_cli(project, "forward", "--label", "pipe", str(fifo))
    runners.append(forward)
    for writer in ("first writer", "second writer"):  # writers come and go; the session goes on
        with open(fifo, "w") as f:
            f.write(f"{writer}\n")
    wait_for(lambda: lines_of(project, "pipe") == ["first writer", "second writer"])
    forward.send_signal(signal.SIGTERM)
    assert forward.wait(60) == 0
    labels = {s["label"]: s for s in sessions(project)}
    assert labels["k8s"]["source"] == "-" and labels["pipe"]["status"] == "stopped"


# The Sender under a process session ------------------------------------------------------------------


def test_a_server_keeping_its_store_elsewhere_gets_the_spool_over_the_connection(
    tmp_path: Path, servers
) -> None:
    """The runner's spool is in its folder, the server's store in another: the server cannot read
    the spool file, so the runner sends what it spooled once it connects."""
    mine, theirs = tmp_path / "mine" / ".mcpdebug", tmp_path / "theirs" / ".mcpdebug"
    hello = protocol.Hello(
        protocol=protocol.PROTOCOL_VERSION, run_id="far", process="run-1", worker="main", pid=1
    )
    target: list[tuple[str, str]] = []
    sender = Sender(
        hello=hello,
        spool_path=mine / "spool" / spool_file_name("far", "run-1"),
        discover=lambda: target[0] if target else None,
        reconnect=(0.1, 0.2),
    )
    sender.start(0.5)  # no server yet: its first attempt finds none at once
    events = [
        protocol.TestStarted(
            run_id="far", process="run-1", seq=n, ts=time.time(), nodeid=f"t{n}", worker="main"
        )
        for n in range(1, 201)
    ]
    for event in events[:150]:
        sender.send(event)
    wait_for(lambda: sender.spooled == 150)
    servers.append(start_server(theirs))
    target.append((servers[0].url, servers[0].token))
    wait_for(lambda: sender.connected)
    for event in events[150:]:
        sender.send(event)
    sender.close()
    store = Store(theirs)
    seqs = [r[0] for r in store.db.execute("SELECT seq FROM events WHERE run_id='far' ORDER BY seq")]
    store.close()
    assert seqs == list(range(1, 201))


def test_reconnection_backs_off_exponentially_up_to_its_limit(tmp_path: Path) -> None:
    attempts: list[float] = []

    def discover() -> None:
        attempts.append(time.monotonic())
        return None

    hello = protocol.Hello(protocol=protocol.PROTOCOL_VERSION, run_id="r", process="p", worker="main", pid=1)
    sender = Sender(hello=hello, spool_path=tmp_path / "s.jsonl", discover=discover, reconnect=(0.1, 0.4))
    sender.start(0.5)
    wait_for(lambda: len(attempts) >= 9)
    sender.close()
    gaps = [b - a for a, b in itertools.pairwise(attempts[:9])]
    for gap, wanted in zip(gaps, [0.1, 0.2, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4], strict=True):
        assert gap >= wanted - 0.01, gaps  # a busy machine may only make them longer
    # ... and the limit holds: doubling on, the last five gaps would take 0.8 + 1.6 + ... = 24.8 s
    assert sum(gaps[3:]) < 10.0, gaps


# The mcpdebug_process fixture -------------------------------------------------------------------------


def test_a_service_from_the_fixture_shows_in_its_failing_tests_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        web="""
        import sys
        from http.server import BaseHTTPRequestHandler, HTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/boom":
                    print("ERROR handling /boom: KeyError 'user'", file=sys.stderr, flush=True)
                self.send_response(500 if self.path == "/boom" else 200)
                self.end_headers()

        server = HTTPServer(("127.0.0.1", 0), Handler)
        print(f"listening on port {server.server_port}", flush=True)
        server.serve_forever()
        """,
        test_api="""
        import re, sys, time, urllib.request
        import pytest

        @pytest.fixture
        def web(mcpdebug_process):
            service = mcpdebug_process([sys.executable, "web.py"], label="web", ready=r"listening on port")
            port = re.search(r"port (\\d+)", service.wait_for("listening")).group(1)
            return f"http://127.0.0.1:{port}", service

        def test_ok(web):
            url, service = web
            assert urllib.request.urlopen(url + "/ok").status == 200
            service.wait_for("GET /ok", timeout=120)  # its line is read (and timed) before test_boom

        def test_boom(web):
            url, _ = web
            assert urllib.request.urlopen(url + "/boom").status == 200
        """,
    )
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=1, failed=1)
    store = recorded(pytester.path / ".mcpdebug")
    try:
        run = lookup.run(store, "latest")
        report = failure_view.get_failure(store, run, "test_api.py::test_boom").text
        services = store.process_sessions()
    finally:
        store.close()
    assert [(s["label"], s["status"], s["parent_run"]) for s in services] == [
        ("web", "stopped", run["run_id"])
    ] * 2
    section = report.split("--- process sessions during this test (web)")[1]
    assert "[web] stdout| listening on port" in section
    assert "[web] stderr| ERROR handling /boom: KeyError 'user'" in section
    assert (
        '"GET /boom HTTP/1.1" 500' in section and "GET /ok" not in section
    )  # test_ok's service is not in it
