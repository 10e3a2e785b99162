"""`mcpdebug tui`: the project's runs and the server's log, live, in a terminal.

Two views (keys 1 and 2): the runs recorded in the store, the chosen one's tests with their outcomes
as they finish, and each failure as `mcpdebug failure` shows it (`tui_runs`); and the agent's
session as the server's JSON log tells it (`tui_log`). The runs view comes first: it needs no
server. A log copied from CI (``--log PATH``) reads the same as the live one: it just does not grow.

A crash (a bug) ends the program with exit status 1 and one line saying what happened and where
the whole traceback was written, not a screen of it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from pathlib import Path
from typing import ClassVar, Final

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Header, TabbedContent, TabPane

from mcpdebug.report import log_reader
from mcpdebug.report.run_watch import Reader, RunWatch
from mcpdebug.report.tui_log import LogPane
from mcpdebug.report.tui_runs import RunsPane

EXIT_CRASH: Final = 1
EXIT_USAGE: Final = 2
VIEWS: Final = ("runs", "log")
RUNS_LABEL: Final = "Runs (1)"


class DebugTUI(App[None]):
    TITLE = "mcpdebug"
    AUTO_FOCUS = None  # the first view's table is focused once mounted (`_focus_view`), not the tabs
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "view('runs')", "Runs", show=False),  # the tabs say (1) and (2)
        Binding("2", "view('log')", "Server log", show=False),
        # the runs view's keys
        Binding("p", "runs('problems')", "Problems only"),
        Binding("i", "runs('summary')", "Run summary"),
        Binding("n", "runs('newest')", "Newest run"),
        # the server-log view's keys
        Binding("t", "log('kind', 'tools')", "Tools"),
        Binding("s", "log('kind', 'states')", "States"),
        Binding("b", "log('kind', 'breakpoints')", "Breakpoints"),
        Binding("v", "log('kind', 'variables')", "Variables"),
        Binding("o", "log('kind', 'output')", "Output"),
        Binding("l", "log('kind', 'server')", "Server's own"),
        Binding("a", "log('all_sessions')", "All sessions"),
        Binding("f", "log('follow')", "Follow"),
        Binding("q", "quit", "Quit"),
    ]
    """A view's keys are the app's (they work wherever the focus is) and are offered while it shows."""

    def __init__(
        self,
        log: Path,
        store_dir: Path | None = None,
        *,
        interval: float = 0.25,
        view: str = "runs",
    ) -> None:
        super().__init__()
        self.log_path = log
        self.store_dir = store_dir
        self.interval = interval
        self.view = view if view in VIEWS else "runs"
        self.reader = Reader()
        self.unseen = 0
        """Failures and hangs announced while the runs view was not shown."""
        self.crash: BaseException | None = None
        self.crash_file: Path | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with TabbedContent(initial=self.view, id="views"):
            with TabPane(RUNS_LABEL, id="runs"):
                yield RunsPane(RunWatch(self.store_dir), self.reader, interval=max(self.interval, 0.5))
            with TabPane("Server log (2)", id="log"):
                yield LogPane(self.log_path, self.reader, interval=self.interval)
        yield Footer()

    def on_mount(self) -> None:
        where = self.store_dir if self.store_dir is not None else self.log_path.parent
        self.sub_title = str(where)
        self.call_after_refresh(self._focus_view)

    def on_unmount(self) -> None:
        self.reader.close()

    @property
    def runs(self) -> RunsPane:
        return self.query_one(RunsPane)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    def action_view(self, view: str) -> None:
        while len(self.screen_stack) > 1:  # from a detail view: back to the views
            self.pop_screen()
        self.query_one("#views", TabbedContent).active = view
        self.call_after_refresh(self._focus_view)

    def action_runs(self, action: str) -> None:
        getattr(self.runs, f"action_{action}")()

    def action_log(self, action: str, *args: str) -> None:
        getattr(self.log_pane, f"action_{action}")(*args)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("runs", "log"):  # a view's keys: while that view shows, and no detail over it
            return len(self.screen_stack) == 1 and self.query_one("#views", TabbedContent).active == action
        return True

    def on_tabbed_content_tab_activated(self, _: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()
        self.call_after_refresh(self._focus_view)
        if self.query_one("#views", TabbedContent).active == "runs" and self.unseen:
            self.unseen = 0
            self.query_one("#views", TabbedContent).get_tab("runs").label = RUNS_LABEL

    def on_runs_pane_news(self, message: RunsPane.News) -> None:
        """Said at once in the runs view; over the server log (toasts would cover its lines), the
        runs' tab counts them until it is opened."""
        views = self.query_one("#views", TabbedContent)
        if views.active == "runs" and len(self.screen_stack) == 1:
            for severity, text in message.news:
                self.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]
            return
        self.unseen += sum(severity != "information" for severity, _ in message.news)
        if self.unseen:
            views.get_tab("runs").label = f"{RUNS_LABEL} · {self.unseen} new failed or hung"

    def _focus_view(self) -> None:
        """The shown view's main table gets the focus, unless the focus is in that view already."""
        views = self.query_one("#views", TabbedContent)
        pane = views.active_pane
        if pane is None or (self.focused is not None and pane in self.focused.ancestors_with_self):
            return
        tables = self.query("#tests" if views.active == "runs" else "#events")
        if tables:  # not when quitting: the tables go first
            tables.first().focus()

    # Crashes ----------------------------------------------------------------------------------------

    def _fatal_error(self) -> None:
        """Instead of textual's screen of traceback: the traceback kept in a file for a bug report,
        and the app closed; `main` says what happened in one line once the terminal is restored."""
        error = sys.exc_info()[1] or self._exception
        self.crash = error
        self.crash_file = _write_traceback(error, self.store_dir)
        self.bell()
        self._close_messages_no_wait()


