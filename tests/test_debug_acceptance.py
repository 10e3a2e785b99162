"""Issue 12's acceptance, end to end: the SDK's stdio client against a real `mcpdebug serve`.

The debug runs are real `pytest --mcp-debug` processes with debugpy listening; the scripts run under
the launcher; pids are checked with the kernel, not with the server's word.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from debug_helpers import CALL_DEADLINE, SCRIPTS, Calls, alive, line_of
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import FIXTURES, MCPDEBUG
from helpers import FAST

pytestmark = pytest.mark.anyio

LOOP = FIXTURES / "debug" / "loop"
SPIN = FIXTURES / "debug" / "spin"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Agent(Calls):
    """An agent's calls over stdio: each reply's data, errors failing the test."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.killed = False
        """The test killed the server: the client's closing errors are expected."""

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await self.call(tool, **arguments)


@contextlib.asynccontextmanager
async def serve(folder: Path) -> AsyncIterator[Agent]:
    params = StdioServerParameters(
        command=MCPDEBUG, args=["serve", "--log-level", "warning"], cwd=str(folder)
    )
    agent: Agent | None = None
    try:
        async with Client(params) as client:
            agent = Agent(client)
            yield agent
    except BaseException:
        if agent is None or not agent.killed:
            raise


def copy_suite(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def locals_of(reply: dict[str, Any]) -> dict[str, str]:
    """Names and values of get_local_variables's variables, or of a stop's locals."""
    return {v["name"]: v["value"] for v in reply.get("variables", reply.get("locals", []))}


async def test_loop_breakpoints_steps_hit_conditions_and_logpoints(tmp_path: Path) -> None:
    suite = copy_suite(LOOP, tmp_path / "loop")
    body, price = line_of(suite / "test_loop.py", "loop-body"), line_of(suite / "test_loop.py", "price-body")
    plain = subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, "-q"], cwd=suite, capture_output=True, check=False
    )
    async with serve(suite) as agent:
        stop = await agent(
            "run_tests",
            args=[*FAST],
            debug=True,
            breakpoints=[{"file": "test_loop.py", "line": body, "condition": "i == 7"}],
        )
        sid = stop["sessionId"]
        assert (stop["reason"], stop["location"]["line"]) == ("breakpoint", body), stop["text"]
        assert locals_of(await agent("get_local_variables", session_id=sid))["i"] == "7"
        into = await agent("step_into", session_id=sid)
        assert (into["location"]["function"], into["location"]["line"]) == ("price", price)
        out = await agent("step_out", session_id=sid)
        assert (out["location"]["function"], out["location"]["line"]) == ("test_total", body)
        over = await agent("step_over", session_id=sid)
        assert over["location"]["function"] == "test_total" and over["location"]["line"] == body - 1
        failed = await agent("continue_execution", session_id=sid)  # i == 7 stops once: next is the failure
        assert failed["reason"] == "exception" and failed["location"]["function"] == "discount"
        end = await agent("continue_execution", session_id=sid)
        assert end["state"] == "terminated"
        assert end["exitCode"] == plain.returncode == 1  # as without debugging

        third = await agent(
            "run_tests",
            args=[*FAST, "test_loop.py::test_total"],
            debug=True,
            breakpoints=[
                {"file": "test_loop.py", "line": price, "hit_condition": ">= 3"},
                {"file": "test_loop.py", "line": body, "log_message": "total is {total}"},
            ],
        )
        run = third["sessionId"]
        assert third["location"]["line"] == price and locals_of(third)["i"] == "2"
        hit = next(b for b in (await agent("list_breakpoints", session_id=run))["breakpoints"] if b["hits"])
        assert hit["hitCondition"] == ">= 3"
        await agent("remove_breakpoint", session_id=run, breakpoint_id=hit["breakpointId"])
        end = await agent("continue_execution", session_id=run)
        assert end["state"] == "terminated" and end["exitCode"] == 0  # the logpoint stopped nowhere
        found = await agent.text("search_output", run_id=run, pattern=r"^total is \d+$", max_results=1)
        assert "found 20 occurrences" in found


