"""The TUI's runs view: the project's recorded runs, and the chosen run's tests live.

Left, the runs (newest first) with their state; right, the chosen run (the newest test run until
another is chosen) and its tests in the order they ran, each with its outcome as soon as the store
has it; a failure or hang that happens while one watches is also announced. Enter on a test opens
its failure as `mcpdebug failure` shows it (frames, locals, source, output), or its detail as
`mcpdebug show RUN TEST` does; Enter on a run shows its tests.
"""

from __future__ import annotations

from typing import Any, Final

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from mcpdebug.report import tui_cells
from mcpdebug.report.run_watch import Look, Reader, RunLook, RunWatch, TestRow
from mcpdebug.report.tui_detail import DetailScreen
from mcpdebug.views import runs as runs_view

STYLES: Final = {
    "failed": "bold red",
    "error": "bold red",
    "hung": "bold magenta",
    "held": "bold yellow",
    "running": "cyan",
    "passed": "green",
    "xpassed": "yellow",
}
RUN_ID: Final = 24
"""A run id (22 characters) and the mark of the chosen run: the least width of the runs' column."""
LIST: Final = 34
NARROW_LIST: Final = RUN_ID + 4
NARROW: Final = 110
"""A terminal narrower than this gets the narrow list of runs (its commands cut shorter)."""
TEST_LINES: Final = 3
"""Lines a test's node id may take in the table; the detail has all of it."""