def crash_line(error: BaseException | None, traceback_file: Path | None) -> str:
    what = f"{type(error).__name__}: {error}" if error is not None else "an unknown error"
    what = " ".join(what.split())[:300]
    where = f" (traceback in {traceback_file})" if traceback_file else ""
    return f"mcpdebug tui: crashed: {what}{where}"


def _write_traceback(error: BaseException | None, store_dir: Path | None) -> Path | None:
    """The whole traceback in `<store>/logs/tui-crash.log`, else in the temporary folder."""
    text = "".join(traceback.format_exception(error)) if error is not None else "no exception\n"
    folders = [store_dir / "logs"] if store_dir is not None and store_dir.is_dir() else []
    for folder in [*folders, Path(tempfile.gettempdir())]:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "mcpdebug-tui-crash.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def main(args: argparse.Namespace) -> int:
    """`mcpdebug tui [--dir D] [--log PATH] [--view runs|log]`."""
    from mcpdebug.store import StoreError
    from mcpdebug.store_dir import find_dir

    directory: Path | None
    try:
        directory = find_dir(args.dir, create=True)  # the folder's path: nothing is made
    except StoreError as exc:
        if args.log is None:
            print(f"mcpdebug tui: {exc}", file=sys.stderr)
            return EXIT_USAGE
        directory = None
    log = Path(args.log).expanduser() if args.log else log_reader.default_log(directory or Path(".mcpdebug"))
    if args.log and not log.is_file():
        print(f"mcpdebug tui: no log file {log}", file=sys.stderr)
        return EXIT_USAGE
    if not sys.stdout.isatty():
        print("mcpdebug tui: needs a terminal (run it in one, or in tmux)", file=sys.stderr)
        return EXIT_USAGE
    app = DebugTUI(log, directory, view=args.view or ("log" if args.log else "runs"))
    app.run()
    if app.crash is not None or app.return_code:
        print(crash_line(app.crash, app.crash_file), file=sys.stderr)
        return app.return_code or EXIT_CRASH
    return 0
