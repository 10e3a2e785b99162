"""Invoice numbers: unique, gap-free, safe to draw from several threads."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Numberer:
    """Hands out `PREFIX-YEAR-NNNNNN` numbers; `on_issue` sees every number issued (an audit log)."""

    def __init__(self, prefix: str, year: int, start: int = 0,
                 on_issue: Callable[[int], None] | None = None) -> None:
        self.prefix = prefix
        self.year = year
        self._last = start
        self._lock = threading.Lock()
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
        return self._last
