"""`mcpdebug tui` driven with textual's pilot: the runs view, the server-log view, and their screens.

The snapshots are the screen's text as textual renders it (read from its SVG screenshot, which is
kept beside it for a person to look at); styles are left out of the comparison, so a new textual that
draws the same text still matches. `MCPDEBUG_UPDATE_SNAPSHOTS=1` rewrites them. (pytest-textual-snapshot
would compare the SVGs whole, and pins syrupy 4.8, which requires pytest < 9.)
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.containers import Horizontal
from textual.geometry import Size
from textual.pilot import Pilot
from textual.widgets import DataTable, TabbedContent

from conftest import MCPDEBUG
from helpers import Events, recorded, run_inner, start_inner
from mcpdebug.report import entries, server_log
from mcpdebug.report.tui import DebugTUI
from mcpdebug.report.tui_detail import DetailScreen
from pytest_mcpdebug import protocol

pytestmark = pytest.mark.anyio
SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = bool(os.environ.get("MCPDEBUG_UPDATE_SNAPSHOTS"))  # read before conftest clears MCPDEBUG*
T0 = 1_795_000_000_000
FAILING = "def test_good():\n    print('fine')\n\ndef test_bad():\n    total = 41\n    assert total == 42\n"


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
    entry(9, "debug:output", "held-1", category="stdout", output="[step] computing\nstep two\nstep three"),
    entry(10, "session:closed", "held-1", reason="close", duration=8000),
]


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")


def rows(app: DebugTUI, table: str) -> list[list[str]]:
    found = app.query_one(table, DataTable)
    return [[str(cell) for cell in found.get_row_at(i)] for i in range(found.row_count)]


async def until(pilot: Pilot[Any], check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Pause the pilot until ``check()`` is true (a deadline, never a fixed wait)."""
    for _ in range(int(timeout / 0.05)):
        found = check()
        if found:
            return found
        await pilot.pause(0.05)
    raise AssertionError(f"not seen within {timeout} s")


async def focus(pilot: Pilot[Any], widget: Any) -> None:
    """Focus ``widget`` and wait until it has it (textual sets focus after the current message)."""
    widget.focus()
    await until(pilot, lambda: pilot.app.focused is widget)


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


async def check_snapshot(pilot: Pilot[Any], name: str, settle: float = 10.0) -> str:
    """The screen's text matches the snapshot ``name``: looked at until it does (a resize or a look
    still being drawn on a loaded machine) for at most ``settle`` seconds, then compared."""
    expected = SNAPSHOTS / f"{name}.txt"
    if UPDATE or not expected.exists():
        await pilot.pause(0.5)
        svg = pilot.app.export_screenshot()
        SNAPSHOTS.mkdir(exist_ok=True)
        expected.write_text(screen_text(svg) + "\n", encoding="utf-8")
        (SNAPSHOTS / f"{name}.svg").write_text(svg, encoding="utf-8")
    wanted = expected.read_text(encoding="utf-8")
    for _ in range(int(settle / 0.1)):
        text = screen_text(pilot.app.export_screenshot()) + "\n"
        if text == wanted:
            break
        await pilot.pause(0.1)
    assert text == wanted, f"screen differs from {expected}"
    return text


def detail_text(app: DebugTUI) -> str:
    screen = app.screen
    return screen.text if isinstance(screen, DetailScreen) else ""


# The runs view ------------------------------------------------------------------------------------


