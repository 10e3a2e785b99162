"""Debugging scripts (seed 002): sessions, breakpoints, stepping, pause, watches, output and lifecycle.

Each test drives real debuggees (the launcher under debugpy) through the MCP tools of a server wired
as `mcpdebug serve` wires it, in memory.
"""

from __future__ import annotations

import time
import venv
from pathlib import Path

import anyio
import pytest
from debug_helpers import CALL_DEADLINE, SCRIPTS, alive, debug_server, line_of

from mcpdebug.command_line import build_parser

pytestmark = pytest.mark.anyio

SWAP = SCRIPTS / "swap_vars.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_swap_example_stops_steps_and_leaves_no_process(tmp_path: Path) -> None:
    """Seed 002's swap example: create, set a breakpoint, start, stop at it, evaluate, step, close."""
    line = line_of(SWAP, "swap-first")
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        created = await debug.call("create_debug_session", language="python", name="swap")
        sid = created["sessionId"]
        assert created["state"] == "created"
        pending = await debug.call("set_breakpoint", session_id=sid, file="swap_vars.py", line=line)
        assert pending["verified"] is False and pending["file"] == str(
            SWAP
        )  # absolute, though asked relative
        assert pending["context"]["lineContent"] == SWAP.read_text().splitlines()[line - 1]
        assert [s["line"] for s in pending["context"]["surrounding"]] == list(range(line - 2, line + 3))

        stop = await debug.call("start_debugging", session_id=sid, script_path="swap_vars.py")
        assert stop["state"] == "paused" and stop["reason"] == "breakpoint"
        assert stop["location"] == {
            "file": str(SWAP),
            "line": line,
            "function": "swap_variables",
            "lineContent": SWAP.read_text().splitlines()[line - 1],
        }
        assert stop["breakpointId"] == pending["breakpointId"]
        listed = await debug.call("list_breakpoints", session_id=sid)
        assert listed["breakpoints"][0]["verified"] is True and listed["breakpoints"][0]["line"] == line

        assert (await debug.call("evaluate_expression", session_id=sid, expression="a + b"))["result"] == "30"
        stepped = await debug.call("step_over", session_id=sid)
        assert stepped["reason"] == "step" and stepped["location"]["line"] == line + 1
        assert {v["name"]: v["value"] for v in stepped["locals"]} == {"a": "20", "b": "20"}
        stack = await debug.call("get_stack_trace", session_id=sid)
        assert [f["name"] for f in stack["stackFrames"]] == ["swap_variables", "main", "<module>"]
        assert all(Path(f["file"]).is_absolute() for f in stack["stackFrames"])

        sessions = (await debug.call("list_debug_sessions"))["sessions"]
        pid = sessions[0]["pid"]
        assert sessions[0]["state"] == "paused" and alive(pid)
        closed = await debug.call("close_debug_session", session_id=sid)
        assert closed["success"] is True
        assert not alive(pid)
        assert "closed by close_debug_session" in await debug.text("list_sessions")


async def test_script_runs_to_its_end_and_its_output_is_stored(tmp_path: Path) -> None:
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        sid, end = await debug.script("swap_vars.py")
        assert end["state"] == "terminated" and end["exitCode"] == 0
        assert "After swap: x=20, y=20" in end["text"]
        output = await debug.text("get_output", run_id=sid)
        assert "1: Before swap: x=10, y=20" in output and "2: After swap: x=20, y=20" in output
        found = await debug.text("search_output", run_id=sid, pattern="After swap")
        assert "found 1 occurrence" in found


