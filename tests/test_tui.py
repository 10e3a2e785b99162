"""`mcpdebug tui` driven with textual's pilot: what it shows of a log, live, filtered, and its screen.

The snapshot is the screen's text as textual renders it (read from its SVG screenshot, which is kept
beside it for a person to look at); styles are left out of the comparison, so a new textual that
draws the same text still matches. `MCPDEBUG_UPDATE_SNAPSHOTS=1` rewrites them.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from helpers import recorded, run_inner
from mcpdebug.report import entries, log_reader, server_log
from mcpdebug.report.tui import DebugTUI

pytestmark = pytest.mark.anyio
SNAPSHOTS = Path(__file__).parent / "snapshots"
T0 = 1_795_000_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def entry(n: int, message: str, session: str | None, **fields: Any) -> dict[str, Any]:
    ms = T0 + n * 1000
    seconds = (ms // 1000) % 60
    return {
        "time": f"2026-11-19T12:00:{seconds:02d}.000Z",
        "level": "error" if message == "tool:error" else "info",
        "namespace": "debug-mcp:x",
        "message": message,
        "sessionId": session,
        "sessionName": None,
        **fields,
        "timestamp": ms,
    }


SESSION = [
    entry(0, "tool:call", None, tool="run_tests", callId=1, request={"break_on_failure": True}),
    entry(1, "session:created", "run-1", sessionName="pytest -q", kind="run", language="python"),
    entry(2, "session:created", "held-1", sessionName="test_a.py::test_sum", kind="held", language="python"),
    entry(
        2,
        "debug:state",
        "held-1",
        event="paused",
        reason="failure",
        location={"file": "test_a.py", "line": 7, "function": "test_sum"},
    ),
    entry(
        3,
        "tool:response",
        None,
        tool="run_tests",
        callId=1,
        success=True,
        durationMs=812.5,
        response={"result": "STOPPED"},
    ),
    entry(4, "tool:call", "held-1", tool="evaluate_expression", callId=2, request={"expression": "total"}),
    entry(
        5,
        "tool:response",
        "held-1",
        tool="evaluate_expression",
        callId=2,
        durationMs=3.2,
        response={"result": "41"},
    ),
    entry(
        6,
        "debug:variables",
        "held-1",
        scope="Locals",
        variableCount=1,
        variables=[{"name": "total", "type": "int", "value": "41"}],
    ),
    entry(7, "tool:call", "held-1", tool="get_failure", callId=3, request={"run_id": "nope"}),
    entry(
        8, "tool:error", "held-1", tool="get_failure", callId=3, durationMs=1.0, error="Unknown run 'nope'"
    ),
    entry(9, "debug:output", "held-1", category="stdout", output="[step] computing"),
    entry(10, "session:closed", "held-1", reason="close", duration=8000),
]


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")


def rows(app: DebugTUI, table: str) -> list[list[str]]:
    found = app.query_one(table, DataTable)
    return [[str(cell) for cell in found.get_row_at(i)] for i in range(found.row_count)]


def screen_text(svg: str) -> str:
    """The screen's lines of text from textual's SVG screenshot (each span placed at its column)."""
    width = 12.2  # textual's SVG: a cell is 12.2 units wide (its ``textLength`` per character)
    lines: dict[int, list[str]] = {}
    pattern = r'<text[^>]*x="([\d.]+)"[^>]*clip-path="url\(#[\w-]+-line-(\d+)\)"[^>]*>(.*?)</text>'
    for match in re.finditer(pattern, svg):
        column, line = round(float(match[1]) / width), int(match[2])
        text = html.unescape(re.sub(r"<[^>]+>", "", match[3])).replace("\xa0", " ")
        cells = lines.setdefault(line, [])
        cells.extend(" " * (column + len(text) - len(cells)))
        cells[column : column + len(text)] = text
    return "\n".join("".join(lines[n]).rstrip() for n in sorted(lines))


def check_snapshot(name: str, svg: str) -> None:
    text = screen_text(svg)
    expected = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("MCPDEBUG_UPDATE_SNAPSHOTS") or not expected.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        expected.write_text(text + "\n", encoding="utf-8")
        (SNAPSHOTS / f"{name}.svg").write_text(svg, encoding="utf-8")
    assert text + "\n" == expected.read_text(encoding="utf-8"), f"screen differs from {expected}"


async def test_calls_are_shown_with_their_answers_and_sessions_with_their_states(tmp_path: Path) -> None:
    log = tmp_path / "debug-mcp-server.log"
    write(log, SESSION)
    app = DebugTUI(log, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        shown = rows(app, "#events")
        calls = [r[3] for r in shown if r[2] == "call"]
        assert calls[0].startswith("run_tests(break_on_failure=true)  ✓ 812.5 ms")
        assert calls[1].startswith("evaluate_expression(expression=total)  ✓ 3.2 ms")
        assert calls[2].startswith("get_failure(run_id=nope)  ✗ 1.0 ms: Unknown run 'nope'")
        assert len(calls) == 3  # each response is on its call's row
        assert [
            shown[2][2],
            shown[3][3],
        ] == ["created", "paused (failure) at test_a.py:7 in test_sum"]
        assert shown[-2][3] == "[stdout] [step] computing"  # brackets are text, not markup
        sessions = rows(app, "#sessions")
        assert sessions[0][0] == "All sessions"
        assert ["[held] test_a.py::test_sum", "closed (close)"] in sessions
        assert ["[run] pytest -q", "open"] in sessions

        # Live: lines appended to the log appear at the bottom; a call's answer fills its row.
        write(log, [entry(11, "tool:call", "run-1", tool="get_output", callId=4, request={})])
        await pilot.pause(0.2)
        assert rows(app, "#events")[-1][3] == "get_output()  … waiting"
        write(
            log,
            [
                entry(
                    12,
                    "tool:response",
                    "run-1",
                    tool="get_output",
                    callId=4,
                    durationMs=2.0,
                    response={"result": "12 lines"},
                )
            ],
        )
        await pilot.pause(0.2)
        last = rows(app, "#events")[-1][3]
        assert last.startswith("get_output()  ✓ 2.0 ms") and "12 lines" in last
        table = app.query_one("#events", DataTable)
        assert table.cursor_row == table.row_count - 1  # following: the newest row is the current one


async def test_keys_filter_by_type_and_by_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the title shows the log's path as given: the same on every machine
    log = Path("debug-mcp-server.log")
    write(log, SESSION)
    app = DebugTUI(log, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        await pilot.press("t")  # tool calls off
        assert {r[2] for r in rows(app, "#events")} == {"created", "state", "variables", "output", "closed"}
        await pilot.press("t", "o", "v", "s")  # calls on; output, variables, states off
        assert {r[2] for r in rows(app, "#events")} == {"call"}
        await pilot.press("s", "o", "v")
        sessions = app.query_one("#sessions", DataTable)
        sessions.focus()
        held = next(i for i, r in enumerate(rows(app, "#sessions")) if "test_sum" in r[0])
        sessions.move_cursor(row=held)
        await pilot.press("enter")
        shown = rows(app, "#events")
        assert shown and all(r[1].startswith("test_a.py") for r in shown)
        assert "run_tests" not in " ".join(r[3] for r in shown)
        check_snapshot("tui_held_session", app.export_screenshot())
        await pilot.press("a")
        assert any("run_tests" in r[3] for r in rows(app, "#events"))
        await pilot.press("f")
        assert not app.following


async def test_a_log_from_another_machine_rotated_and_damaged(tmp_path: Path) -> None:
    """A CI artifact: the TUI reads it as it is; rotation mid-way and a torn line are survived."""
    log = tmp_path / "copied.log"
    write(log, SESSION[:3])
    with log.open("a") as out:
        out.write('not json\n{"half": ')
    follower = log_reader.LogFollower(log)
    assert [e["message"] for e in follower.read()] == ["tool:call", "session:created", "session:created"]
    assert follower.bad_lines == 1  # the torn last line waits for its end
    log.rename(tmp_path / "copied.log.1")
    write(log, SESSION[3:5])
    assert [e["message"] for e in follower.read()] == ["debug:state", "tool:response"]


async def test_the_tui_reads_what_the_server_log_writes(tmp_path: Path) -> None:
    entries.known.clear()
    written = server_log.open_log(tmp_path / ".mcpdebug", server_log.LogSettings())
    entries.session_created("s-1", "the session", "debug", pythonPath="/usr/bin/python3")
    entries.tool_call(1, "step_over", {"session_id": "s-1"})
    entries.tool_response(1, "step_over", {"session_id": "s-1"}, {"line": 4}, 0.002)
    written.close()
    app = DebugTUI(written.path, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        shown = rows(app, "#events")
        assert [r[2] for r in shown] == ["created", "call"]
        assert shown[1][1] == "the session"
        assert shown[1][3].startswith("step_over(session_id=s-1)  ✓ 2.0 ms")


async def test_recorded_runs_of_the_store_are_listed_with_their_state(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_bad():\n    assert 1 == 2\n")
    run_inner(pytester, "--mcp-debug")
    folder = pytester.path / ".mcpdebug"
    recorded(folder).close()  # the spool taken into the store, as a server would
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        sessions = rows(app, "#sessions")
        assert sessions[0] == ["All sessions", "0 entries"]  # no server log yet: the store's runs still show
        assert sessions[1][0].startswith("[pytest] ") and "exit status 1" in sessions[1][1]
