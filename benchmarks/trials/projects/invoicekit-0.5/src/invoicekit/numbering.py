"""Invoice numbers: unique, gap-free, safe to draw from several threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from invoicekit.settings import Settings


class NumberingGap(RuntimeError):
    pass


class Numberer:
    """Hands out `PREFIX-YEAR-NNNNNN` numbers; `on_issue` sees every number issued (an audit log)."""

    def __init__(self, prefix: str, year: int, start: int = 0,
                 on_issue: Callable[[int], None] | None = None) -> None:
        self.prefix = prefix
        self.year = year
        self._last = start
        self._lock = threading.RLock()
        self._on_issue = on_issue

    def next_number(self) -> str:
        with self._lock:
            number = self._last + 1
            self._record(number)
            self._last = number
        return self.format(number)

    def _record(self, number: int) -> None:
        if self._on_issue is not None:
            self._on_issue(number)

    def format(self, number: int) -> str:
        return f"{self.prefix}-{self.year:04d}-{number:06d}"

    @property
    def last(self) -> int:
        with self._lock:
            return self._last


def numberer_for(settings: Settings, year: int, start: int = 0) -> Numberer:
    """The application's numberer: with `audit_log` set, every number issued is checked to follow
    the previous one and appended to that file before it is handed out."""
    if not settings.audit_log:
        return Numberer(settings.number_prefix, year, start)
    log = Path(settings.audit_log)

    def audit(number: int) -> None:
        if number != numberer.last + 1:
            raise NumberingGap(f"number {number} does not follow {numberer.last}")
        with log.open("a", encoding="utf-8") as out:
            out.write(numberer.format(number) + "\n")

    numberer = Numberer(settings.number_prefix, year, start, on_issue=audit)
    return numberer
