"""Seed 000's server log: its entries, their values, rotation, and a writer that never holds up a reply."""

from __future__ import annotations

import logging
import logging.handlers
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_schemas import read_log, validate
from mcp import Client

from mcpdebug.app import build_server
from mcpdebug.report import entries, server_log
from mcpdebug.report.log_values import STRING_CHARS, TRUNCATED, Cleaner
from mcpdebug.store import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[server_log.ServerLog]:
    entries.known.clear()
    written = server_log.open_log(tmp_path / ".mcpdebug", server_log.LogSettings())
    yield written
    written.close()


def test_values_follow_the_seeds_truncation_and_sanitisation_rules(tmp_path: Path) -> None:
    project = tmp_path / "project"
    clean = Cleaner(project)
    assert clean.value("x" * 250) == "x" * 200 + TRUNCATED
    assert clean.value([1, 2, 3, 4, 5, 6, 7]) == "[1, 2, 3, 4, 5... +2 more]"
    assert clean.value(["a", "b"]) == ["a", "b"]
    request = {
        "file": f"{project}/src/main.py",
        "env": {"API_TOKEN": "s3cret"},
        "api_key": "k-123",
        "session_id": "20260101-000000-abcdef",
        "pythonPath": "/usr/bin/python3",
        "args": ["--password=hunter2"],
        "nested": {"deeper": {"auth_header": "Bearer x"}},
    }
    assert clean.value(request) == {
        "file": "src/main.py",  # relative to the project
        "api_key": "<redacted>",
        "session_id": "20260101-000000-abcdef",  # an id names something, it is no secret
        "pythonPath": "python3",  # an interpreter outside the project is named, not located
        "args": ["--password=<redacted>"],
        "nested": {"deeper": {"auth_header": "Bearer <redacted>"}},  # the scheme is kept
    }  # and no environment at all
    assert clean.value({f"k{i}": i for i in range(25)})["..."] == "+5 more keys"
    assert clean.value(f"{project}/.venv/bin/python", "pythonPath") == ".venv/bin/python"


@given(st.text(max_size=400), st.lists(st.integers(), max_size=12))
def test_every_string_and_array_is_bounded(text: str, items: list[int]) -> None:
    clean = Cleaner(None)
    shown = clean.value(text)
    assert len(shown) <= STRING_CHARS + len(TRUNCATED)
    assert shown == text or shown.endswith(TRUNCATED) or "<redacted>" in shown
    listed = clean.value(items)
    if len(items) > 5:
        assert listed.endswith(f"... +{len(items) - 5} more]")
    else:
        assert listed == items


async def test_tool_calls_are_logged_with_their_responses_errors_and_durations(
    tmp_path: Path, opened: server_log.ServerLog
) -> None:
    store = Store(tmp_path / ".mcpdebug")
    async with Client(build_server(store)) as client:
        await client.call_tool("list_sessions", {})
        failed = await client.call_tool("get_failure", {"run_id": "nope", "api_token": "tok-1234"})
        assert failed.is_error
    opened.close()
    logged = read_log(opened.path)
    for entry in logged:
        validate(entry)
    calls = [(e["message"], e["tool"], e["callId"]) for e in logged]
    assert calls == [
        ("tool:call", "list_sessions", 1),
        ("tool:response", "list_sessions", 1),
        ("tool:call", "get_failure", 2),
        ("tool:error", "get_failure", 2),
    ]
    call, error = logged[2], logged[3]
    assert call["request"] == {"run_id": "nope", "api_token": "<redacted>"}
    assert (call["sessionId"], error["sessionId"]) == ("nope", "nope")
    assert "get_failure has no argument 'api_token'" in error["error"]  # refused, and still logged
    assert "tok-1234" not in opened.path.read_text()
    assert logged[1]["response"] == {"held": [], "debug": [], "processes": [], "sessions": []}


async def test_a_read_only_servers_refusal_is_logged_too(
    tmp_path: Path, opened: server_log.ServerLog
) -> None:
    async with Client(build_server(Store(tmp_path / ".mcpdebug"), read_only=True)) as client:
        assert (await client.call_tool("run_tests", {"args": ["-x"]})).is_error
    opened.close()
    error = read_log(opened.path)[-1]
    validate(error)
    assert error["tool"] == "run_tests" and "read-only" in error["error"]


def test_the_log_rotates_and_keeps_a_bounded_number_of_files(tmp_path: Path) -> None:
    settings = server_log.LogSettings(max_bytes=4096, backups=2)
    written = server_log.open_log(tmp_path / ".mcpdebug", settings)
    for number in range(400):
        entries.tool_call(number, "get_output", {"run_id": "r", "pattern": "x" * 150})
    written.close()
    files = sorted(written.path.parent.iterdir())
    assert [f.name for f in files] == [
        "debug-mcp-server.log",
        "debug-mcp-server.log.1",
        "debug-mcp-server.log.2",
    ]
    assert all(f.stat().st_size <= 4096 for f in files)
    last = read_log(written.path)[-1]
    assert last["callId"] == 399  # the newest entries are in the current file, whole


def test_a_slow_disk_never_delays_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that does not answer at all while 200 entries are logged: the callers go on (a caller
    waiting on the disk would wait a minute), and everything is written once it answers."""
    original = logging.handlers.RotatingFileHandler.emit
    disk = threading.Event()
    answers_at = time.monotonic() + 60  # at the latest (a caller that waited for it waits this once)

    def stalled_emit(self: logging.Handler, record: logging.LogRecord) -> None:
        disk.wait(max(answers_at - time.monotonic(), 0))
        original(self, record)  # type: ignore[arg-type]

    monkeypatch.setattr(logging.handlers.RotatingFileHandler, "emit", stalled_emit)
    written = server_log.open_log(tmp_path / ".mcpdebug", server_log.LogSettings())
    started = time.perf_counter()
    for number in range(200):
        entries.tool_call(number, "get_failure", {"run_id": "latest"})
    spent = time.perf_counter() - started
    disk.set()
    written.close()  # waits for the writer: everything queued is written
    assert spent < 30, f"the callers waited {spent:.2f} s for the disk"
    assert len(read_log(written.path)) == 200


def test_without_an_open_log_entries_go_nowhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries.tool_error(1, "get_failure", {}, "boom", 0.1)
    entries.session_created("s-1", "name", "run")
    assert capsys.readouterr() == ("", "")  # not even logging's last-resort stderr handler
    assert not (tmp_path / ".mcpdebug").exists()