async def test_hit_condition_stops_on_the_third_hit_and_logpoints_are_stored(tmp_path: Path) -> None:
    rounds = SCRIPTS / "rounds.py"
    visit, gate = line_of(rounds, "visit"), line_of(rounds, "gate")
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        sid, stop = await debug.script(
            "rounds.py",
            breakpoints=[
                {"file": "rounds.py", "line": visit, "hit_condition": ">= 3"},
                {"file": "rounds.py", "line": visit + 1, "log_message": "visit {i}: doubled is {doubled}"},
            ],
        )
        assert stop["reason"] == "breakpoint" and stop["location"]["line"] == visit
        assert {v["name"]: v["value"] for v in stop["locals"]}["i"] == "2"  # hits 1 and 2 were i = 0, 1
        listed = (await debug.call("list_breakpoints", session_id=sid))["breakpoints"]
        await debug.call("remove_breakpoint", session_id=sid, breakpoint_id=listed[0]["breakpointId"])
        await debug.call("set_breakpoint", session_id=sid, file="rounds.py", line=gate)
        at_gate = await debug.call("continue_execution", session_id=sid)
        assert at_gate["location"]["line"] == gate  # the logpoint never stopped it
        deadline = time.monotonic() + CALL_DEADLINE
        while True:  # stored a little after they are printed
            found = await debug.client.call_tool("search_output", {"run_id": sid, "pattern": r"^visit \d+"})
            if not found.is_error and "found 12 occurrences" in found.content[0].text:
                break
            assert time.monotonic() < deadline, found.content[0].text
            await anyio.sleep(0.05)
        output = await debug.text("get_output", run_id=sid)
        assert "visit 11: doubled is 22" in output and "\x1f" not in output  # the logpoint's own mark
        logpoint = (await debug.call("list_breakpoints", session_id=sid))["breakpoints"][0]
        assert logpoint["logMessage"] == "visit {i}: doubled is {doubled}"
        assert logpoint["hits"] == 12  # each line it logged (the events came before the stop)
        await debug.call("close_debug_session", session_id=sid)


async def test_a_fixed_condition_replaces_its_error_in_the_reply(tmp_path: Path) -> None:
    """A condition that is not Python is refused; set_breakpoint with a valid one on the same line
    answers with the breakpoint as it is now (pending, then bound), not the old error."""
    rounds = SCRIPTS / "rounds.py"
    visit = line_of(rounds, "visit")
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        sid = (await debug.call("create_debug_session", name="fixed"))["sessionId"]
        bad = await debug.call(
            "set_breakpoint", session_id=sid, file="rounds.py", line=visit, condition="i =="
        )
        assert "SyntaxError" in bad["conditionError"] and bad["message"].startswith("not set in debugpy")
        fixed = await debug.call(
            "set_breakpoint", session_id=sid, file="rounds.py", line=visit, condition="i == 3"
        )
        assert fixed["breakpointId"] == bad["breakpointId"]
        assert "conditionError" not in fixed and fixed["verified"] is False
        assert fixed["message"] == "pending: bound when the debugged process starts"
        stop = await debug.call("start_debugging", session_id=sid, script_path="rounds.py")
        assert stop["breakpointId"] == fixed["breakpointId"] and stop["locals"][0] == {
            "name": "i",
            "value": "3",
            "type": "int",
            "variablesReference": 0,
        }
        listed = (await debug.call("list_breakpoints", session_id=sid))["breakpoints"][0]
        assert listed["verified"] is True and listed["hits"] == 1
        assert "not set" not in listed["message"]

        # The same while attached: the reply is debugpy's answer for the fixed condition.
        again = await debug.call(
            "set_breakpoint", session_id=sid, file="rounds.py", line=visit, condition="i =="
        )
        assert again["verified"] is False and "SyntaxError" in again["conditionError"]
        bound = await debug.call(
            "set_breakpoint", session_id=sid, file="rounds.py", line=visit, condition="i == 5"
        )
        assert bound["verified"] is True and "conditionError" not in bound
        assert bound["line"] == visit and "not set" not in bound["message"]
        stop = await debug.call("continue_execution", session_id=sid)
        assert {v["name"]: v["value"] for v in stop["locals"]}["i"] == "5"
        await debug.call("close_debug_session", session_id=sid)


