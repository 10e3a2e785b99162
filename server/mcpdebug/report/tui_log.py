"""The TUI's server-log view: seed 000's log followed live, by session and by type.

Left, the sessions the log names (runs, held tests, debug sessions, process sessions) with their
state; right, the chosen session's entries, newest at the bottom and followed as they come: each
tool call with its answer and how long it took, state changes, breakpoints, variables, output. A
long entry wraps (a call to two lines, output and the server's messages to a few); Enter shows an
entry in full, a call with its request and its answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from mcpdebug.report import log_reader, log_text, tui_cells
from mcpdebug.report.log_reader import KINDS, LogFollower, Timeline
from mcpdebug.report.run_watch import Reader
from mcpdebug.report.tui_detail import DetailScreen

ALL: Final = "*"
SHOWN: Final = 3_000
"""Rows the entries table holds after a filter changes (the newest)."""
ENTRY_LINES: Final = 6
"""Lines an entry of output or a server message shows in the table."""
STYLES: Final = {
    "call": "bold cyan",
    "error": "bold red",
    "state": "yellow",
    "created": "green",
    "closed": "green",
    "breakpoint": "magenta",
}
TYPE_NAMES: Final = {
    "tool:call": "call",
    "tool:response": "response",
    "tool:error": "error",
    "debug:state": "state",
    "debug:breakpoint": "breakpoint",
    "debug:variables": "variables",
    "session:created": "created",
    "session:closed": "closed",
    "debug:output": "output",
    "server:log": "server",
}
MULTI_LINE: Final = ("debug:output", "server:log")
CALL_LINES: Final = 2
"""Lines any other entry (a call with its answer) may wrap to in the table."""


class LogPane(Vertical):
    DEFAULT_CSS = """
    LogPane #sessions { width: 24%; min-width: 22; max-width: 48; height: 1fr; }
    LogPane #sessions { border-right: solid $primary-background; }
    LogPane #events { width: 1fr; height: 1fr; }
    LogPane #log-status { height: 1; background: $boost; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, log: Path, reader: Reader, *, interval: float) -> None:
        super().__init__(id="log-pane")
        self.log_path = log
        self.reader = reader
        self.interval = interval
        self.follower = LogFollower(log)
        self.timeline = Timeline()
        self.kinds = {"tools", "states", "breakpoints", "variables", "output"}
        self.session: str | None = None
        self.following = True
        self._widths: tuple[int, ...] = ()
        self._columns: tuple[str, ...] = ()
        self._outputs = 0

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="events", cursor_type="row")
        yield Static(id="log-status")

    def on_mount(self) -> None:
        self.poll()
        self.set_interval(self.interval, self.poll)

    # Reading ----------------------------------------------------------------------------------------

    def poll(self) -> None:
        """New log lines: new rows at the bottom, calls updated with their answers."""
        if not self.is_attached:
            return
        events = self.query_one("#events", DataTable)
        added, changed = self.timeline.add(self.follower.read())
        self._outputs += sum(e["message"] == "debug:output" for e in added)
        if self._layout():  # the first look, a new width, a longer session name
            self.rebuild()
        else:
            for entry in added:
                if self._wanted(entry):
                    self._put(events, entry)
            resized = False
            for call in changed:
                if self._wanted(call) and _key(call) in events.rows:
                    resized |= not self._put(events, call)
            if resized:  # an answer that needs more lines than the call had
                self.rebuild()
        if added or changed:
            self.show_sessions()
            if self.following and events.row_count:
                events.move_cursor(row=events.row_count - 1, animate=False)
        self.show_status()

    def _layout(self) -> bool:
        """(Re)make the tables' columns for their width; True if the entries must be laid out anew.

        The entries' session column is as wide as the longest name (up to a quarter of the table, a
        longer name wraps), and left out while one session is shown."""
        events = self.query_one("#events", DataTable)
        sessions = self.query_one("#sessions", DataTable)
        total = events.size.width or 100
        name = 0
        if self.session is None:
            longest = max((len(s.name or s.id) for s in self.timeline.sessions.values()), default=7)
            name = min(max(longest, 7), total // 4, 40)
        fixed = (12, 10, name) if name else (12, 10)
        widths = (
            *tui_cells.widths(total, fixed, (1,), least=20),
            *tui_cells.widths(sessions.size.width or 40, (), (0.6, 0.4), least=10),
        )
        if widths == self._widths:
            return False
        self._widths = widths
        self._columns = ("time", "type", "session", "what") if name else ("time", "type", "what")
        events.clear(columns=True)
        for column, width in zip(self._columns, widths, strict=False):
            events.add_column(column, key=column, width=width)
        sessions.clear(columns=True)
        sessions.add_column("session", key="name", width=widths[-2])
        sessions.add_column("state", key="state", width=widths[-1])
        self.show_sessions()
        return True

    # Showing ----------------------------------------------------------------------------------------

    def show_sessions(self) -> None:
        table = self.query_one("#sessions", DataTable)
        if not table.columns:
            return
        wanted = [(ALL, "All sessions", f"{len(self.timeline.rows)} entries")]
        for sid, session in sorted(self.timeline.sessions.items(), key=lambda kv: -(kv[1].last or 0)):
            kind = f"[{session.kind}] " if session.kind else ""
            wanted.append((sid, kind + (session.name or sid), session.state or "-"))
        console = self.app.console
        rows = {
            key: [
                tui_cells.clip(console, name, self._widths[-2], 2, breaks=tui_cells.ID_BREAKS),
                tui_cells.clip(console, state, self._widths[-1], 2),
            ]
            for key, name, state in wanted
        }
        if [str(key.value) for key in table.rows] != list(rows):
            table.clear()
        if not all([tui_cells.put(table, key, cells) for key, cells in rows.items()]):
            table.clear()  # a state that needs another line: laid out anew
            for key, cells in rows.items():
                tui_cells.put(table, key, cells)
        chosen = self.session or ALL
        if chosen in table.rows and table.cursor_row != table.get_row_index(chosen):
            table.move_cursor(row=table.get_row_index(chosen), animate=False)

    def rebuild(self) -> None:
        events = self.query_one("#events", DataTable)
        self._layout()
        events.clear()
        for entry in [e for e in self.timeline.rows if self._wanted(e)][-SHOWN:]:
            self._put(events, entry)
        if events.row_count:
            events.move_cursor(row=events.row_count - 1, animate=False)
        self.show_status()

    def show_status(self) -> None:
        hidden = [k for k in KINDS if k not in self.kinds]
        filters = f" · hidden: {' '.join(hidden)}" if hidden else ""
        who = "all sessions" if self.session is None else self._session_name(self.session)
        bad = f" · {self.follower.bad_lines} unreadable lines" if self.follower.bad_lines else ""
        torn = " · its last line is unfinished" if self.follower.unfinished else ""
        starts = f" · {self.timeline.starts + 1} server starts" if self.timeline.starts else ""
        follow = "following" if self.following else "paused (f follows)"
        hint = ""
        if "output" in self.kinds and self.timeline.rows and not self._outputs:
            hint = " · output: logged at --log-level debug (1: Runs shows it)"
        tui_cells.say(
            self.query_one("#log-status", Static),
            Text(
                f"{who}{filters} · {follow}{starts}{bad}{torn} · {self.log_path.name} "
                f"{log_reader.size_text(self.log_path)}{hint}"
            ),
        )

    # Keys -------------------------------------------------------------------------------------------

    def action_kind(self, kind: str) -> None:
        self.kinds ^= {kind}
        self.rebuild()

    def action_all_sessions(self) -> None:
        self.session = None
        self.rebuild()
        self.show_sessions()

    def action_follow(self) -> None:
        self.following = not self.following
        self.show_status()

    @on(DataTable.RowSelected, "#sessions")
    def choose_session(self, message: DataTable.RowSelected) -> None:
        key = str(message.row_key.value)
        self.session = None if key == ALL else key
        self.rebuild()

    @on(DataTable.RowSelected, "#events")
    def open_entry(self, message: DataTable.RowSelected) -> None:
        serial = str(message.row_key.value)
        entry = next((e for e in reversed(self.timeline.rows) if _key(e) == serial), None)
        if entry is None:
            return
        name = self._session_name(entry["sessionId"]) if entry["sessionId"] else ""
        title = f"{TYPE_NAMES.get(entry['message'], entry['message'])} at {log_text.time_of(entry)}"
        self.app.push_screen(DetailScreen(self.reader, title, lambda: log_text.detail(entry, name)))

    # Helpers ----------------------------------------------------------------------------------------

    def _wanted(self, entry: dict[str, Any]) -> bool:
        return log_reader.matches(entry, self.session, self.kinds)

    def _put(self, events: DataTable[Any], entry: dict[str, Any]) -> bool:
        sid = entry["sessionId"]
        kind = TYPE_NAMES.get(entry["message"], entry["message"])
        console = self.app.console
        lines = ENTRY_LINES if entry["message"] in MULTI_LINE else CALL_LINES
        style = "red" if _failed(entry) else ""
        name = self._session_name(sid) if sid else ""
        cells = [  # Text: a value's brackets are not markup
            Text(log_text.time_of(entry), style="dim"),
            Text(kind, style=STYLES.get(kind, "")),
        ]
        if "session" in self._columns:
            cells.append(tui_cells.clip(console, name, self._widths[2], 2, breaks=tui_cells.ID_BREAKS))
        what = self._widths[len(self._columns) - 1]
        cells.append(tui_cells.clip(console, log_text.describe(entry), what, lines, style))
        return tui_cells.put(events, _key(entry), cells)

    def _session_name(self, sid: str) -> str:
        session = self.timeline.sessions.get(sid)
        return session.name if session is not None and session.name else sid


def _failed(entry: dict[str, Any]) -> bool:
    answer = entry.get("_answer")
    return entry["level"] == "error" or (answer is not None and answer["message"] == "tool:error")


def _key(entry: dict[str, Any]) -> str:
    return f"row-{entry['_row']}"
