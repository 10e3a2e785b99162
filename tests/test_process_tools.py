"""The process tools as an agent meets them: a real `mcpdebug serve` (streamable HTTP), the SDK's
client, real services, real inner `pytest --mcp-debug` runs against them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client

from conftest import MCPDEBUG, RunningServer, start_server
from helpers import FAST, both_forms, http_client, recorded, wait_for
from mcpdebug.store import Store
from pytest_mcpdebug.folder import pid_alive

T = TypeVar("T")

WEB = """
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/boom":
                print(f"ERROR handling {self.path}: ZeroDivisionError", file=sys.stderr, flush=True)
                self.send_response(500)
            else:
                self.send_response(200)
            self.end_headers()

    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on port {server.server_port}", flush=True)
    server.serve_forever()
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(tmp_path / ".mcpdebug")
    yield running
    running.stop()


PROCESS_TOOLS = {"start_process", "control_process", "send_stdin"}


def text(result: Any) -> str:
    return str(result.content[0].text)


def write(folder: Path, name: str, body: str) -> str:
    (folder / name).write_text(textwrap.dedent(body))
    return name


class Agent:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, **arguments: Any) -> Any:
        """The process tools' structured reply, another tool's text; asserting it is not an error."""
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, text(result)
        return result.structured_content if tool in PROCESS_TOOLS else both_forms(result)

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, text(result)
        return text(result)

    async def until(self, check: Callable[[], Awaitable[T | None]], timeout: float = 60.0) -> T:
        with anyio.fail_after(timeout):
            while True:
                found = await check()
                if found:
                    return found
                await anyio.sleep(0.05)

    async def session(self, label: str) -> str:
        """The list_sessions line of a process session."""
        listing = await self.call("list_sessions")
        return next(line for line in listing.splitlines() if line.startswith(f"- {label} "))


def with_agent(server: RunningServer, scenario: Callable[[Agent], Awaitable[T]]) -> T:
    async def main() -> T:
        async with http_client(server.mcp_url, server.mcp_token) as client:
            return await scenario(Agent(client))

    return anyio.run(main)


def test_a_service_error_and_the_failing_test_line_up_in_get_logs(
    served: RunningServer, tmp_path: Path
) -> None:
    write(tmp_path, "web.py", WEB)
    tests = """
        import os, pathlib, time, urllib.request
        BASE = "http://127.0.0.1:" + os.environ["WEB_PORT"]
        def stored(text):
            files = pathlib.Path(".mcpdebug", "output").rglob("*")
            return any(text in f.read_text(errors="replace") for f in files if f.is_file())
        def test_ok():
            assert urllib.request.urlopen(BASE + "/ok").status == 200
            deadline = time.monotonic() + 120
            while not stored("GET /ok"):  # its log line is read, timed and stored before test_boom
                assert time.monotonic() < deadline, "the service's line never reached the store"
                time.sleep(0.05)
        def test_boom():
            assert urllib.request.urlopen(BASE + "/boom").status == 200
    """
    write(tmp_path, "test_api.py", tests)

    async def scenario(agent: Agent) -> tuple[Any, str, str, str]:
        started = await agent.call("start_process", command="python web.py", label="web", startup_seconds=1)

        async def listening() -> re.Match[str] | None:  # on a busy machine it may take more than 1 s
            return re.search(r"listening on port (\d+)", await agent.call("get_logs", labels=["web"]))

        port = await agent.until(listening)
        run = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [sys.executable, "-m", "pytest", *FAST, "--mcp-debug", "test_api.py"],
                cwd=tmp_path,
                env={**os.environ, "WEB_PORT": port[1]},
                capture_output=True,
                text=True,
                timeout=120,
            )
        )
        run_id = re.search(r"mcpdebug: run (\S+) streamed", run.stdout)
        assert run.returncode == 1 and run_id, run.stdout
        logs = await agent.call(
            "get_logs", labels=["web", run_id[1]], pattern=r"ERROR| 500\b"
        )  # not "|500": a port such as 45003
        failure = await agent.call("get_failure", run_id=run_id[1], test="test_api.py::test_boom")
        return started, logs, failure, run_id[1]

    started, logs, failure, run_id = with_agent(served, scenario)
    session = started["session"]
    assert (session["label"], session["mode"], session["status"]) == ("web", "managed", "running")
    assert pid_alive(session["pid"]) and session["command"] == ["python", "web.py"]
    assert 'sessions_queried: ["web", "' + run_id + '"]' in logs
    body = [re.sub(r"^\S+ ", "", line) for line in logs.splitlines() if line.startswith("20")]
    assert len(body) == 3, logs
    assert body[0] == "[web] stderr| ERROR handling /boom: ZeroDivisionError"
    assert body[1].startswith("[web] stderr| 127.0.0.1 - - [") and '"GET /boom HTTP/1.1" 500 -' in body[1]
    assert body[2] == (
        f"[{run_id}] test_api.py::test_boom failure| FAILED test_api.py::test_boom (call): "
        "urllib.error.HTTPError: HTTP Error 500: Internal Server Error"
    )
    stamps = [line.split(" ")[0] for line in logs.splitlines() if line.startswith("20")]
    assert stamps == sorted(stamps)  # in time order
    # The failure report shows what the service wrote while the test ran.
    assert "--- process sessions during this test (web)" in failure
    assert "[web] stderr| ERROR handling /boom: ZeroDivisionError" in failure
    assert "GET /ok" not in failure.split("--- process sessions")[1]  # test_ok's request is not this test's


