"""`mcpdebug tui`: watch an agent's session live, from the server's JSON log and the store.

Left, the sessions (recorded runs from the store, and every session the log names: runs, held
tests, debug sessions, process sessions) with their state; right, the chosen session's entries,
newest at the bottom and followed as they come: each tool call with its answer and how long it
took, state changes, breakpoints, variables, output. Keys (shown in the footer) filter by type.
Works the same on a log copied from CI (``--log PATH``): it just does not grow.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, ClassVar, Final

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Static

from mcpdebug.report import log_reader
from mcpdebug.report.log_reader import KINDS, LogFollower, Timeline
from pytest_mcpdebug.folder import STORE_FILE

ALL: Final = "*"
SHOWN: Final = 3_000
"""Rows the entries table holds after a filter changes (the newest)."""
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


class DebugTUI(App[None]):
    TITLE = "mcpdebug"
    CSS = """
    #sessions { width: 46; border-right: solid $primary-background; }
    #events { width: 1fr; }
    #status { height: 1; background: $boost; color: $text-muted; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "kind('tools')", "Tools"),
        Binding("s", "kind('states')", "States"),
        Binding("b", "kind('breakpoints')", "Breakpoints"),
        Binding("v", "kind('variables')", "Variables"),
        Binding("o", "kind('output')", "Output"),
        Binding("l", "kind('server')", "Server log"),
        Binding("a", "all_sessions", "All sessions"),
        Binding("f", "follow", "Follow"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, log: Path, store_dir: Path | None = None, *, interval: float = 0.25) -> None:
        super().__init__()
        self.log_path = log
        self.store_dir = store_dir
        self.interval = interval
        self.follower = LogFollower(log)
        self.timeline = Timeline()
        self.kinds = {"tools", "states", "breakpoints", "variables", "output"}
        self.session: str | None = None
        self.following = True
        self.runs: dict[str, dict[str, Any]] = {}
        self._store: Any = None
        self._rows = 0

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal():
            yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="events", cursor_type="row")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = str(self.log_path)
        sessions = self.query_one("#sessions", DataTable)
        sessions.add_column("session", key="name", width=24)
        sessions.add_column("state", key="state", width=16)
        events = self.query_one("#events", DataTable)
        events.add_column("time", key="time", width=12)
        events.add_column("session", key="session", width=14)
        events.add_column("type", key="type", width=10)
        events.add_column("what", key="what")
        self.read_store()
        self.poll()
        self.set_interval(self.interval, self.poll)
        self.set_interval(2.0, self.read_store)
        events.focus()

    # Reading ----------------------------------------------------------------------------------------

    def poll(self) -> None:
        """New log lines: new rows at the bottom, calls updated with their answers."""
        if not all(self.query(f"#{name}") for name in ("sessions", "events", "status")):
            return  # a timer firing while the app closes (its widgets go one by one)
        added, answered = self.timeline.add(self.follower.read())
        events = self.query_one("#events", DataTable)
        for entry in added:
            if self._wanted(entry):
                self._add_row(events, entry)
        for call in answered:
            key = _key(call)
            if self._wanted(call) and key in events.rows:
                failed = call["answer"]["message"] == "tool:error"
                events.update_cell(
                    key, "what", Text(log_reader.describe(call), style="red" if failed else "")
                )
        if added or answered:
            self.show_sessions()
            if self.following and events.row_count:
                events.move_cursor(row=events.row_count - 1, animate=False)
        self.show_status()

    def read_store(self) -> None:
        """Recorded runs and their states, from the store beside the log (when there is one)."""
        if self.store_dir is None or not (self.store_dir / STORE_FILE).exists():
            return
        if not self.query("#sessions"):
            return
        try:
            if self._store is None:
                from mcpdebug.store import Store

                self._store = Store(self.store_dir, create=False)
            from mcpdebug.views import runs as runs_view

            self.runs = {r["run_id"]: {**r, "state": runs_view.status_text(r)} for r in self._store.runs(30)}
        except Exception as exc:  # a store being rebuilt, or not one at all: the log still shows
            self.runs = {}
            self.notify(f"cannot read the store: {exc}", severity="warning", timeout=5)
            self.store_dir = None
        self.show_sessions()

    # Showing ----------------------------------------------------------------------------------------

    def show_sessions(self) -> None:
        table = self.query_one("#sessions", DataTable)
        wanted = [(ALL, "All sessions", f"{len(self.timeline.rows)} entries")]
        seen = set()
        for sid, session in sorted(self.timeline.sessions.items(), key=lambda kv: -(kv[1].last or 0)):
            seen.add(sid)
            kind = f"[{session.kind}] " if session.kind else ""
            wanted.append((sid, kind + (session.name or sid), session.state or "-"))
        for rid, run in self.runs.items():
            if rid not in seen:
                wanted.append((rid, f"[{run['kind']}] {run['label'] or rid}", run["state"]))
        current = [str(key.value) for key in table.rows]
        if current == [w[0] for w in wanted]:
            for key, _, state in wanted:
                table.update_cell(key, "state", Text(state))
            return
        chosen = self.session or ALL
        table.clear()
        for key, name, state in wanted:
            table.add_row(Text(name), Text(state), key=key)
        if chosen in table.rows:
            table.move_cursor(row=table.get_row_index(chosen), animate=False)

    def rebuild(self) -> None:
        events = self.query_one("#events", DataTable)
        events.clear()
        self._rows = 0
        rows = [e for e in self.timeline.rows if self._wanted(e)][-SHOWN:]
        for entry in rows:
            self._add_row(events, entry)
        if events.row_count:
            events.move_cursor(row=events.row_count - 1, animate=False)
        self.show_status()

    def show_status(self) -> None:
        filters = " ".join(k if k in self.kinds else f"-{k}" for k in KINDS)
        who = "all sessions" if self.session is None else self._session_name(self.session)
        bad = f" · {self.follower.bad_lines} unreadable lines" if self.follower.bad_lines else ""
        follow = "following" if self.following else "paused (f follows)"
        self.query_one("#status", Static).update(
            f"{who} · {filters} · {follow} · {log_reader.size_text(self.log_path)}{bad}"
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

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        if message.data_table.id != "sessions":
            return
        key = str(message.row_key.value)
        self.session = None if key == ALL else key
        self.rebuild()

    # Helpers ----------------------------------------------------------------------------------------

    def _wanted(self, entry: dict[str, Any]) -> bool:
        return log_reader.matches(entry, self.session, self.kinds)

    def _add_row(self, events: DataTable[Any], entry: dict[str, Any]) -> None:
        self._rows += 1
        sid = entry.get("sessionId")
        kind = TYPE_NAMES.get(entry["message"], entry["message"])
        events.add_row(  # Text: a value's brackets are not markup
            Text(log_reader.time_of(entry), style="dim"),
            Text(self._session_name(sid)[:14] if sid else ""),
            Text(kind, style=STYLES.get(kind, "")),
            Text(log_reader.describe(entry), style="red" if _failed(entry) else ""),
            key=_key(entry) if entry["message"] == "tool:call" else f"row-{self._rows}",
        )

    def _session_name(self, sid: str) -> str:
        session = self.timeline.sessions.get(sid)
        if session is not None and session.name:
            return session.name
        run = self.runs.get(sid)
        return str(run["label"] or sid) if run else sid


def _failed(entry: dict[str, Any]) -> bool:
    answer = entry.get("answer")
    return entry.get("level") == "error" or (answer is not None and answer["message"] == "tool:error")


def _key(call: dict[str, Any]) -> str:
    return f"call-{call.get('sessionId')}-{call.get('callId')}"


def main(args: argparse.Namespace) -> int:
    """`mcpdebug tui [--dir D] [--log PATH]`."""
    from mcpdebug.store import StoreError
    from mcpdebug.store_dir import find_dir

    directory: Path | None
    try:
        directory = find_dir(args.dir, create=args.log is None)
    except StoreError:
        directory = None
    log = Path(args.log).expanduser() if args.log else log_reader.default_log(directory or Path(".mcpdebug"))
    if args.log and not log.is_file():
        print(f"mcpdebug tui: no log file {log}", file=sys.stderr)
        return 2
    if not sys.stdout.isatty():
        print("mcpdebug tui: needs a terminal (run it in one, or in tmux)", file=sys.stderr)
        return 2
    DebugTUI(log, directory).run()
    return 0