async def test_first_screen_of_a_project_with_one_recorded_run_shows_its_failing_test(
    pytester: pytest.Pytester,
) -> None:
    """Issue 47's acceptance: a failing test recorded with no server (spool files only, no log):
    the first screen shows the run and its failing test, and Enter opens its failure with the very
    text `mcpdebug failure` prints; `s` shows what `mcpdebug show RUN TEST` prints."""
    pytester.makepyfile(test_one=FAILING)
    run_inner(pytester, "--mcp-debug")
    folder = pytester.path / ".mcpdebug"
    assert not (folder / "store.sqlite3").exists() and not (folder / "logs").exists()
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        tests = await until(pilot, lambda: rows(app, "#tests"))
        assert [t[0] for t in tests] == ["passed", "FAILED"]
        assert tests[1][2] == "test_one.py::test_bad" and "assert 41 == 42" in tests[1][3]
        table = app.query_one("#tests", DataTable)
        await until(pilot, lambda: app.focused is table)
        assert table.cursor_row == 1  # on the failing test
        run_id = rows(app, "#run-list")[0][0].split("\n")[0].removeprefix("▶ ")
        await pilot.pause()
        shown = screen_text(app.export_screenshot())
        assert "test_one.py::test_bad" in shown and "FAILED" in shown and "1 failed, 1 passed" in shown

        await pilot.press("enter")
        failure = await until(pilot, lambda: detail_text(app))
        printed = cli("failure", run_id, "test_one.py::test_bad", "--dir", str(folder))
        assert failure == printed.rstrip("\n")
        assert "total (int) = 41" in failure and "> " in failure  # locals, and the source's failing line
        await pilot.press("s")
        record = await until(pilot, lambda: detail_text(app) != failure and detail_text(app))
        assert record == cli("show", run_id, "test_one.py::test_bad", "--dir", str(folder)).rstrip("\n")
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)

        await pilot.press("i")  # the run's summary
        summary = await until(pilot, lambda: detail_text(app))
        assert summary.startswith(f"Run {run_id} (pytest): finished, exit status 1")


def cli(*args: str) -> str:
    done = subprocess.run([MCPDEBUG, *args], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


async def test_a_run_is_watched_live_failures_and_hangs_as_they_happen(pytester: pytest.Pytester) -> None:
    gate = pytester.path / "gate"
    pytester.makepyfile(
        test_live=f"""
        import pathlib, time, pytest
        GATE = pathlib.Path({str(gate)!r})

        def test_1_passes():
            pass

        def test_2_fails():
            assert 1 == 2

        def test_3_waits():
            deadline = time.monotonic() + 60
            while not GATE.exists() and time.monotonic() < deadline:
                time.sleep(0.02)

        @pytest.mark.mcpdebug_timeout(1)
        def test_4_hangs():
            time.sleep(30)
        """
    )
    folder = pytester.path / ".mcpdebug"
    inner = start_inner(pytester, "--mcp-debug")
    try:
        app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
        async with app.run_test(size=(150, 30)) as pilot:

            def outcomes() -> dict[str, str]:
                return {r[2].split("::")[-1]: r[0] for r in rows(app, "#tests")}

            await until(pilot, lambda: outcomes().get("test_3_waits") == "RUNNING")
            assert outcomes() == {
                "test_1_passes": "passed",
                "test_2_fails": "FAILED",
                "test_3_waits": "RUNNING",
            }
            assert "running" in rows(app, "#run-list")[0][0]
            await pilot.press("2")  # over the server log, the runs' tab counts what happens
            gate.touch()
            tab = app.query_one("#views", TabbedContent).get_tab("runs")
            await until(pilot, lambda: tab.label_text == "Runs (1) · 1 new failed or hung", timeout=60)
            await pilot.press("1")
            assert tab.label_text == "Runs (1)"
            await until(pilot, lambda: outcomes().get("test_4_hangs") == "HUNG", timeout=60)
            await until(pilot, lambda: "finished" in rows(app, "#run-list")[0][0], timeout=60)
            # announced as it happened (test_2 may have failed before the TUI's first look)
            assert any(n.startswith("HUNG test_live.py::test_4_hangs: ") for n in app.runs.announced)
            table = app.query_one("#tests", DataTable)
            await focus(pilot, table)
            table.move_cursor(row=3)
            await pilot.press("enter")
            hang = await until(pilot, lambda: detail_text(app))
            assert "HANG test_live.py::test_4_hangs" in hang and "time.sleep(30)" in hang
    finally:
        inner.kill()
        inner.wait()


async def test_a_project_without_runs_then_its_first_run(pytester: pytest.Pytester) -> None:
    """No store when the TUI starts: it says how to record one; the first run appears when it is."""
    folder = pytester.path / ".mcpdebug"
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(120, 24)) as pilot:
        head = await until(pilot, lambda: str(app.query_one("#run-head").render()))
        assert "pytest --mcp-debug" in head
        pytester.makepyfile(test_one=FAILING)
        run_inner(pytester, "--mcp-debug")
        tests = await until(pilot, lambda: rows(app, "#tests"))
        assert [t[0] for t in tests] == ["passed", "FAILED"]