def test_a_crashing_process_restarts_on_failure_and_sigterm_stops_it(
    served: RunningServer, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "flaky.py",
        """
        import os, sys, time
        marker = "crashed-once"
        if not os.path.exists(marker):
            open(marker, "w").close()
            print("ERROR: lost the database", file=sys.stderr, flush=True)
            time.sleep(0.3)
            sys.exit(3)
        print("up again", flush=True)
        time.sleep(300)
        """,
    )

    async def scenario(agent: Agent) -> tuple[Any, str, str, Any, str]:
        started = await agent.call(
            "start_process", command=["python", "flaky.py"], restart="on-failure", startup_seconds=0
        )

        async def crashed() -> str | None:
            line = await agent.session("flaky")
            return line if "crashed" in line else None

        async def running_again() -> str | None:
            line = await agent.session("flaky")
            pid = re.search(r"running, pid (\d+)", line)
            return line if pid and int(pid[1]) != started["session"]["pid"] else None

        seen_crashed = await agent.until(crashed)
        seen_running = await agent.until(running_again)
        stopped = await agent.call("control_process", label="flaky", action="signal", signal="SIGTERM")
        return started, seen_crashed, seen_running, stopped, await agent.session("flaky")

    started, crashed, running, stopped, after = with_agent(served, scenario)
    assert started["session"]["label"] == "flaky"  # named after the script
    assert (
        "[managed] crashed" in crashed and "exit status 3; restarting in 1 s (restart=on-failure)" in crashed
    )
    new_pid = int(re.search(r"pid (\d+)", running)[1])  # type: ignore[index]
    assert new_pid != started["session"]["pid"] and "1 restart(s)" in running
    assert stopped["pid"] == new_pid and stopped["session"]["status"] == "stopped"
    assert stopped["message"] == (
        f"flaky: SIGTERM sent to process {new_pid} and its group; now stopped (killed by SIGTERM; "
        "sent by control_process)"
    )
    assert "[managed] stopped" in after  # and not restarted, whatever its policy
    assert not pid_alive(new_pid)


def test_send_stdin_is_answered_in_the_log(served: RunningServer, tmp_path: Path) -> None:
    """How soon (half a second when idle) is measured by benchmarks/latencies.py."""
    write(
        tmp_path,
        "repl.py",
        """
        import sys
        print("ready", flush=True)
        for line in sys.stdin:
            print(f"answer: {line.strip().upper()}", flush=True)
        """,
    )

    async def scenario(agent: Agent) -> tuple[Any, str]:
        await agent.call("start_process", command="python repl.py", label="repl", startup_seconds=0.5)

        async def ready() -> bool:  # the program reads its stdin from here on
            return "stdout| ready" in await agent.call("get_logs", labels=["repl"])

        await agent.until(ready)
        sent = await agent.call("send_stdin", label="repl", input="ping\n")

        async def answered() -> str | None:
            logs = await agent.call("get_logs", labels=["repl"], pattern="answer")
            return logs if "answer: PING" in logs else None

        logs = await agent.until(answered)
        return sent, logs

    sent, logs = with_agent(served, scenario)
    assert sent["bytes_sent"] == 5 and sent["success"]
    assert "[repl] stdout| answer: PING" in logs


