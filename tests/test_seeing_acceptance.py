"""Issue 14's acceptance: an agent session over the SDK's stdio client, its log, and `mcpdebug tui`
watching it live in a real terminal (tmux).

The session runs a failing test held at its failure (run_tests with break_on_failure), reads the
failure, evaluates in the held frames, closes it, then debugs a script (breakpoint, locals, continue).
The log must hold every call with its answer, the sessions' creation and end and their states, each
line valid against seed 000's fields, and no secret anywhere.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from debug_helpers import SCRIPTS, line_of
from log_schemas import read_log, validate
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import MCPDEBUG
from helpers import FAST
from pytest_mcpdebug.values import is_secret

pytestmark = pytest.mark.anyio

SUITE = """
def charge(amount, password):
    fee = amount // 10
    return amount + fee + 1

def test_charge():
    password = "hunter2-secret"
    total = charge(100, password)
    assert total == 110
"""
SECRETS = ("hunter2-secret", "s3cret-value")
CALL_DEADLINE = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def agent(folder: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--log-level", "info"], cwd=str(folder))
    async with Client(params) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> str:
    with anyio.fail_after(CALL_DEADLINE):
        result = await client.call_tool(tool, arguments)
    text: str = result.content[0].text
    assert not result.is_error, text
    return text


@contextlib.contextmanager
def tmux_tui(folder: Path) -> Iterator[str | None]:
    """`mcpdebug tui` in a detached tmux session of 200x50; yields its name (None without tmux)."""
    if shutil.which("tmux") is None:
        yield None
        return
    name = f"mcpdebug-tui-{time.monotonic_ns()}"
    command = f"cd {folder} && {MCPDEBUG} tui --dir .mcpdebug --view log"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", "200", "-y", "50", command],
        check=True,
        env={"TERM": "xterm-256color", "PATH": "/usr/bin:/bin"},
    )
    try:
        yield name
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], check=False, capture_output=True)


def screen(name: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True, check=False
    ).stdout


async def on_screen(name: str, text: str, timeout: float = 60.0) -> str:
    """The tmux pane's text once it shows ``text``."""
    with anyio.move_on_after(timeout):
        while text not in (shown := screen(name)):
            await anyio.sleep(0.1)
        return shown
    raise AssertionError(f"{text!r} not on the screen within {timeout} s:\n{screen(name)}")


async def test_agent_session_is_logged_and_watched_live(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_charge.py").write_text(SUITE)
    swap = Path(shutil.copy(SCRIPTS / "swap_vars.py", folder / "swap_vars.py"))
    (folder / ".mcpdebug").mkdir()
    with tmux_tui(folder) as tui:
        async with agent(folder) as client:
            stopped = await call(
                client,
                "run_tests",
                args=[*FAST, "-p", "no:randomly", "-q"],
                break_on_failure=True,
                env={"API_TOKEN": "s3cret-value"},
            )
            found = re.search(r"held alive as session (\S+) \(run (\S+),", stopped)
            assert found, stopped
            session, run_id = found.groups()
            assert "AssertionError" in await call(client, "get_failure", run_id=run_id)
            assert '"111"' in await call(
                client, "evaluate_expression", session_id=session, expression="total"
            )
            await call(client, "get_local_variables", session_id=session)
            await call(client, "close_session", session_id=session)

            created = await call(client, "create_debug_session", name="swap")
            script = re.search(r'"sessionId":\s*"([^"]+)"', created)
            assert script, created
            debug_id = script.group(1)
            await call(
                client,
                "set_breakpoint",
                session_id=debug_id,
                file="swap_vars.py",
                line=line_of(swap, "swap-first"),
            )
            await call(client, "start_debugging", session_id=debug_id, script_path="swap_vars.py")
            await call(client, "get_local_variables", session_id=debug_id)
            await call(client, "continue_execution", session_id=debug_id)
            if tui is not None:  # the TUI shows the calls as they happen, while the server runs
                shown = await on_screen(tui, "continue_execution(")
                for expected in ("run_tests(", "get_failure(", "evaluate_expression(", "✓", "[held]"):
                    assert expected in shown, shown
    entries = read_log(folder / ".mcpdebug" / "logs" / "debug-mcp-server.log")
    for entry in entries:
        if entry["message"] != "server:log":
            validate(entry)
    kinds = {e["message"] for e in entries}
    assert kinds >= {
        "tool:call",
        "tool:response",
        "session:created",
        "session:closed",
        "debug:state",
        "debug:breakpoint",
        "debug:variables",
        "debug:output",
    }, kinds
    calls = {e["callId"]: e for e in entries if e["message"] == "tool:call"}
    answers = {e["callId"]: e for e in entries if e["message"] in ("tool:response", "tool:error")}
    assert calls.keys() == answers.keys()
    assert [calls[n]["tool"] for n in sorted(calls)][:5] == [
        "run_tests",
        "get_failure",
        "evaluate_expression",
        "get_local_variables",
        "close_session",
    ]
    held = [e for e in entries if e.get("sessionId") == session]
    assert [e["message"] for e in held if e["message"].startswith(("session:", "debug:state"))] == [
        "session:created",
        "debug:state",
        "debug:state",
        "session:closed",
    ]
    paused = next(e for e in held if e["message"] == "debug:state")
    assert (paused["event"], paused["reason"]) == ("paused", "failure")
    assert paused["location"] == {"file": "test_charge.py", "line": 9, "function": "test_charge"}
    run_created = next(e for e in entries if e["message"] == "session:created" and e["sessionId"] == run_id)
    assert run_created["kind"] == "run" and "/" not in (run_created["pythonPath"] or "")
    hit = [e for e in entries if e["message"] == "debug:breakpoint" and e["event"] == "hit"]
    assert hit and hit[0]["file"] == "swap_vars.py"
    assert any(e["message"] == "debug:output" and "Before swap" in e["output"] for e in entries)
    text = (folder / ".mcpdebug" / "logs" / "debug-mcp-server.log").read_text()
    for secret in SECRETS:
        assert secret not in text
    assert str(folder) not in text.replace(str(folder / ".mcpdebug"), "")  # paths relative to the project
    for entry in entries:
        _no_secret_values(entry)


def _no_secret_values(value: Any, name: str = "") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in ("sessionId", "session_id", "sessionName") and is_secret(key):
                assert item in ("<redacted>", None, ""), (key, item)
            _no_secret_values(item, key)
    elif isinstance(value, list):
        for item in value:
            _no_secret_values(item, name)
