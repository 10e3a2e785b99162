"""Debug test runs: run_tests(debug=True) with debugpy in the test process, through the MCP tools.

A failing test stops where it raised, with its frames alive; logpoints write into the test's own
output; stop_on_entry stops at the first line of the project's code; xdist is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from debug_helpers import Debug, debug_server, line_of

from conftest import FIXTURES
from helpers import FAST

pytestmark = pytest.mark.anyio

LOOP = FIXTURES / "debug" / "loop" / "test_loop.py"


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
        raised = await debug.call("get_local_variables", session_id=sid)
        assert {v["name"]: v["value"] for v in raised["variables"]}["rate"] == "10.0"
        caller = await debug.call("get_local_variables", session_id=sid, frame_id=1)
        assert caller["frame"]["name"] == "test_discount"
        assert {v["name"]: v["value"] for v in caller["variables"]} == {"amount": "250"}

        end = await debug.call("continue_execution", session_id=sid)
        assert end["state"] == "terminated" and end["exitCode"] == 1
        assert "1 failed, 1 passed" in end["text"]
        output = await debug.text("get_output", run_id=sid, test="test_loop.py::test_total")
        assert "1: total is 0" in output and "20: total is 361" in output  # in the test's own output
        assert "ValueError: no discount for 250" in await debug.text("get_failure", run_id=sid)


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