def test_a_mcpdebug_run_session_is_disconnected_while_its_server_is_away(tmp_path: Path) -> None:
    mcpdir = tmp_path / ".mcpdebug"
    first = start_server(mcpdir)
    sleeper = [sys.executable, "-u", "-c", "import time\nwhile True: print('tick'); time.sleep(0.2)"]
    runner = subprocess.Popen([MCPDEBUG, "run", "--quiet", "--label", "worker", "--", *sleeper], cwd=tmp_path)
    second: RunningServer | None = None
    try:
        wait_for(lambda: _live_label(mcpdir) == "worker")
        runner.send_signal(signal.SIGSTOP)  # so it cannot reconnect before the new server is asked
        first.process.kill()
        first.process.wait(10)
        second = start_server(mcpdir)

        async def scenario(agent: Agent) -> tuple[str, str, Any]:
            away = await agent.session("worker")
            runner.send_signal(signal.SIGCONT)  # it notices the lost server and reconnects by itself

            async def back() -> str | None:
                line = await agent.session("worker")
                return line if "] running" in line else None

            again = await agent.until(back)
            restarted = await agent.call("control_process", label="worker", action="restart")
            return away, again, restarted

        away, again, restarted = with_agent(second, scenario)
        assert "[run] disconnected" in away
        assert "[run] running" in again
        assert restarted["old_pid"] != restarted["pid"] and restarted["session"]["pid"] == restarted["pid"]
        assert restarted["session"]["restarts"] == 1 and runner.poll() is None  # the runner goes on
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(60)
        for server in (first, second):
            if server is not None:
                server.stop()


def test_managed_processes_end_with_the_server_even_when_it_is_killed(tmp_path: Path) -> None:
    write(tmp_path, "svc.py", "import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    pids = []
    for stop in (signal.SIGTERM, signal.SIGKILL):
        server = start_server(tmp_path / ".mcpdebug")

        async def scenario(agent: Agent) -> Any:
            return await agent.call(
                "start_process", command="python svc.py", label="svc", startup_seconds=0.5
            )

        started = with_agent(server, scenario)
        pid = started["session"]["pid"]
        assert pid_alive(pid)
        server.process.send_signal(stop)
        server.process.wait(20)
        wait_for(lambda pid=pid: not pid_alive(pid))  # SIGKILL too: its runner saw the pipe close
        pids.append(pid)

    # What the runners said last went over the socket (SIGTERM) or to the spool (SIGKILL): both stored.
    def ended() -> list[dict[str, Any]]:
        store = recorded(tmp_path / ".mcpdebug")
        found = store.process_sessions()
        store.close()
        return found if all(s["finished"] is not None for s in found) else []

    sessions = wait_for(ended)  # the last runner may still be spooling its last words
    assert [(s["label"], s["status"], s["pid"]) for s in sessions] == [
        ("svc", "stopped", p) for p in reversed(pids)
    ]
    assert all(s["message"] == "killed by SIGTERM; the process that started it ended" for s in sessions)


def test_process_tool_errors_say_what_to_do(served: RunningServer, tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("a line\n")
    forward = subprocess.Popen([MCPDEBUG, "forward", "--quiet", "app.log"], cwd=tmp_path)

    async def scenario(agent: Agent) -> dict[str, str]:
        await agent.until(lambda: _has_session(agent, "app.log"))
        errors = {
            "unknown": await agent.error("control_process", label="nope", action="restart"),
            "forward": await agent.error("send_stdin", label="app.log", input="x"),
            "missing": await agent.error("start_process", command="no-such-program --flag"),
            "quote": await agent.error("start_process", command="python 'unclosed"),
            "cwd": await agent.error("start_process", command="python x.py", cwd=str(tmp_path / "nowhere")),
        }
        await agent.call("start_process", command=[sys.executable, "-c", "print('bye')"], label="short")
        errors["ended"] = await agent.error(
            "control_process", label="short", action="signal", signal="SIGHUP"
        )
        return errors

    try:
        errors = with_agent(served, scenario)
    finally:
        forward.send_signal(signal.SIGTERM)
        forward.wait(60)
    assert "No process session 'nope'. Process sessions: app.log." in errors["unknown"]
    assert "app.log forwards " in errors["forward"] and "no process to control" in errors["forward"]
    assert "No command 'no-such-program' on PATH" in errors["missing"]
    assert "cannot be split as a shell would" in errors["quote"]
    assert "is not a directory" in errors["cwd"]
    assert (
        "short has ended (stopped: exit status 0)" in errors["ended"] and "start_process(" in errors["ended"]
    )


def _live_label(mcpdir: Path) -> str | None:
    store = Store(mcpdir)
    try:
        found = [s["label"] for s in store.process_sessions() if s["status"] == "running"]
        return found[0] if found else None
    finally:
        store.close()


async def _has_session(agent: Agent, label: str) -> bool:
    return f"- {label} " in str(await agent.call("list_sessions"))


def test_start_process_replies_with_every_field_of_the_session(served: RunningServer, tmp_path: Path) -> None:
    async def scenario(agent: Agent) -> Any:
        return await agent.call(
            "start_process", command="sleep 30", label="nap", cwd=str(tmp_path), startup_seconds=0
        )

    reply = with_agent(served, scenario)
    assert set(reply["session"]) >= {
        "label", "mode", "status", "pid", "exit_code", "command", "cwd", "started", "exited", "lines", "bytes",
    }  # fmt: skip
    assert reply["text"].startswith("Started nap: running, pid ")
    assert json.dumps(reply)  # plain JSON all through
