"""Debug test runs: run_tests(debug=True) with debugpy in the test process, through the MCP tools.

A failing test stops where it raised, with its frames alive; logpoints write into the test's own
output; stop_on_entry stops at the first line of the project's code; xdist is refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from debug_helpers import Debug, alive, debug_server, line_of

from conftest import FIXTURES
from helpers import FAST

pytestmark = pytest.mark.anyio

LOOP = FIXTURES / "debug" / "loop" / "test_loop.py"
SPIN = FIXTURES / "debug" / "spin" / "test_spin.py"
MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run(debug: Debug, cwd: Path, *args: str, **arguments: object) -> dict[str, object]:
    return await debug.call("run_tests", args=[*FAST, *args], cwd=str(cwd), debug=True, **arguments)


async def test_a_failing_test_stops_before_its_frames_unwind(pytester: pytest.Pytester, suite) -> None:
    suite("debug/loop")
    body = line_of(LOOP, "loop-body")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        stop = await run(
            debug,
            pytester.path,
            breakpoints=[{"file": "test_loop.py", "line": body, "log_message": "total is {total}"}],
        )
        sid = stop["sessionId"]
        assert stop["reason"] == "exception", stop["text"]
        assert stop["exception"] == "ValueError: no discount for 250"
        assert stop["location"]["function"] == "discount"
        assert stop["location"]["line"] == line_of(LOOP, "raise")
        stack = await debug.call("get_stack_trace", session_id=sid)
        assert [f["name"] for f in stack["stackFrames"]] == ["discount", "test_discount"]
        assert (await debug.call("evaluate_expression", session_id=sid, expression="rate"))["result"] == "2.5"
        await debug.call("evaluate_expression", session_id=sid, expression="rate = rate * 4")  # kept
        raised = await debug.call("get_local_variables", session_id=sid)  # frame 0, where it stopped
        assert raised["frame"]["name"] == "discount"
        assert {v["name"]: v["value"] for v in raised["variables"]}["rate"] == "10.0"
        caller = await debug.call("get_local_variables", session_id=sid, frame_id=1)
        assert caller["frame"]["name"] == "test_discount"
        assert {v["name"]: v["value"] for v in caller["variables"]} == {"amount": "250"}

        end = await debug.call("continue_execution", session_id=sid)
        assert end["state"] == "terminated" and end["exitCode"] == 1
        assert "1 failed, 1 passed" in end["text"]
        output = await debug.text("get_output", run_id=sid, test="test_loop.py::test_total")
        assert "1: total is 0" in output and "20: total is 361" in output  # in the test's own output
        assert "\x1f" not in output  # the logpoint's mark, which names it to the server
        assert "ValueError: no discount for 250" in await debug.text("get_failure", run_id=sid)
        logpoint = (await debug.call("list_breakpoints", session_id=sid))["breakpoints"][0]
        assert logpoint["hits"] == 20, logpoint  # one per line it logged


async def test_the_frame_descriptions_say_what_a_debug_session_defaults_to(pytester: pytest.Pytester) -> None:
    """get_local_variables and evaluate_expression read frame 0 of a debug session's stop (where it
    stopped), the test's frame of a held failure: their frame_id says both."""
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        tools = {t.name: t for t in (await debug.client.list_tools()).tools}
        for name in ("get_local_variables", "evaluate_expression"):
            described = tools[name].input_schema["properties"]["frame_id"]["description"]
            assert "Default: the test's frame; in a debug session, 0 (where it stopped)" in described
        assert (
            "debug session"
            in tools["get_local_variables"].input_schema["properties"]["session_id"]["description"]
        )
        assert "debug session" in tools["evaluate_expression"].description.splitlines()[0]


async def test_closing_a_run_paused_at_an_exception_records_the_failure(
    pytester: pytest.Pytester, suite
) -> None:
    """Closed at its exception's stop, the test fails as it would have and the run stops after it:
    no hang, no debugpy frames, nothing left running."""
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        stop = await run(debug, pytester.path, "test_loop.py")
        sid = stop["sessionId"]
        assert stop["reason"] == "exception", stop["text"]
        pid = (await debug.call("list_debug_sessions"))["sessions"][0]["pid"]
        closed = await debug.call("close_debug_session", session_id=sid)
        assert closed["exitCode"] == 2  # pytest's "interrupted": the run stopped after that test
        assert not alive(pid)
        summary = await debug.text("get_run_summary", run_id=sid)
        assert "FAILED test_loop.py::test_discount (call): ValueError: no discount for 250" in summary
        assert "running" not in summary.lower() and "hang" not in summary.lower(), summary
        assert "pydevd" not in summary, summary
        assert f"Run {sid} has no hangs" in await debug.text("get_hang", run_id=sid)
    shown = subprocess.run([MCPDEBUG, "show", sid], cwd=pytester.path, capture_output=True, text=True)
    assert "RUNNING" not in shown.stdout and "pydevd" not in shown.stdout, shown.stdout
    assert "failed   test_loop.py::test_discount" in shown.stdout or "FAILED" in shown.stdout


async def test_closing_a_run_paused_in_a_test_that_never_ends_interrupts_it(tmp_path: Path) -> None:
    """A test that does not end after the close is interrupted and recorded as such: failed with
    DebugSessionClosed, not a hang, not left running."""
    (tmp_path / "test_spin.py").write_text(SPIN.read_text())
    async with debug_server(tmp_path / ".mcpdebug", tmp_path) as debug:
        running = await run(debug, tmp_path, "test_spin.py", timeout=0.5)
        sid = running["sessionId"]
        paused = await debug.call("pause_execution", session_id=sid)
        assert paused["location"]["function"] == "test_spin", paused["text"]
        await debug.call("close_debug_session", session_id=sid)
        summary = await debug.text("get_run_summary", run_id=sid)
        assert "FAILED test_spin.py::test_spin (call): " in summary, summary
        assert "DebugSessionClosed: interrupted by the debugger's close" in summary
        assert "running" not in summary.lower() and "hang" not in summary.lower(), summary
    shown = subprocess.run([MCPDEBUG, "show", sid], cwd=tmp_path, capture_output=True, text=True)
    assert "RUNNING" not in shown.stdout and "pydevd" not in shown.stdout, shown.stdout


async def test_stop_on_entry_and_refusals(pytester: pytest.Pytester, suite) -> None:
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        message = await debug.error("run_tests", args=["-n", "2"], cwd=str(pytester.path), debug=True)
        assert "needs a single test process" in message and "-n 2" in message
        message = await debug.error(
            "run_tests",
            args=[],
            cwd=str(pytester.path),
            debug=True,
            breakpoints=[{"file": "nope.py", "line": 3}],
        )
        assert "File not found" in message

        stop = await run(debug, pytester.path, "test_loop.py::test_total", stop_on_entry=True)
        assert stop["reason"] == "entry", stop["text"]
        assert stop["location"]["file"] == str(pytester.path / "test_loop.py")
        assert stop["location"]["function"] == "test_total"
        sid = stop["sessionId"]
        assert f"{sid} [tests]" in await debug.text("list_sessions")
        await debug.call("set_exception_breakpoints", session_id=sid, filters=[])
        end = await debug.call("continue_execution", session_id=sid)
        assert end["state"] == "terminated" and end["exitCode"] == 0