class RunsPane(Vertical):
    class News(Message):
        """Failures, hangs and runs that happened since the last look: (severity, text)."""

        def __init__(self, news: list[tuple[str, str]]) -> None:
            super().__init__()
            self.news = news

    DEFAULT_CSS = """
    RunsPane #run-list { width: 34; height: 1fr; border-right: solid $primary-background; }
    RunsPane #run-side { width: 1fr; }
    RunsPane #run-head { height: auto; padding: 0 1; background: $boost; }
    RunsPane #tests { height: 1fr; }
    RunsPane #runs-status { height: 1; background: $boost; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, watch: RunWatch, reader: Reader, *, interval: float) -> None:
        super().__init__(id="runs-pane")
        self.run_watch = watch
        self.reader = reader
        self.interval = interval
        self.chosen: str | None = None
        """The run chosen with Enter; None follows the newest test run."""
        self.problems_only = False
        self.last: Look | None = None
        self._shown: tuple[str, tuple[int, ...], bool] | None = None
        """(run, column widths, filter) the tests table was built for."""
        self._rows: dict[str, TestRow] = {}
        """What each row of the tests table shows."""
        self._looking = False
        self._live_run: str | None = None
        """The run shown while it was running at the last look."""
        self.announced: list[str] = []
        """What was announced (failures and hangs as they happened), oldest first."""

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield DataTable(id="run-list", cursor_type="row")
            with Vertical(id="run-side"):
                yield Static(id="run-head")
                yield DataTable(id="tests", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-status")

    def on_mount(self) -> None:
        self.refresh_now()
        self.set_interval(self.interval, self.refresh_now)

    # Reading ----------------------------------------------------------------------------------------

    def refresh_now(self) -> None:
        if not self._looking:
            self._looking = True
            self.run_worker(self._look(), group="runs-look")

    async def _look(self) -> None:
        try:
            look = await self.reader(self.run_watch.look, self.chosen)
        finally:
            self._looking = False
        if self.is_attached:
            self.show(look)

    # Showing ----------------------------------------------------------------------------------------

    def show(self, look: Look) -> None:
        if not self.query("#run-list"):  # quitting: the tables went first, a look still on its way
            return
        self.last = look
        self._show_runs(look)
        self._show_tests(look.chosen)
        if look.news:
            self.announced += [text for _, text in look.news]
            self.post_message(self.News(look.news))
        self._show_status(look)

    def _show_runs(self, look: Look) -> None:
        """One row of four lines a run: its id, its command, its state, its tests' outcomes."""
        table = self.query_one("#run-list", DataTable)
        (width,) = tui_cells.widths(table.size.width or 34, (), (1,), least=RUN_ID)
        if [(str(c.key.value), c.width) for c in table.ordered_columns] != [("run", width)]:
            table.clear(columns=True)
            table.add_column("runs, newest first", key="run", width=width)
        wanted = [r["run_id"] for r in look.runs]
        keys = [str(k.value) for k in table.rows]
        at = keys[table.cursor_row] if keys and 0 <= table.cursor_row < len(keys) else None
        if keys != wanted:  # a new run (newest first), one evicted: the list anew, its cursor kept
            table.clear()
        chosen = look.chosen.run_id if look.chosen else None
        console = self.app.console
        for run in look.runs:
            mine = run["run_id"] == chosen
            cell = tui_cells.each_line(console, [f"{'▶ ' if mine else ''}{run['run_id']}"], width, "bold")
            cell.append("\n")
            cell.append_text(tui_cells.each_line(console, [f"[{run['kind']}] {run['label']}"], width))
            cell.append("\n")
            state = [_state(run), runs_view.counts_text(run["counts"])]
            cell.append_text(tui_cells.each_line(console, state, width, _run_style(run)))
            tui_cells.put(table, run["run_id"], [cell])
        if keys != wanted and at in wanted:
            table.move_cursor(row=wanted.index(at), animate=False)

    def _show_tests(self, chosen: RunLook | None) -> None:
        head = self.query_one("#run-head", Static)
        table = self.query_one("#tests", DataTable)
        if chosen is None:
            tui_cells.say(head, Text(self.last.note if self.last else "", style="dim"))
            table.clear(columns=True)
            self._shown = None
            return
        process = chosen.run["kind"] == "process"
        hint = "\nA process session has no tests: i shows its output." if process else ""
        tui_cells.say(head, Text(chosen.head + hint))
        widths = tuple(tui_cells.widths(table.size.width or 80, (8, 7), (0.6, 0.4), least=10))
        tests = [t for t in chosen.tests if t.problem or not self.problems_only]
        shown = (chosen.run_id, widths, self.problems_only)
        keys = [str(k.value) for k in table.rows]
        wanted = [t.nodeid for t in tests]
        fresh = shown != self._shown or wanted[: len(keys)] != keys
        if fresh:
            table.clear(columns=True)
            for name, width in zip(("outcome", "time", "test", "message"), widths, strict=True):
                table.add_column(name, key=name, width=width)
            self._shown = shown
            self._rows = {}
        following = fresh or table.row_count == 0 or table.cursor_row == table.row_count - 1
        for test in tests:
            if self._rows.get(test.nodeid) != test:  # a running run: only what changed is drawn again
                tui_cells.put(table, test.nodeid, self._cells(test, widths))
                self._rows[test.nodeid] = test
        running = chosen.run["status"] == "running"
        ended = self._live_run == chosen.run_id and not running  # it ended while shown
        self._live_run = chosen.run_id if running else None
        first = next((i for i, t in enumerate(tests) if t.problem), None)
        if (fresh or (ended and following)) and first is not None:  # its first failure
            table.move_cursor(row=first, animate=False)
        elif following and running and tests:  # following the run as it goes: its newest test
            table.move_cursor(row=len(tests) - 1, animate=False)

    def _cells(self, test: TestRow, widths: tuple[int, ...]) -> list[Text]:
        console = self.app.console
        return [
            Text(test.label, style=STYLES.get(test.outcome, "")),
            Text(test.time, style="dim"),
            tui_cells.clip(console, test.nodeid, widths[2], TEST_LINES, breaks=tui_cells.ID_BREAKS),
            tui_cells.clip(console, test.message, widths[3], 1, "red" if test.problem else "dim"),
        ]

    def _show_status(self, look: Look) -> None:
        chosen = look.chosen
        problems = sum(t.problem for t in chosen.tests) if chosen else 0
        parts = [f"{len(look.runs)} run{'s' if len(look.runs) != 1 else ''}"]
        if chosen is not None and len(look.runs) > 1:
            parts.append("showing the newest (n)" if self.chosen is None else "Enter on a run shows it")
        if chosen is not None:
            parts.append(f"{len(chosen.tests)} tests, {problems} failed, erred or hung")
        if self.problems_only:
            parts.append("problems only (p shows all)")
        if look.note and look.runs:
            parts.append(look.note)
        parts.append("Enter opens a test's failure")
        tui_cells.say(self.query_one("#runs-status", Static), Text(" · ".join(parts)))

    # Keys -------------------------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#run-list")
    def choose_run(self, message: DataTable.RowSelected) -> None:
        rid = str(message.row_key.value)
        runs = self.last.runs if self.last else []
        newest = next((r["run_id"] for r in runs if r["kind"] != "process"), None)  # what `n` shows
        self.chosen = None if rid == newest else rid
        self.query_one("#tests", DataTable).focus()
        self.refresh_now()

    @on(DataTable.RowSelected, "#tests")
    def open_test(self, message: DataTable.RowSelected) -> None:
        chosen = self.last.chosen if self.last else None
        if chosen is None:
            return
        nodeid = str(message.row_key.value)
        test = next((t for t in chosen.tests if t.nodeid == nodeid), None)
        rid, source = chosen.run_id, self.run_watch
        name = f"{test.label} {nodeid} · run {rid}" if test else f"{nodeid} · run {rid}"
        record = ("its record (mcpdebug show)", lambda: source.test_text(rid, nodeid, failure=False))
        if test is not None and test.problem:
            failure = f"{name} · its failure (mcpdebug failure)"
            screen = DetailScreen(self.reader, failure, lambda: source.test_text(rid, nodeid), record)
        else:
            screen = DetailScreen(self.reader, f"{name} · {record[0]}", record[1])
        self.app.push_screen(screen)

    def action_summary(self) -> None:
        chosen = self.last.chosen if self.last else None
        if chosen is not None:
            rid, source = chosen.run_id, self.run_watch
            title = f"Run {rid} (mcpdebug show)"
            self.app.push_screen(DetailScreen(self.reader, title, lambda: source.run_text(rid)))

    def action_problems(self) -> None:
        self.problems_only = not self.problems_only
        if self.last is not None:
            self.show(Look(self.last.runs, self.last.chosen, [], self.last.note))

    def action_newest(self) -> None:
        self.chosen = None
        self.refresh_now()

    def on_resize(self) -> None:
        lists = self.query("#run-list")
        if not lists:  # quitting: the list went first
            return
        lists.first().styles.width = NARROW_LIST if self.size.width < NARROW else LIST
        if self.last is not None:
            self.call_after_refresh(self.show, Look(self.last.runs, self.last.chosen, [], self.last.note))


def _state(run: dict[str, Any]) -> str:
    """``finished, exit status 1``: the head above the tests says what the status means."""
    exit_status = run.get("exit_status")
    return str(run["status"]) + (f", exit status {exit_status}" if exit_status is not None else "")


def _run_style(run: dict[str, Any]) -> str:
    counts = run["counts"]
    if run["status"] == "running":
        return "cyan"
    if counts.get("failed") or counts.get("error") or run["status"] in ("crashed", "killed"):
        return "red"
    return "green"