LONG_ID = "tests/test_cart.py::test_total_includes_the_shipping_fee_for_orders_abroad[express-de-2kg]"


def fixed_run(folder: Path) -> None:
    """A run whose screen is the same on every machine: its ids, times and texts are fixed."""
    ev = Events("20261119-120000-5e1f00")
    snapshot = protocol.Snapshot(
        exception=protocol.SnapshotException(type="AssertionError", message="assert 41 == 42"),
        assertion="assert 41 == 42",
        frames=[
            protocol.SnapshotFrame(
                file="/src/tests/test_cart.py",
                line=12,
                function="test_total_includes_the_shipping_fee_for_orders_abroad",
                source=[(11, "    total = cart.total()"), (12, "    assert total == 42")],
                locals=[protocol.SnapshotVar(name="total", type="int", value="41")],
            )
        ],
    )
    long_id = LONG_ID
    events = [
        ev.start(),
        ev.run_started(label="pytest -q tests/test_cart.py"),
        *ev.test("tests/test_cart.py::test_empty_cart", output=[("call", "stdout", "empty\ncart")]),
        *ev.test(long_id, "failed", message="AssertionError: assert 41 == 42")[:-1],
        ev(protocol.FailureSnapshot, nodeid=long_id, worker="main", when="call", snapshot=snapshot),
        ev(
            protocol.TestFinished,
            nodeid=long_id,
            worker="main",
            outcome="failed",
            duration=0.3,
            message="AssertionError: assert 41 == 42",
        ),
        *ev.test("tests/test_cart.py::test_discount"),
        *ev.run_finished(exit_status=1),
    ]
    store = recorded(folder)
    store.apply(events)
    store.close()


async def test_runs_view_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the title shows the folder as given: the same on every machine
    folder = Path(".mcpdebug")
    fixed_run(folder)
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(130, 16)) as pilot:
        await until(pilot, lambda: len(rows(app, "#tests")) == 3)
        await pilot.pause()
        await check_snapshot(pilot, "tui_runs_view")
        failing = next(r for r in rows(app, "#tests") if r[0] == "FAILED")
        assert failing[2].replace("\n", "") == LONG_ID  # a long node id wraps in its column, whole
        await pilot.press("p")
        assert [r[0] for r in rows(app, "#tests")] == ["FAILED"]