async def test_pause_two_sessions_a_script_and_the_server_killed(tmp_path: Path) -> None:
    spin = copy_suite(SPIN, tmp_path / "spin")
    first, second = copy_suite(LOOP, tmp_path / "first"), copy_suite(LOOP, tmp_path / "second")
    price, body = line_of(first / "test_loop.py", "price-body"), line_of(first / "test_loop.py", "loop-body")
    async with serve(tmp_path) as agent:
        running = await agent("run_tests", args=[*FAST], cwd=str(spin), debug=True, timeout=0.5)
        sid = running["sessionId"]
        assert running["state"] in ("starting", "running")  # collecting, or spinning: it never stops
        with anyio.fail_after(CALL_DEADLINE):  # into its loop, however long collecting takes
            while (await agent("list_debug_sessions"))["sessions"][0]["state"] == "starting" or not (
                spin / "spinning"
            ).exists():
                await anyio.sleep(0.05)
        paused = await agent("pause_execution", session_id=sid)  # how soon: benchmarks/latencies.py
        assert paused["location"]["line"] == line_of(spin / "test_spin.py", "spin")
        n = later = int((await agent("evaluate_expression", session_id=sid, expression="n"))["result"])
        with anyio.fail_after(CALL_DEADLINE):
            while later == n:  # a loaded machine may not run it at all between two calls
                assert (await agent("continue_execution", session_id=sid, wait=0.5))["state"] == "running"
                await agent("pause_execution", session_id=sid)
                later = int((await agent("evaluate_expression", session_id=sid, expression="n"))["result"])
        assert later > n

        # Two sessions at once on two suites: each stops only at its own breakpoints.
        one = await agent(
            "run_tests",
            args=[*FAST, "test_loop.py::test_total"],
            cwd=str(first),
            debug=True,
            breakpoints=[{"file": "test_loop.py", "line": price, "condition": "i in (4, 9)"}],
        )
        two = await agent(
            "run_tests",
            args=[*FAST, "test_loop.py::test_total"],
            cwd=str(second),
            debug=True,
            breakpoints=[{"file": "test_loop.py", "line": body, "condition": "i == 12"}],
        )
        stops: dict[str, list[tuple[str, int, str]]] = {one["sessionId"]: [], two["sessionId"]: []}
        for reply in (one, two):
            while reply["state"] == "paused":
                where = reply["location"]
                stops[reply["sessionId"]].append((where["file"], where["line"], locals_of(reply)["i"]))
                reply = await agent("continue_execution", session_id=reply["sessionId"])
            assert reply["state"] == "terminated" and reply["exitCode"] == 0
        assert stops == {
            one["sessionId"]: [
                (str(first / "test_loop.py"), price, "4"),
                (str(first / "test_loop.py"), price, "9"),
            ],
            two["sessionId"]: [(str(second / "test_loop.py"), body, "12")],
        }

        # Seed 002's swap example as a script; no process is left behind.
        swap = shutil.copy(SCRIPTS / "swap_vars.py", tmp_path / "swap_vars.py")
        created = await agent("create_debug_session", name="swap")
        script = created["sessionId"]
        await agent(
            "set_breakpoint", session_id=script, file="swap_vars.py", line=line_of(Path(swap), "swap-first")
        )
        at = await agent("start_debugging", session_id=script, script_path="swap_vars.py")
        assert at["reason"] == "breakpoint" and at["location"]["function"] == "swap_variables"
        assert (await agent("evaluate_expression", session_id=script, expression="(a, b)"))[
            "result"
        ] == "(10, 20)"
        assert (await agent("step_over", session_id=script))["locals"][0] == {
            "name": "a",
            "value": "20",
            "type": "int",
            "variablesReference": 0,
        }
        swap_pid = next(
            s["pid"] for s in (await agent("list_debug_sessions"))["sessions"] if s["id"] == script
        )
        await agent("close_debug_session", session_id=script)
        assert not alive(swap_pid)

        # The server killed while a debug session is paused: its debuggee exits (a loaded machine is
        # given a minute to end it).
        debuggee = next(s["pid"] for s in (await agent("list_debug_sessions"))["sessions"] if s["id"] == sid)
        server = json.loads((tmp_path / ".mcpdebug" / "server.json").read_text())["pid"]
        assert alive(debuggee)
        os.kill(server, signal.SIGKILL)
        started = time.monotonic()
        while alive(debuggee) and time.monotonic() - started < CALL_DEADLINE:
            await anyio.sleep(0.1)
        assert not alive(debuggee), f"the debuggee outlived its server by {CALL_DEADLINE:g} s"
        agent.killed = True
