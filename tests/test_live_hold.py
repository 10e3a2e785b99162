"""Live hold (``--mcp-debug-break``): a failing test held alive, inspected and resumed by an agent.

Each test runs a real inner pytest with the plugin, streaming into a real ingest WebSocket server on
port 0 in this test's event loop, and talks to it through a real MCP client (the server in memory).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import RunningServer
from helpers import FAST, run_inner
from mcpdebug.app import build_server
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import LiveSession, Sessions
from mcpdebug.store import Store

CART = """
    from pathlib import Path

    import pytest

    class Order:
        def __init__(self):
            self.items = [1, 2]

    @pytest.fixture
    def order():
        order = Order()
        yield order
        Path("teardown.txt").write_text(repr(order.items))  # what code after the hold sees

    def test_total(order):
        order.items.append(3)  # mutated before failing: a copy taken earlier would differ
        discount = 0
        assert sum(order.items) - discount == 5

    def test_passes():
        pass
"""

GEO = """
    class Point:
        def __init__(self, x, y):
            self.x = x
            self.y = y

    def check(p, limit):
        distance = p.x + p.y
        assert distance < limit, "too far"

    def test_point():
        p = Point(3, 4)
        names = ["a", "b"]
        check(p, 5)
"""

ONE_FAILURE = """
    def test_fails():
        value = 41
        assert value == 42
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# Helpers --------------------------------------------------------------------------------------------


class Inner:
    """An inner pytest in the background; its terminal output goes to a file, readable at any time."""

    def __init__(self, cwd: Path, args: tuple[str, ...], env: dict[str, str]) -> None:
        self.log = cwd / f"inner-{time.monotonic_ns()}.out"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest", *FAST, *args],
                cwd=cwd,
                stdin=subprocess.DEVNULL,  # --pdb reads EOF and quits
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_output(self, wanted: str, timeout: float = 60) -> str:
        try:
            with anyio.fail_after(timeout):
                while wanted not in (out := self.output()):
                    assert self.process.poll() is None, f"ended without printing {wanted!r}:\n{out}"
                    await anyio.sleep(0.02)
        except TimeoutError:
            raise AssertionError(f"{wanted!r} not printed within {timeout} s:\n{self.output()}") from None
        return out

    async def finish(self, timeout: float = 90) -> tuple[int, str]:
        """Its exit status and output; the event loop keeps serving the ingest meanwhile."""
        try:
            with anyio.fail_after(timeout):
                while self.process.poll() is None:
                    await anyio.sleep(0.02)
        except TimeoutError:
            raise AssertionError(f"the inner run did not end within {timeout} s:\n{self.output()}") from None
        return self.process.returncode, self.output()


@pytest.fixture
def inners() -> Iterator[list[Inner]]:
    """Started inner runs; any still running at the end are killed."""
    started: list[Inner] = []
    yield started
    for inner in started:
        if inner.process.poll() is None:
            inner.process.kill()
            inner.process.wait(10)