async def test_a_look_that_comes_back_while_the_app_quits_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quitting removes the runs pane's tables before the pane; a look still being read then came
    back to no tables and crashed the app on its way out (seen under load). The tables are taken
    away first here, then a look is made: the app goes on and quits cleanly."""
    monkeypatch.chdir(tmp_path)
    folder = Path(".mcpdebug")
    fixed_run(folder)
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(130, 16)) as pilot:
        await until(pilot, lambda: len(rows(app, "#tests")) == 3)
        pane = app.query_one("#runs-pane")
        await pane.query_one(Horizontal).remove()
        pane.refresh_now()
        await pane.workers.wait_for_complete()
        pane.post_message(events.Resize(Size(100, 16), Size(100, 16)))
        await pilot.pause()
    assert app.return_code in (0, None)


# The server-log view ------------------------------------------------------------------------------


async def test_calls_are_shown_with_their_answers_and_sessions_with_their_states(tmp_path: Path) -> None:
    log = tmp_path / "debug-mcp-server.log"
    write(log, SESSION)
    app = DebugTUI(log, interval=0.05, view="log")
    async with app.run_test(size=(150, 30)) as pilot:
        await until(pilot, lambda: rows(app, "#events"))
        shown = rows(app, "#events")
        calls = [r[3].replace("\n", " ") for r in shown if r[1] == "call"]  # a call wraps at spaces
        assert calls[0].startswith("run_tests(break_on_failure=true)  ✓ 812.5 ms")
        assert calls[1].startswith("evaluate_expression(expression=total)  ✓ 3.2 ms")
        assert calls[2].startswith("get_failure(run_id=nope)  ✗ 1.0 ms: Unknown run 'nope'")
        assert len(calls) == 3  # each response is on its call's row
        assert [shown[2][1], shown[3][3]] == ["created", "paused (failure) at test_a.py:7 in test_sum"]
        assert shown[-2][3] == "[stdout] [step] computing\nstep two\nstep three"  # brackets are text
        sessions = [
            [name.replace("\n", ""), state.replace("\n", " ")] for name, state in rows(app, "#sessions")
        ]
        assert sessions[0][0] == "All sessions"
        assert ["[held] test_a.py::test_sum", "closed (close)"] in sessions  # the whole name, wrapped
        assert ["[run] pytest -q", "open"] in sessions

        # Live: lines appended to the log appear at the bottom; a call's answer fills its row.
        write(log, [entry(11, "tool:call", "run-1", tool="get_output", callId=4, request={})])
        await until(pilot, lambda: rows(app, "#events")[-1][3] == "get_output()  … waiting")
        answer = {"durationMs": 2.0, "response": {"result": "12 lines"}}
        write(log, [entry(12, "tool:response", "run-1", tool="get_output", callId=4, **answer)])
        await until(pilot, lambda: rows(app, "#events")[-1][3].startswith("get_output()  ✓ 2.0 ms"))
        table = app.query_one("#events", DataTable)
        assert table.cursor_row == table.row_count - 1  # following: the newest row is the current one
        await pilot.press("enter")
        opened = await until(pilot, lambda: detail_text(app))
        assert '"result": "12 lines"' in opened and "after 2.0 ms" in opened


async def test_keys_filter_by_type_and_by_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the title shows the log's folder as given: the same on every machine
    log = Path("debug-mcp-server.log")
    write(log, SESSION)
    app = DebugTUI(log, interval=0.05, view="log")
    async with app.run_test(size=(150, 30)) as pilot:
        await until(pilot, lambda: rows(app, "#events"))
        await pilot.press("t")  # tool calls off
        assert {r[1] for r in rows(app, "#events")} == {"created", "state", "variables", "output", "closed"}
        await pilot.press("t", "o", "v", "s")  # calls on; output, variables, states off
        assert {r[1] for r in rows(app, "#events")} == {"call"}
        await pilot.press("s", "o", "v")
        sessions = app.query_one("#sessions", DataTable)
        await focus(pilot, sessions)
        held = next(i for i, r in enumerate(rows(app, "#sessions")) if "test_sum" in r[0])
        sessions.move_cursor(row=held)
        await pilot.press("enter")
        shown = rows(app, "#events")  # one session's: no session column
        assert [r[1] for r in shown] == ["created", "state", "call", "variables", "call", "output", "closed"]
        assert "run_tests" not in " ".join(r[2] for r in shown)
        await check_snapshot(pilot, "tui_held_session")
        await pilot.press("a")
        assert any("run_tests" in r[3] for r in rows(app, "#events"))
        await pilot.press("f")
        assert not app.log_pane.following


async def test_after_two_server_starts_the_tui_still_starts(tmp_path: Path) -> None:
    """Issue 47's acceptance: the log of two server starts (each numbering its calls from 1) and a
    recorded run: the TUI starts, shows both starts' calls with their own answers."""
    folder = tmp_path / ".mcpdebug"
    fixed_run(folder)
    for start in ("first", "second"):
        entries.known.clear()
        written = server_log.open_log(folder, server_log.LogSettings())
        entries.tool_call(1, "list_sessions", {})
        entries.tool_response(1, "list_sessions", {}, {"result": f"{start} start"}, 0.002)
        written.close()
    with server_log.log_path(folder).open("ab") as log:  # and what no server writes
        log.write(b'not json\n{"message": 7}\n{"message": "tool:call", "callId": [1], "timestamp": "x"}\n')
        log.write(b'{"message": "tool:resp')
    app = DebugTUI(server_log.log_path(folder), folder, interval=0.05)
    async with app.run_test(size=(150, 30)) as pilot:
        await until(pilot, lambda: rows(app, "#tests"))  # the runs view first
        await pilot.press("2")
        calls = await until(
            pilot, lambda: [r[3].replace("\n", " ") for r in rows(app, "#events") if r[1] == "call"]
        )
        assert len(calls) == 3
        assert "first start" in calls[0] and "second start" in calls[1] and calls[2] == "?()  … waiting"
        status = str(app.query_one("#log-status").render())
        assert "2 unreadable lines" in status and "its last line is unfinished" in status
        assert "2 server starts" in status
    assert app.crash is None


