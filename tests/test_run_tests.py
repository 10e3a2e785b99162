"""Managed runs through MCP: run_tests, wait_for_stop, close_session and the live tools on held tests.

Each test wires a server as `mcpdebug serve` does, in this event loop: a real ingest WebSocket on
port 0, live sessions, a runner that spawns real inner `pytest --mcp-debug` processes in the
pytester folder, and the SDK's in-memory client.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from helpers import FAST, both_forms
from mcpdebug.app import build_server
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes import test_runs
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store

pytestmark = pytest.mark.anyio

# A failing test left held by a broken assertion here must not outlive the test by 300 s.
ARGS = [*FAST, "-p", "no:randomly", "--mcp-debug-break-timeout", "60"]
DEADLINE = 60.0
STOPPED = re.compile(r"held alive as session (?P<session>\S+) \(run (?P<run>\S+), worker main\)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Live:
    store: Store
    sessions: Sessions
    runner: Runner
    client: Client

    async def call(self, tool: str, **arguments: Any) -> str:
        """A tool's reply text, asserting it is not an error."""
        result = await self.client.call_tool(tool, arguments)
        text = reply_text(result)
        assert not result.is_error, text
        both_forms(result)  # clients showing either form see it all
        return text

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.client.call_tool(tool, arguments)
        text = reply_text(result)
        assert result.is_error, text
        return text

    async def run(self, cwd: Path, *args: str, **arguments: Any) -> str:
        with anyio.fail_after(DEADLINE):
            return await self.call("run_tests", args=[*ARGS, *args], cwd=str(cwd), **arguments)

    async def wait(self, run_id: str, **arguments: Any) -> str:
        with anyio.fail_after(DEADLINE):
            return await self.call("wait_for_stop", id=run_id, timeout=DEADLINE - 5, **arguments)

    async def evaluate(self, session: str, expression: str, **arguments: Any) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(
            await self.call("evaluate_expression", session_id=session, expression=expression, **arguments)
        )
        return reply


def reply_text(result: Any) -> str:
    assert len(result.content) == 1
    text: str = result.content[0].text
    return text


def stop_ids(reply: str) -> tuple[str, str]:
    """(session id, run id) of a STOPPED reply."""
    assert reply.startswith("STOPPED: "), reply
    found = STOPPED.search(reply)
    assert found, reply
    return found["session"], found["run"]