async def test_pause_stops_a_spinning_script_and_close_ends_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        sid, running = await debug.script("spawner.py", str(pid_file), wait=0.5)
        assert running["state"] in ("starting", "running")  # a loaded machine may still be starting it
        assert "wait_for_stop" in running["next"]
        await debug.until_running(sid, pid_file)
        paused = await debug.call("pause_execution", session_id=sid)  # how soon: benchmarks/latencies.py
        assert paused["reason"] == "pause" and paused["location"]["function"] == "<module>"
        first = int((await debug.call("evaluate_expression", session_id=sid, expression="n"))["result"])
        later = first
        with anyio.fail_after(CALL_DEADLINE):
            while later == first:  # a loaded machine may not run it at all between two calls
                again = await debug.call("continue_execution", session_id=sid, wait=0.3)
                assert again["state"] == "running"
                await debug.call("pause_execution", session_id=sid)
                later = int(
                    (await debug.call("evaluate_expression", session_id=sid, expression="n"))["result"]
                )
        assert later > first
        child = int(pid_file.read_text())
        parent = (await debug.call("list_debug_sessions"))["sessions"][0]["pid"]
        await debug.call("close_debug_session", session_id=sid)
        with anyio.fail_after(CALL_DEADLINE):
            while alive(child) or alive(parent):
                await anyio.sleep(0.05)


async def test_errors_say_what_to_do(tmp_path: Path) -> None:
    no_debugpy = tmp_path / "bare"
    venv.create(no_debugpy, with_pip=False)
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        assert 'argument language must be one of "python"' in await debug.error(
            "create_debug_session", language="ruby"
        )
        assert "is not an executable" in await debug.error(
            "create_debug_session", executable_path=str(tmp_path / "nope")
        )
        sid = (await debug.call("create_debug_session"))["sessionId"]
        assert "File not found" in await debug.error("set_breakpoint", session_id=sid, file="nope.py", line=1)
        assert "has lines 1-" in await debug.error(
            "set_breakpoint", session_id=sid, file="swap_vars.py", line=999
        )
        bad = await debug.call(
            "set_breakpoint", session_id=sid, file="swap_vars.py", line=7, condition="a =="
        )
        assert bad["verified"] is False and "SyntaxError" in bad["conditionError"]
        assert "has not started" in await debug.error("step_over", session_id=sid)
        assert "Script not found" in await debug.error(
            "start_debugging", session_id=sid, script_path="nope.py"
        )
        assert "No debug session" in await debug.error("step_over", session_id="nope")

        bare = await debug.call("create_debug_session", executable_path=str(no_debugpy / "bin" / "python"))
        message = await debug.error(
            "start_debugging", session_id=bare["sessionId"], script_path="swap_vars.py"
        )
        assert "debugpy is not installed" in message and "pip install debugpy" in message

        spinning, running = await debug.script("spawner.py", str(tmp_path / "pid"), wait=1.0)
        assert running["state"] in ("starting", "running")
        await debug.until_running(spinning, tmp_path / "pid")
        message = await debug.error("get_local_variables", session_id=spinning)
        assert "Session is not paused" in message and "pause_execution" in message
        await debug.call("close_debug_session", session_id=spinning)
        assert "is closed" in await debug.error("step_over", session_id=spinning)


async def test_idle_sessions_are_closed_and_say_why(tmp_path: Path) -> None:
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS, idle_timeout=0.5) as debug:
        sid, _ = await debug.script("spawner.py", str(tmp_path / "pid"), wait=0)
        pid = (await debug.call("list_debug_sessions"))["sessions"][0]["pid"]
        with anyio.fail_after(CALL_DEADLINE):
            while debug.debugger.owns(sid):
                await anyio.sleep(0.1)
        assert not alive(pid)
        listing = await debug.text("list_sessions")
        assert f"{sid} [script] spawner: closed" in listing
        assert "without a tool call (mcpdebug serve --debug-idle-timeout)" in listing


@pytest.mark.parametrize(("given", "seconds"), [("90", 90.0), ("45s", 45.0), ("30m", 1800.0), ("2h", 7200.0)])
def test_debug_idle_timeout_option(given: str, seconds: float) -> None:
    assert build_parser().parse_args(["serve", "--debug-idle-timeout", given]).debug_idle_timeout == seconds
    assert build_parser().parse_args(["serve"]).debug_idle_timeout == 1800.0


def test_debug_idle_timeout_option_refuses_nonsense(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "1e10", "soon"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(["serve", "--debug-idle-timeout", bad])
        assert exited.value.code == 2
        assert f"invalid duration value: '{bad}'" in capsys.readouterr().err
