"""Spare debuggees: the next debug session starts in a process started ahead of it, as a fresh one would.

A spare has imported pytest and debugpy (and what the last debug run imported before its tests) and
waits for its job; these tests check that a run or script started in it behaves as in a fresh
process (environment, folder, command, traceback), that a job it cannot run as a fresh process would
gets a fresh process, and that spares end with the server or are never started when turned off.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from debug_helpers import SCRIPTS, Debug, alive, debug_server, line_of

from conftest import FIXTURES
from helpers import FAST
from mcpdebug.command_line import build_parser
from mcpdebug.debug import spares
from pytest_mcpdebug.debug import warm

pytestmark = pytest.mark.anyio

LOOP = FIXTURES / "debug" / "loop" / "test_loop.py"
SPARE_DEADLINE = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def spare_of(debug: Debug, kind: str) -> int:
    """The pid of the spare of ``kind`` once there is one."""
    with anyio.fail_after(SPARE_DEADLINE):
        while (process := debug.debugger.spares.process(kind)) is None:  # type: ignore[arg-type]
            await anyio.sleep(0.05)
    return process.pid


async def pid_of(debug: Debug, sid: str) -> int:
    sessions = (await debug.call("list_debug_sessions"))["sessions"]
    return int(next(s["pid"] for s in sessions if s["id"] == sid))


async def debug_run(debug: Debug, cwd: Path, **arguments: object) -> dict[str, Any]:
    body = line_of(LOOP, "loop-body")
    return await debug.call(
        "run_tests",
        args=[*FAST, "test_loop.py::test_total"],
        cwd=str(cwd),
        debug=True,
        breakpoints=[{"file": "test_loop.py", "line": body, "condition": "i == 3"}],
        **arguments,
    )


async def evaluate(debug: Debug, sid: str, expression: str) -> str:
    return str((await debug.call("evaluate_expression", session_id=sid, expression=expression))["result"])


async def test_the_next_debug_run_starts_in_the_spare_as_a_fresh_one(
    pytester: pytest.Pytester, suite: Any
) -> None:
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        first = await debug_run(debug, pytester.path)
        assert first["reason"] == "breakpoint", first["text"]
        await debug.call("close_debug_session", session_id=first["sessionId"])
        learned = debug.debugger.spares.preimports
        assert "json" in learned and "pluggy" in learned  # libraries the run imported before its tests
        assert not {"test_loop", "conftest", "pytest_mcpdebug", "anyio", "_pytest"} & {
            name.partition(".")[0] for name in learned
        }  # never the project's code, pytest's, or a plugin pytest rewrites
        memory = pytester.path / ".mcpdebug" / spares.MEMORY
        assert spares.Spares(pytester.path, memory=memory).preimports == learned  # a later server's

        spare = await spare_of(debug, "tests")
        stop = await debug_run(debug, pytester.path, env={"SPARE_CHECK": "yes"})
        sid = stop["sessionId"]
        assert stop["reason"] == "breakpoint" and await pid_of(debug, sid) == spare
        assert {v["name"]: v["value"] for v in stop["locals"]}["i"] == "3"
        assert await evaluate(debug, sid, "__import__('os').environ['SPARE_CHECK']") == "'yes'"
        assert await evaluate(debug, sid, "__import__('os').getcwd()") == repr(str(pytester.path))
        assert await evaluate(debug, sid, "__import__('sys').path[0]") == repr(str(pytester.path))
        assert "pytest_mcpdebug/debug" not in await evaluate(debug, sid, "repr(__import__('sys').path)")
        end = await debug.call("continue_execution", session_id=sid)
        assert end["state"] == "terminated" and end["exitCode"] == 0, end["text"]
        summary = await debug.text("get_run_summary", run_id=sid)
        assert "Command: pytest --mcp-debug -p no:cacheprovider" in summary and "1 passed" in summary


async def test_a_run_with_other_interpreter_settings_starts_fresh(
    pytester: pytest.Pytester, suite: Any
) -> None:
    """PYTHONHASHSEED is read as the interpreter starts: such a run gets a process of its own."""
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        debug.debugger.prepare("tests")
        spare = await spare_of(debug, "tests")
        stop = await debug_run(debug, pytester.path, env={"PYTHONHASHSEED": "7"})
        sid = stop["sessionId"]
        assert await pid_of(debug, sid) != spare
        assert await evaluate(debug, sid, "__import__('os').environ['PYTHONHASHSEED']") == "'7'"
        assert debug.debugger.spares.process("tests").pid == spare  # type: ignore[union-attr]  # kept
        await debug.call("close_debug_session", session_id=sid)


async def test_a_script_runs_in_the_spare_and_fails_as_it_would_alone(tmp_path: Path) -> None:
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        created = await debug.call("create_debug_session", name="ending")  # announces a script
        spare = await spare_of(debug, "script")
        sid = created["sessionId"]
        stop = await debug.call(
            "start_debugging", session_id=sid, script_path="ending.py", args=["raise", "1"]
        )
        assert stop["reason"] == "exception" and await pid_of(debug, sid) == spare
        end = await debug.call("continue_execution", session_id=sid)
        assert end["exitCode"] == 1
        output = await debug.text("get_output", run_id=sid)
        traceback = output[output.index("Traceback") :]
        assert (
            'ending.py", line' in traceback and "launcher.py" not in traceback and "warm.py" not in traceback
        )
        await debug.call("close_debug_session", session_id=sid)


async def test_a_failing_run_prepares_a_spare_and_spares_end_with_the_server(
    pytester: pytest.Pytester, suite: Any
) -> None:
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path) as debug:
        finished = await debug.call("run_tests", args=[*FAST, "test_loop.py"], cwd=str(pytester.path))
        assert finished["exit_status"] == 1
        spare = await spare_of(debug, "tests")  # one failed: debugging it is likely next
        assert alive(spare)
    with anyio.fail_after(10):
        while alive(spare):
            await anyio.sleep(0.05)


async def test_no_spare_when_turned_off(pytester: pytest.Pytester, suite: Any) -> None:
    suite("debug/loop")
    async with debug_server(pytester.path / ".mcpdebug", pytester.path, spare=False) as debug:
        await debug.call("create_debug_session")
        stop = await debug_run(debug, pytester.path)
        await debug.call("close_debug_session", session_id=stop["sessionId"])
        await anyio.sleep(0.5)
        assert debug.debugger.spares.process("tests") is None
        assert debug.debugger.spares.process("script") is None
    assert build_parser().parse_args(["serve", "--no-debug-spare"]).debug_spare is False
    assert build_parser().parse_args(["serve"]).debug_spare is True


def test_a_module_changed_after_the_spare_started_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spare whose imported code changed since (a package reinstalled) runs its job afresh."""
    (tmp_path / "spare_probe_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.time()
    os.utime(tmp_path / "spare_probe_module.py", (started - 60, started - 60))
    importlib.import_module("spare_probe_module")
    try:
        assert not warm._changed_since(started)
        os.utime(tmp_path / "spare_probe_module.py", (started + 1, started + 1))
        assert warm._changed_since(started)
    finally:
        sys.modules.pop("spare_probe_module", None)


SPAWN_SPARE = """
import os, subprocess, sys
job, err, warm = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
spare = subprocess.Popen(
    [sys.executable, warm, "--job", str(job), "--parent", str(os.getpid()), "script"],
    pass_fds=(job,), stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True,
)
print(spare.pid)
"""


def test_a_spare_ends_with_its_server_even_when_nobody_reads_its_stderr() -> None:
    """Found left running for an hour after a test run: the server gone, and the pipe its stderr went to
    closed with it, so the spare's parting line failed (EPIPE: Python ignores SIGPIPE) and took the
    watching thread down before it could end the process."""
    import subprocess

    job_read, job_write = os.pipe()  # no job ever comes: the spare waits for it
    err_read, err_write = os.pipe()
    started = subprocess.run(
        [sys.executable, "-c", SPAWN_SPARE, str(job_read), str(err_write), warm.__file__],
        pass_fds=(job_read, err_write),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    spare = int(started.stdout.strip())
    os.close(job_read)
    os.close(err_write)
    os.close(err_read)  # the spare's stderr now has no reader: writing to it fails
    try:
        deadline = time.monotonic() + SPARE_DEADLINE
        while alive(spare) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(spare), "the spare outlived its server"
    finally:
        os.close(job_write)
        if alive(spare):
            os.kill(spare, 9)