@pytest.fixture
async def live(pytester: pytest.Pytester) -> AsyncIterator[Live]:
    store = Store(pytester.path / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    try:
        async with Client(build_server(store, sessions, runner)) as client:
            yield Live(store, sessions, runner, client)
    finally:
        with anyio.fail_after(test_runs.STOP_GRACE + 30):
            await runner.close()  # a run left held or sleeping by a failed assertion is stopped
            await ingest.close()
        store.close()


TWO_FAILURES = """
def scaled(values):
    scale = 3
    total = sum(values) * scale
    raise ValueError(f"bad total {total}")

def test_first():
    values = [1, 2, 3]
    label = "first"
    scaled(values)

def test_ok():
    pass

def test_second():
    count = 41
    assert count + 1 == 43
"""


async def test_break_on_failure_stops_at_each_failure_then_finishes(
    pytester: pytest.Pytester, live: Live
) -> None:
    path = pytester.makepyfile(test_two=TWO_FAILURES)
    reply = await live.run(pytester.path, break_on_failure=True)
    session, run_id = stop_ids(reply)
    assert reply.startswith(
        f"STOPPED: test_two.py::test_first failed in call and is held alive as session {session}"
    )
    assert "ValueError: bad total 18" in reply
    assert f"Raised at {path}:4 in scaled()" in reply
    assert '  > 4 |     raise ValueError(f"bad total {total}")' in reply
    for local in (
        "values (list) = [1, 2, 3] [ref 1]",
        "scale (int) = 3",
        "total (int) = 18",
        "label (str) = 'first'",
    ):
        assert local in reply
    assert f"Test frame: {path}:9 in test_first()" in reply
    assert f'continue_execution(session_id="{session}")' in reply

    listed = await live.call("list_sessions")
    assert listed.startswith("Held now, live (1)")
    assert f"- session {session}: test_two.py::test_first (call failed), run {run_id}" in listed

    # The test's frame by default; frame 0 is the raise point.
    evaluated = await live.evaluate(session, "len(values) + len(label)")
    assert (evaluated["result"], evaluated["type"], evaluated["frame"]["name"]) == ("8", "int", "test_first")
    evaluated = await live.evaluate(session, "total // scale", frame_id=0)
    assert (evaluated["result"], evaluated["frame"]["name"]) == ("6", "scaled")
    assert (await live.evaluate(session, "values.append(4); [v * 2 for v in values]"))[
        "result"
    ] == "[2, 4, 6, 8]"

    continued = json.loads(await live.call("continue_execution", session_id=session))
    assert continued["success"] and continued["state"] == "running"
    assert f'wait_for_stop(id="{run_id}")' in continued["message"]

    reply = await live.wait(run_id)
    second, same_run = stop_ids(reply)
    assert (same_run, reply.startswith("STOPPED: test_two.py::test_second failed in call")) == (run_id, True)
    assert second != session
    assert "AssertionError: assert (41 + 1) == 43" in reply
    assert "count (int) = 41" in reply
    assert "Run so far: 1 failed, 1 passed, 1 running" in reply
    stale = await live.error("evaluate_expression", session_id=session, expression="1")
    assert f"Session {session} is not held any more (it was continued)" in stale
    assert (await live.evaluate(second, "count * 2"))["result"] == "82"

    await live.call("continue_execution", session_id=second)
    reply = await live.wait(run_id)
    assert reply.startswith(f"FINISHED: run {run_id}.")
    assert "finished, exit status 1 (tests failed)" in reply
    assert "Tests: 3 collected; 2 failed, 1 passed" in reply
    assert "- FAILED test_two.py::test_first (call): ValueError: bad total 18" in reply
    assert "- FAILED test_two.py::test_second (call): assert (41 + 1) == 43" in reply
    terminal = reply.split("pytest's terminal output (last ")[1]
    assert f"all of it in {live.store.dir / 'processes' / run_id}.log" in terminal
    assert re.search(r"\n=+ 2 failed, 1 passed in [\d.]+s =+$", terminal), terminal
    assert live.sessions.held() == []


async def test_without_break_a_passing_suite_finishes(pytester: pytest.Pytester, live: Live) -> None:
    pytester.makepyfile(
        test_fine="""
        import os

        def test_a():
            pass

        def test_env_is_passed():
            assert os.environ["PROJECT_FLAG"] == "on"
        """
    )
    reply = await live.run(pytester.path, "-v", env={"PROJECT_FLAG": "on"})
    run_id = re.match(r"FINISHED: run (\S+)\.\n", reply)
    assert run_id, reply
    assert "finished, exit status 0 (all tests passed)" in reply
    assert "Tests: 2 collected; 2 passed" in reply
    assert "test_fine.py::test_env_is_passed PASSED" in reply  # the terminal tail
    assert live.runner.runs[run_id[1]].returncode == 0


SLOW = """
import os, time

def test_quick():
    pass

def test_slow():
    deadline = time.monotonic() + 30
    while not os.path.exists("release") and time.monotonic() < deadline:
        time.sleep(0.05)

def test_last():
    pass
"""


async def test_timeout_returns_running_and_wait_reports_progress(
    pytester: pytest.Pytester, live: Live
) -> None:
    pytester.makepyfile(test_slow=SLOW)
    started = time.monotonic()
    reply = await live.run(pytester.path, timeout=1)
    assert time.monotonic() - started < 25  # at its timeout, not at the run's end (30 s away)
    found = re.match(r"RUNNING: run (\S+) has not stopped at a failure or finished yet", reply)
    assert found, reply
    run_id = found[1]
    assert f'wait_for_stop("{run_id}", timeout=...) waits again' in reply

    messages: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        if "running test_slow.py::test_slow" in (message or ""):
            (pytester.path / "release").touch()  # the slow test ends once it was reported running

    with anyio.fail_after(DEADLINE):
        result = await live.client.call_tool(
            "wait_for_stop", {"id": run_id, "timeout": 50}, progress_callback=progress
        )
    reply = reply_text(result)
    assert reply.startswith(f"FINISHED: run {run_id}."), reply
    assert "Tests: 3 collected; 3 passed" in reply
    assert messages, "no progress notification during a wait of over 2 s"
    assert "1 of 3 tests done; running test_slow.py::test_slow" in messages


def failing_project(folder: Path, value: str) -> None:
    folder.mkdir()
    (folder / "test_one.py").write_text(
        f"def test_value():\n    value = {value!r}\n    only_{value} = 1\n    assert value == 'other'\n"
    )


async def test_concurrent_runs_are_kept_apart(pytester: pytest.Pytester, live: Live) -> None:
    failing_project(pytester.path / "a", "alpha")
    failing_project(pytester.path / "b", "beta")
    replies: dict[str, str] = {}

    async def start(name: str) -> None:
        replies[name] = await live.run(pytester.path / name, break_on_failure=True)

    async with anyio.create_task_group() as group:
        group.start_soon(start, "a")
        group.start_soon(start, "b")
    (session_a, run_a), (session_b, run_b) = stop_ids(replies["a"]), stop_ids(replies["b"])
    assert run_a != run_b and session_a != session_b
    assert f"Raised at {pytester.path / 'a' / 'test_one.py'}:4" in replies["a"]
    assert f"Raised at {pytester.path / 'b' / 'test_one.py'}:4" in replies["b"]
    listed = await live.call("list_sessions")
    assert listed.startswith("Held now, live (2)")
    assert f"- session {session_a}:" in listed and f"- session {session_b}:" in listed

    assert (await live.evaluate(session_a, "value"))["result"] == "'alpha'"
    assert (await live.evaluate(session_b, "value"))["result"] == "'beta'"
    assert "NameError: name 'only_beta' is not defined" in await live.error(
        "evaluate_expression", session_id=session_a, expression="only_beta"
    )
    await live.evaluate(session_a, "value = 'changed in a'")
    assert (await live.evaluate(session_b, "value"))["result"] == "'beta'"

    with anyio.fail_after(DEADLINE):
        closed = await live.call("close_session", session_id=session_a)
    assert (
        closed
        == f"Closed session {session_a}: run {run_a} has stopped (interrupted, exit status 2 (interrupted))."
    )
    assert [s.id for s in live.sessions.held()] == [session_b]
    assert (await live.evaluate(session_b, "value.upper()"))["result"] == "'BETA'"
    await live.call("continue_execution", session_id=session_b)
    reply = await live.wait(run_b)
    assert reply.startswith(f"FINISHED: run {run_b}.") and "exit status 1 (tests failed)" in reply
    assert "AssertionError: assert 'beta' == 'other'" in (await live.call("get_failure", run_id=run_b))


async def test_close_session_stops_the_run_as_interrupted(pytester: pytest.Pytester, live: Live) -> None:
    pytester.makepyfile(
        test_stop="""
        def test_fails():
            assert 1 == 2

        def test_after():
            open("after-ran", "w").close()
        """
    )
    session, run_id = stop_ids(await live.run(pytester.path, break_on_failure=True))
    with anyio.fail_after(DEADLINE):
        closed = await live.call("close_session", session_id=session)
    assert (
        closed
        == f"Closed session {session}: run {run_id} has stopped (interrupted, exit status 2 (interrupted))."
    )
    assert not (pytester.path / "after-ran").exists()
    run = live.store.run(run_id)
    assert run is not None and (run["status"], run["exit_status"]) == ("interrupted", 2)
    summary = await live.call("get_run_summary", run_id=run_id)
    assert "interrupted, exit status 2 (interrupted)" in summary
    assert "- FAILED test_stop.py::test_fails (call): assert 1 == 2" in summary
    assert "test_after" not in await live.call("list_tests", run_id=run_id)
    assert "Session" in await live.error("continue_execution", session_id=session)


async def test_close_session_kills_a_run_that_ignores_sigint_and_does_nothing(
    pytester: pytest.Pytester, live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT first; a run that has not ended `STOP_GRACE` seconds later is killed."""
    monkeypatch.setattr(test_runs, "STOP_GRACE", 1.0)
    pytester.makepyfile(
        test_deaf="""
        import signal, threading

        def test_deaf():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            open("deaf", "w").close()
            threading.Event().wait()
        """
    )
    reply = await live.run(pytester.path, timeout=0.5)
    run_id = re.match(r"RUNNING: run (\S+) ", reply)
    assert run_id, reply
    with anyio.fail_after(DEADLINE):
        while not (pytester.path / "deaf").exists():
            await anyio.sleep(0.1)
        closed = await live.call("close_session", session_id=run_id[1])
    assert closed == f"Stopped run {run_id[1]} (exit status -9)."


async def test_close_session_stops_a_run_of_a_server_started_ignoring_sigint(
    pytester: pytest.Pytester, live: Live
) -> None:
    """`mcpdebug serve &` in a script (or nohup) starts the server with SIGINT ignored, which exec
    hands on: the run it starts must still take close_session's Ctrl-C (found by a load test whose
    suites were started with `&`: the run slept on, its SIGINT ignored)."""
    pytester.makepyfile(
        test_long="""
        import time

        def test_sleeps():
            time.sleep(120)
        """
    )
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the shell left the server
    try:
        reply = await live.run(pytester.path, timeout=0.5)
    finally:
        signal.signal(signal.SIGINT, previous)
    run_id = re.match(r"RUNNING: run (\S+) ", reply)
    assert run_id, reply
    with anyio.fail_after(DEADLINE):
        while "test_long.py::test_sleeps" not in await running(live, run_id[1]):
            await anyio.sleep(0.1)
        closed = await live.call("close_session", session_id=run_id[1])
    assert closed == f"Stopped run {run_id[1]} (exit status 2)."


async def running(live: Live, run_id: str) -> str:
    """list_tests(outcome="running"), or "" while the run is not recorded yet."""
    result = await live.client.call_tool("list_tests", {"run_id": run_id, "outcome": "running"})
    return "" if result.is_error else reply_text(result)


async def test_close_session_with_a_run_id_stops_a_long_run(pytester: pytest.Pytester, live: Live) -> None:
    pytester.makepyfile(
        test_long="""
        import time

        def test_sleeps():
            time.sleep(120)
        """
    )
    reply = await live.run(pytester.path, timeout=0.5)
    run_id = re.match(r"RUNNING: run (\S+) ", reply)
    assert run_id, reply
    with anyio.fail_after(DEADLINE):  # wait until the test is sleeping, as a user would see it
        while "test_long.py::test_sleeps" not in await running(live, run_id[1]):
            await anyio.sleep(0.1)
        started = time.monotonic()
        closed = await live.call("close_session", session_id=run_id[1])
    assert time.monotonic() - started < 60  # stopped: the test would sleep two minutes
    assert closed == f"Stopped run {run_id[1]} (exit status 2)."
    reply = await live.wait(run_id[1])
    assert reply.startswith(f"FINISHED: run {run_id[1]}.")
    assert "interrupted, exit status 2 (interrupted)" in reply
    assert "KeyboardInterrupt" in reply  # pytest's own report, in the terminal tail
    again = await live.call("close_session", session_id=run_id[1])
    assert again == f"Run {run_id[1]} had already ended (exit status 2)."


async def test_bad_input_is_an_error_that_says_what_to_do(pytester: pytest.Pytester, live: Live) -> None:
    missing = pytester.path / "no-such-folder"
    text = await live.error("run_tests", args=["-q"], cwd=str(missing))
    assert f"cwd {str(missing)!r} is not a directory; give the project's folder (or omit it)." in text

    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    with anyio.fail_after(DEADLINE):
        text = await live.error("run_tests", args=["--no-such-option"], cwd=str(pytester.path))
    assert re.search(r"pytest exited with status 4 before recording anything \(run \S+, in ", text), text
    assert "error: unrecognized arguments: --no-such-option" in text
    assert "Fix the arguments or the project and call run_tests again." in text

    text = await live.error("wait_for_stop", id="20000101-000000-nosuch", timeout=1)
    assert "Unknown run '20000101-000000-nosuch'" in text or "No runs recorded yet" in text

    async with Client(build_server(live.store)) as client:
        result = await client.call_tool("run_tests", {"args": ["-q"], "cwd": str(pytester.path)})
    assert result.is_error
    assert "This server does not ingest runs" in reply_text(result)
    assert "call run_tests on that server" in reply_text(result)


async def test_wait_for_stop_takes_a_continued_session_id(pytester: pytest.Pytester, live: Live) -> None:
    pytester.makepyfile(test_two=TWO_FAILURES)
    session, _ = stop_ids(await live.run(pytester.path, break_on_failure=True))
    await live.call("continue_execution", session_id=session)
    reply = await live.wait(session)  # the docstring: "a session id (waits on its run)"
    assert reply.startswith("STOPPED: test_two.py::test_second")


async def test_refs_in_the_stop_summary_expand_in_the_live_session(
    pytester: pytest.Pytester, live: Live
) -> None:
    pytester.makepyfile(test_two=TWO_FAILURES)
    reply = await live.run(pytester.path, break_on_failure=True)
    session, _ = stop_ids(reply)
    assert "label (str) = 'first'" in reply
    await live.evaluate(session, "label")  # any request before the agent follows the summary's refs
    shown = re.search(r"values \(list\) = \[1, 2, 3\] \[ref (\d+)\]", reply)
    assert shown, reply
    expanded = json.loads(
        await live.call("get_variables", session_id=session, variables_reference=int(shown[1]))
    )
    assert [v["value"] for v in expanded["variables"]] == ["1", "2", "3"]


async def test_a_run_that_cannot_import_the_project_says_what_to_set(
    pytester: pytest.Pytester, live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A src layout that the user's shell finds through PYTHONPATH; an MCP client starts the server
    without it, so the managed run cannot import the project: its reply says so and what to set."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    (pytester.path / "src" / "shop").mkdir(parents=True)
    (pytester.path / "src" / "shop" / "__init__.py").write_text("def total():\n    return 3\n")
    pytester.makepyfile(test_shop="from shop import total\n\ndef test_total():\n    assert total() == 3\n")
    src = pytester.path / "src"
    reply = await live.run(pytester.path)
    assert reply.startswith("FINISHED: run ")
    assert "could not import the project's own module `shop`" in reply, reply
    assert f'{{"PYTHONPATH": "{src}"}}' in reply and "`mcpdebug init` in" in reply
    assert f'env={{"PYTHONPATH": "{src}"}}' in reply  # this run alone, as a call
    fixed = await live.run(pytester.path, env={"PYTHONPATH": str(src)})
    assert "1 passed" in fixed and "could not import" not in fixed


async def test_a_server_started_outside_the_project_runs_the_tests_in_it(
    pytester: pytest.Pytester, live: Live, monkeypatch: pytest.MonkeyPatch, tmp_path_factory
) -> None:
    """Clients start servers in a folder of their choosing (Cursor: /); with `--dir` the server
    knows the project, and a run without `cwd` starts there, not in the server's folder."""
    pytester.makepyfile(test_here="def test_here():\n    pass\n")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    with anyio.fail_after(DEADLINE):
        reply = await live.call("run_tests", args=list(ARGS))
    assert f"Directory: {pytester.path};" in reply and "1 passed" in reply, reply