@dataclass
class Live:
    """The server side: ingest, live sessions and an MCP client of the server over them."""

    sessions: Sessions
    ingest: IngestServer
    client: Client
    inners: list[Inner]

    @property
    def env(self) -> dict[str, str]:
        return {"MCPDEBUG_URL": self.ingest.url, "MCPDEBUG_TOKEN": self.ingest.token}

    def start(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> Inner:
        inner = Inner(cwd, args, {**self.env, **(env or {})})
        self.inners.append(inner)
        return inner

    async def held(self, count: int = 1, timeout: float = 60) -> list[LiveSession]:
        try:
            with anyio.fail_after(timeout):
                while len(self.sessions.held()) < count:
                    await anyio.sleep(0.02)
        except TimeoutError:
            outputs = "\n".join(inner.output() for inner in self.inners)
            raise AssertionError(f"{count} test(s) not held within {timeout} s:\n{outputs}") from None
        return sorted(self.sessions.held(), key=lambda s: s.id)

    async def call(self, tool: str, **args: Any) -> str:
        """A tool's reply, which must not be an error."""
        result = await self.client.call_tool(tool, args)
        reply = str(getattr(result.content[0], "text", result.content[0]))
        assert not result.is_error, f"{tool}({args}) failed: {reply}"
        return reply

    async def json(self, tool: str, **args: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(await self.call(tool, **args))
        assert data["success"] is True
        return data

    async def error(self, tool: str, **args: Any) -> str:
        result = await self.client.call_tool(tool, args)
        reply = str(getattr(result.content[0], "text", result.content[0]))
        assert result.is_error, f"{tool}({args}) should have failed: {reply}"
        return reply

    async def evaluate(self, session_id: str, expression: str, **args: Any) -> dict[str, Any]:
        return await self.json("evaluate_expression", session_id=session_id, expression=expression, **args)


@asynccontextmanager
async def live_server(pytester: pytest.Pytester, inners: list[Inner]) -> AsyncIterator[Live]:
    store = Store(pytester.path / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    await ingest.start()
    try:
        async with Client(build_server(store, sessions)) as client:
            yield Live(sessions, ingest, client, inners)
    finally:
        await ingest.close()


def counts(output: str) -> str:
    """pytest's final counts line, e.g. "1 failed, 1 passed"."""
    found = re.findall(r"=+ (\d+ \w+(?:, \d+ \w+)*) in [\d.]+s", output)
    assert found, output
    return str(found[-1])


# 1. Acceptance ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_held_failure_is_live_its_changes_stay_and_the_run_ends_as_without_the_plugin(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_cart=CART)
    plain = run_inner(pytester, "-p", "no:mcpdebug")
    plain.assert_outcomes(failed=1, passed=1)
    (pytester.path / "teardown.txt").unlink()

    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break")
        [session] = await live.held()
        sid = session.id
        assert session.nodeid == "test_cart.py::test_total" and session.when == "call"
        assert f"session {sid}: test_cart.py::test_total (call failed)" in await live.call("list_sessions")
        out = await inner.wait_output(f"as session {sid}")
        assert (
            f"mcpdebug: holding test_cart.py::test_total (call failed: AssertionError: assert (6 - 0) == 5)"
            f" for the agent as session {sid}; it resumes on continue_execution" in out
        )

        value = await live.evaluate(sid, "order.items")
        assert (value["session"], value["result"], value["type"]) == (sid, "[1, 2, 3]", "list")
        assert value["frame"]["name"] == "test_total"
        assert (await live.evaluate(sid, "order.items.append(99)"))["result"] == "None"
        assert (await live.evaluate(sid, "order.items"))["result"] == "[1, 2, 3, 99]"
        # statements: assignments become the frame's locals, seen by later requests
        assert (await live.evaluate(sid, "x = 5; discount = 7"))["result"] == "None"
        assert (await live.evaluate(sid, "x * 2, sum(order.items) - discount"))["result"] == "(10, 98)"
        local = await live.json("get_local_variables", session_id=sid)
        shown = {v["name"]: v["value"] for v in local["variables"]}
        assert shown["discount"] == "7" and shown["x"] == "5"
        assert not (pytester.path / "teardown.txt").exists(), "the fixture's teardown ran during the hold"

        reply = await live.json("continue_execution", session_id=sid)
        assert reply["state"] == "running" and f"Continued session {sid}" in reply["message"]
        code, out = await inner.finish()
    assert code == plain.ret == 1, out
    assert counts(out) == "1 failed, 1 passed"
    assert f"mcpdebug: {sid} resumed (the agent continued it)" in out
    assert (pytester.path / "teardown.txt").read_text() == "[1, 2, 3, 99]"


# 2. No server ---------------------------------------------------------------------------------------


def test_without_a_server_nothing_is_held_and_it_says_so_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_two="def test_a():\n    assert 1 == 2\n\ndef test_b():\n    assert 3 == 4\n")
    started = time.monotonic()
    result = run_inner(pytester, "--mcp-debug-break", "--mcp-debug-break-timeout", "60")
    assert time.monotonic() - started < 55  # not held: a hold would last the minute of its timeout
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert out.count("no mcpdebug server is connected, so failing tests will not be held") == 1, out
    assert "holding" not in out


# 3. Inspection of the live frames --------------------------------------------------------------------


@pytest.mark.anyio
async def test_stack_scopes_variables_locals_and_source_are_live(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    path = pytester.makepyfile(test_geo=GEO)
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break")
        [session] = await live.held()
        sid = session.id

        stack = await live.json("get_stack_trace", session_id=sid)
        assert (stack["session"], stack["test"], stack["phase"]) == (sid, "test_geo.py::test_point", "call")
        assert stack["exception"].startswith("AssertionError: too far")
        frames = [(f["id"], f["name"], f["file"], f["line"]) for f in stack["stackFrames"]]
        assert frames == [(0, "check", str(path), 8), (1, "test_point", str(path), 13)]

        scopes = await live.json("get_scopes", session_id=sid, frame_id=1)
        by_name = {s["name"]: s for s in scopes["scopes"]}
        assert by_name["Locals"]["count"] == 2 and scopes["frame"]["name"] == "test_point"
        assert by_name["Globals"]["variablesReference"] > 0

        local_scope = await live.json(
            "get_variables", session_id=sid, variables_reference=by_name["Locals"]["variablesReference"]
        )
        variables = {v["name"]: v for v in local_scope["variables"]}
        assert variables["names"]["value"] == "['a', 'b']"
        assert variables["p"]["type"] == "test_geo.Point"
        point_ref = variables["p"]["variablesReference"]
        assert point_ref > 0
        point = await live.json("get_variables", session_id=sid, variables_reference=point_ref)
        assert {v["name"]: v["value"] for v in point["variables"]} == {"x": "3", "y": "4"}

        await live.evaluate(sid, "p.x = 10")
        point = await live.json("get_variables", session_id=sid, variables_reference=point_ref)
        assert {v["name"]: v["value"] for v in point["variables"]} == {"x": "10", "y": "4"}

        raised_at = await live.json("get_local_variables", session_id=sid, frame_id=0)
        at_raise = {v["name"]: v["value"] for v in raised_at["variables"]}
        assert (at_raise["distance"], at_raise["limit"], raised_at["frame"]["name"]) == ("7", "5", "check")
        test_frame = await live.json("get_local_variables", session_id=sid)
        assert test_frame["frame"]["name"] == "test_point"
        assert (await live.evaluate(sid, "distance + p.x", frame_id=0))["result"] == "17"

        source = await live.json("get_source_context", session_id=sid, file="test_geo.py", line=8)
        assert source["lineContent"] == '    assert distance < limit, "too far"'
        assert {"line": 7, "content": "    distance = p.x + p.y"} in source["surrounding"]

        await live.call("continue_execution", session_id=sid)
        code, out = await inner.finish()
    assert code == 1 and counts(out) == "1 failed", out


# 4. Errors --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_errors_are_error_results_that_say_what_exists(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_geo=GEO)
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break")
        [session] = await live.held()
        sid = session.id

        unknown = await live.error("evaluate_expression", session_id="nope", expression="1")
        assert f"No live session 'nope'. Held now: {sid} (test_geo.py::test_point)" in unknown
        assert "No frame 7: this stop has frames 0-1" in await live.error(
            "get_scopes", session_id=sid, frame_id=7
        )
        assert "No frame 7" in await live.error(
            "evaluate_expression", session_id=sid, expression="1", frame_id=7
        )
        bad_ref = await live.error("get_variables", session_id=sid, variables_reference=424242)
        assert "No variablesReference 424242 in this session" in bad_ref and "get_scopes" in bad_ref

        missing = await live.error("evaluate_expression", session_id=sid, expression="p.x + undefined_name")
        assert "Name not found: Traceback (most recent call last):" in missing, missing
        assert "NameError: name 'undefined_name' is not defined" in missing
        assert "mcpdebug/" not in missing  # the traceback is the expression's, not the plugin's
        broken = await live.error("evaluate_expression", session_id=sid, expression="p.x +")
        assert "Syntax error:" in broken and "SyntaxError" in broken, broken
        raised = await live.error("evaluate_expression", session_id=sid, expression="1 / 0")
        assert "ZeroDivisionError: division by zero" in raised
        # what would end a test or the run is only the expression's error here
        for expression, error in [
            ("__import__('pytest').fail('from the agent')", "Failed: from the agent"),
            ("__import__('pytest').skip('from the agent')", "Skipped: from the agent"),
            ("raise KeyboardInterrupt", "KeyboardInterrupt"),
            ("exit(3)", "SystemExit: 3"),
        ]:
            assert error in await live.error("evaluate_expression", session_id=sid, expression=expression)
        value = await live.evaluate(sid, "ValueError('a value, not an error')")  # e.g. excinfo.value
        assert (value["result"], value["type"]) == ("ValueError('a value, not an error')", "ValueError")
        assert (await live.evaluate(sid, "p.x"))["result"] == "3"  # errors left the session usable

        await live.call("continue_execution", session_id=sid)
        gone = await live.error("evaluate_expression", session_id=sid, expression="p.x")
        assert f"Session {sid} is not held any more (it was continued)" in gone
        assert "not held any more" in await live.error("continue_execution", session_id=sid)
        code, out = await inner.finish()
    assert code == 1 and counts(out) == "1 failed", out


@pytest.mark.anyio
async def test_closing_a_session_stops_the_run_after_its_test(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_two="def test_a():\n    assert 1 == 2\n\ndef test_b():\n    assert 3 == 4\n")
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break")
        [session] = await live.held()
        assert session.nodeid == "test_two.py::test_a"
        reply = await live.call("close_session", session_id=session.id)
        assert reply.startswith(f"Closed session {session.id}: run {session.run_id} ")
        code, out = await inner.finish()
    assert code == pytest.ExitCode.INTERRUPTED and counts(out) == "1 failed", out
    assert (
        f"mcpdebug: {session.id} resumed (the agent closed the session; the run stops after this test)" in out
    )
    assert f"Interrupted: mcpdebug: the agent closed session {session.id}" in out


# 5. A runaway expression ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_runaway_expression_is_interrupted_and_the_session_still_answers(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_one=ONE_FAILURE)
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break")
        [session] = await live.held()
        started = time.monotonic()
        with anyio.fail_after(90):
            runaway = await live.error(
                "evaluate_expression", session_id=session.id, expression="while True: pass"
            )
        assert 9.5 < time.monotonic() - started < 60  # its 10 s limit: not before it, a loaded machine after
        assert "did not finish within 10 s" in runaway, runaway
        assert (await live.evaluate(session.id, "value + 1"))["result"] == "42"
        await live.call("continue_execution", session_id=session.id)
        code, out = await inner.finish()
    assert code == 1 and counts(out) == "1 failed", out


HUNG = """
    import time

    def test_waits_for_a_reply():
        reply = None
        while reply is None:  # nobody ever answers
            time.sleep(0.05)
"""


@pytest.mark.anyio
async def test_a_hung_test_is_paused_for_the_agent_with_its_frames_live(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    """``--mcp-debug-hang-action=pause``: at its timeout the hung test is held, not failed; its
    frames answer an agent's expressions; closing the session fails it and stops the run."""
    pytester.makepyfile(test_hung=HUNG)
    async with live_server(pytester, inners) as live:
        inner = live.start(
            pytester.path,
            "--mcp-debug-timeout",
            "1",
            "--mcp-debug-hang-action",
            "pause",
            "--mcp-debug-break-timeout",
            "60",
        )
        [held] = await live.held()
        out = await inner.wait_output(f"as session {held.id}")
        assert "mcpdebug: pausing hung test_hung.py::test_waits_for_a_reply for the agent" in out
        value = await live.evaluate(held.id, "reply is None")
        assert value["result"] == "True", value
        await live.call("close_session", session_id=held.id)
        code, out = await inner.finish()
    assert code != 0 and counts(out) == "1 failed", out
    assert f"mcpdebug: {held.id} resumed" in out


# 6. The break timeout ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_held_test_resumes_by_itself_after_the_break_timeout_from_cli_env_or_ini(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    ways: dict[str, tuple[tuple[str, ...], dict[str, str], str]] = {
        "cli": (("--mcp-debug-break", "--mcp-debug-break-timeout", "1"), {}, ""),
        "env": ((), {"MCPDEBUG_BREAK": "1", "MCPDEBUG_BREAK_TIMEOUT": "1"}, ""),
        "ini": ((), {}, "mcpdebug_break = true\nmcpdebug_break_timeout = 1\n"),
    }
    for name, (_, _, ini) in ways.items():
        folder = pytester.mkdir(name)
        (folder / "pytest.ini").write_text("[pytest]\n" + ini)
        (folder / "test_one.py").write_text(textwrap.dedent(ONE_FAILURE))
    async with live_server(pytester, inners) as live:
        runs = {
            name: live.start(pytester.path / name, *args, env=env) for name, (args, env, _) in ways.items()
        }
        for name, inner in runs.items():
            code, out = await inner.finish()
            assert code == 1 and counts(out) == "1 failed", f"{name}: {out}"
            held = re.search(r"as session (\S+);.* or by itself after 1 s without a request", out)
            assert held is not None, f"{name}: {out}"
            assert f"mcpdebug: {held[1]} resumed (no request within the break timeout)" in out, out
            gone = await live.error("evaluate_expression", session_id=held[1], expression="value")
            assert "it resumed by itself after its break timeout" in gone


@pytest.mark.parametrize(
    ("args", "env", "ini", "message"),
    [
        (
            ("--mcp-debug-break", "--mcp-debug-break-timeout", "abc"),
            {},
            "",
            "mcpdebug: --mcp-debug-break-timeout='abc' is not a number of seconds above 0",
        ),
        (
            ("--mcp-debug-break",),
            {"MCPDEBUG_BREAK_TIMEOUT": "0"},
            "",
            "environment variable MCPDEBUG_BREAK_TIMEOUT='0' is not a number",
        ),
        (
            ("--mcp-debug-break",),
            {},
            "mcpdebug_break_timeout = -5",
            "ini option mcpdebug_break_timeout='-5' is not a number",
        ),
        (  # the CLI flag would win over the environment: only --mcp-debug here
            ("--mcp-debug",),
            {"MCPDEBUG_BREAK": "maybe"},
            "",
            "environment variable MCPDEBUG_BREAK='maybe' is not a boolean",
        ),
    ],
    ids=["cli", "env", "ini", "env-break"],
)
def test_a_bad_break_setting_is_a_usage_error_naming_where_it_came_from(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: dict[str, str],
    ini: str,
    message: str,
) -> None:
    pytester.makeini("[pytest]\n" + ini)
    pytester.makepyfile(test_one=ONE_FAILURE)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run_inner(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()


# 7. The server goes away --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_held_test_resumes_when_the_server_is_killed(
    pytester: pytest.Pytester, server: RunningServer, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_one=ONE_FAILURE)
    inner = Inner(pytester.path, ("--mcp-debug-break",), {})  # finds the server through server.json
    inners.append(inner)
    out = await inner.wait_output("mcpdebug: holding test_one.py::test_fails")
    sid = re.search(r"as session (\S+);", out)
    assert sid, out
    server.stop(signal.SIGKILL)
    code, out = await inner.finish()
    assert code == 1 and counts(out) == "1 failed", out
    assert f"mcpdebug: {sid[1]} resumed (the server went away)" in out
    assert "mcpdebug: warning: lost the server at" in out


# 8. pytest-timeout and faulthandler ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_long_hold_trips_neither_hang_timers_nor_the_break_timeout_while_the_agent_works(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(
        test_one="import pytest\n\n@pytest.mark.timeout(2)\n" + textwrap.dedent(ONE_FAILURE).lstrip()
    )
    async with live_server(pytester, inners) as live:
        inner = live.start(
            pytester.path,
            "--mcp-debug-break",
            "--mcp-debug-break-timeout",
            "2",
            "-o",
            "faulthandler_timeout=2",
        )
        [session] = await live.held()
        # a request that takes longer than all three 2 s limits; the idle clock restarts at its answer
        slow = await live.evaluate(session.id, "__import__('time').sleep(3.2); value")
        assert slow["result"] == "41"
        assert (await live.evaluate(session.id, "value + 1"))["result"] == "42"
        assert inner.process.poll() is None
        await live.call("continue_execution", session_id=session.id)
        code, out = await inner.finish()
    assert code == 1 and counts(out) == "1 failed", out
    assert "assert 41 == 42" in out and f"{session.id} resumed (the agent continued it)" in out
    assert "Timeout" not in out  # neither pytest-timeout's "Failed: Timeout >2.0s" nor faulthandler's dump


# 9. xdist -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_xdist_worker_holds_its_own_failure(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(
        test_workers="""
        import os

        def test_alpha():
            name, worker = "alpha", os.environ["PYTEST_XDIST_WORKER"]
            assert name == "beta"

        def test_beta():
            name, worker = "beta", os.environ["PYTEST_XDIST_WORKER"]
            assert name == "alpha"
        """
    )
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "-n", "2", "--mcp-debug-break")
        sessions = await live.held(2)
        assert [s.id.rsplit("-", 2)[1:] for s in sessions] == [["gw0", "1"], ["gw1", "1"]]
        names = set()
        for session in sessions:
            assert session.worker in session.id
            value = await live.evaluate(session.id, "name, worker")
            name, worker = eval(value["result"])
            assert worker == session.worker
            assert session.nodeid == f"test_workers.py::test_{name}"
            names.add(name)
        assert names == {"alpha", "beta"}
        for session in sessions:
            await live.call("continue_execution", session_id=session.id)
        code, out = await inner.finish()
    assert code == 1 and counts(out) == "2 failed", out


# 10. --pdb ------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pdb_takes_the_failures_and_nothing_is_held(
    pytester: pytest.Pytester, inners: list[Inner]
) -> None:
    pytester.makepyfile(test_one=ONE_FAILURE)
    async with live_server(pytester, inners) as live:
        inner = live.start(pytester.path, "--mcp-debug-break", "--pdb")
        code, out = await inner.finish()
        assert live.sessions.held() == []
        assert "Held now" not in await live.call("list_sessions")
    assert "mcpdebug: --mcp-debug-break: --pdb takes the failures; none will be held" in out
    assert "holding" not in out
    assert "(Pdb)" in out  # pdb had the failure, and quit at the end of its closed stdin
    assert code == pytest.ExitCode.INTERRUPTED and "Exit: Quitting debugger" in out, out