# Crashes ------------------------------------------------------------------------------------------


def test_a_crash_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    """A real `mcpdebug tui` in a terminal (a pty) whose log reader breaks: exit status 1 and one
    line naming the error and the file holding its traceback, not textual's screen of traceback."""
    pty = pytest.importorskip("pty")
    folder = tmp_path / ".mcpdebug"
    fixed_run(folder)
    inject = (
        "import sys\n"
        "from mcpdebug.report import log_reader\n"
        "def broken(self):\n"
        "    raise RuntimeError('the log reader broke (injected)')\n"
        "log_reader.LogFollower.read = broken\n"
        "from mcpdebug.cli import main\n"
        f"sys.exit(main(['tui', '--dir', {str(folder)!r}]))\n"
    )
    python = str(Path(MCPDEBUG).with_name("python"))
    status, screen = run_in_pty(pty, [python, "-c", inject])
    assert status == 1
    tail = screen.split("\x1b[?1049l")[-1]  # what is printed once textual has left its screen
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", tail).strip()
    assert plain.startswith("mcpdebug tui: crashed: RuntimeError: the log reader broke (injected)"), plain
    assert len(plain.splitlines()) == 1 and "Traceback" not in plain
    kept = Path(plain.split("(traceback in ")[1].rstrip(")"))
    assert kept == folder / "logs" / "mcpdebug-tui-crash.log"
    assert "RuntimeError: the log reader broke" in kept.read_text()


def run_in_pty(pty: Any, command: list[str], timeout: float = 60.0) -> tuple[int, str]:
    """Run ``command`` with a pseudo-terminal of 100x30 as its terminal; its exit status and output."""
    import fcntl
    import select
    import struct
    import termios
    import time

    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    process = subprocess.Popen(command, stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([primary], [], [], 0.1)[0]:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other end closed: the process has exited
                break
            if not chunk:
                break
            out += chunk
        else:
            process.kill()
            raise AssertionError(f"still running after {timeout} s: {out.decode('utf-8', 'replace')[-2000:]}")
    finally:
        os.close(primary)
    return process.wait(timeout=10), out.decode("utf-8", "replace")


async def test_choosing_a_run_and_a_process_session(tmp_path: Path) -> None:
    """A test run and, newer, a process session (`mcpdebug run`, no server): the newest test run is
    shown first; Enter on the session shows it (no tests: `i` has its output); `n` goes back."""
    folder = tmp_path / ".mcpdebug"
    fixed_run(folder)
    command = [MCPDEBUG, "run", "--label", "svc", "--dir", str(tmp_path), "--", "sh", "-c", "echo service up"]
    subprocess.run(command, capture_output=True, timeout=60, check=True)
    app = DebugTUI(folder / "logs" / "debug-mcp-server.log", folder, interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        listed = await until(pilot, lambda: len(rows(app, "#run-list")) == 2 and rows(app, "#run-list"))
        assert "[process] svc" in listed[0][0] and listed[1][0].startswith("▶ 20261119-120000-5e1f00")
        assert len(rows(app, "#tests")) == 3
        runs = app.query_one("#run-list", DataTable)
        await focus(pilot, runs)
        runs.move_cursor(row=0)
        await pilot.press("enter")
        head = await until(
            pilot, lambda: "(process)" in (text := str(app.query_one("#run-head").render())) and text
        )
        assert "i shows its output" in head and not rows(app, "#tests")
        await pilot.press("i")
        summary = await until(pilot, lambda: detail_text(app))
        assert summary.startswith("Process session svc") and "1: service up" in summary
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen))
        await pilot.press("n")
        await until(pilot, lambda: len(rows(app, "#tests")) == 3)
