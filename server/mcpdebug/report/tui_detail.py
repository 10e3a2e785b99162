"""The TUI's detail view: one text in full (a test's failure, a run's summary, a log entry), scrolled.

The text is built in a thread (a view reads the store and the output files) while the screen says
it is coming; a view that cannot be built says why instead. A second text, when there is one (a
failing test's `mcpdebug show` beside its `mcpdebug failure`), is one key away.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from mcpdebug.report.run_watch import READ_ERRORS, Reader

Loader = Callable[[], str]


class DetailScreen(Screen[None]):
    CSS = """
    DetailScreen #detail-title { height: auto; background: $boost; padding: 0 1; text-style: bold; }
    DetailScreen #detail-scroll { height: 1fr; }
    DetailScreen #detail-text { padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back", show=False),
        Binding("s", "switch", "Other view"),
    ]

    def __init__(
        self, reader: Reader, title: str, load: Loader, other: tuple[str, Loader] | None = None
    ) -> None:
        """``title``: what is shown, then `` · `` and which view of it; ``other``: another view of the
        same thing (its name and its text), one key away."""
        super().__init__()
        self.reader = reader
        head, _, first = title.rpartition(" · ")
        self.head = head
        self.views: list[tuple[str, Loader]] = [(first, load), *([other] if other else [])]
        self.shown = 0
        self.text = ""

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with VerticalScroll(id="detail-scroll"):
            yield Static(id="detail-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail-scroll").focus()
        self.show()

    def show(self) -> None:
        name, load = self.views[self.shown]
        switch = f"   (s: {self.views[1 - self.shown][0]})" if len(self.views) > 1 else ""
        title = f"{self.head} · {name}" if self.head else name
        self.query_one("#detail-title", Static).update(Text(title + switch))
        self.query_one("#detail-text", Static).update(Text("reading…", style="dim"))
        self.run_worker(self.load(load), group="detail", exclusive=True)

    async def load(self, load: Loader) -> None:
        try:
            text = await self.reader(load)
        except READ_ERRORS as exc:
            text = f"Cannot show it: {exc}"
        self.text = text
        if self.is_attached:
            with contextlib.suppress(NoMatches):  # the screen is closing: its widgets went first
                self.query_one("#detail-text", Static).update(Text(text))
                self.query_one("#detail-scroll", VerticalScroll).scroll_home(animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch":
            return len(self.views) > 1
        return True

    def action_switch(self) -> None:
        self.shown = 1 - self.shown
        self.show()
