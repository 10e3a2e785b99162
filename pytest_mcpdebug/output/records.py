"""Log records and warnings, placed among the lines a test prints.

Log records come from a handler on the root logger, at pytest's own capture level; warnings are seen
as they are issued through a hook of the ``warnings`` module, so each lands where it happened.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import pytest


class RecordSink(Protocol):
    def record(self, record: logging.LogRecord) -> None: ...


def warning_line(message: Any) -> bytes:
    category = getattr(message.category, "__name__", "Warning")
    text = f"{category}: {message.message} ({message.filename}:{message.lineno})"
    return text.encode("utf-8", "replace")


class WarningWatch:
    """Sees each warning as it is shown, by standing in front of ``warnings._showwarnmsg``.

    Inside a test pytest's ``catch_warnings(record=True)`` swaps the function that finally shows a
    warning (``_showwarnmsg_impl``) for ``log.append`` and reads the log after the test, too late to
    place a warning among the lines printed around it. ``catch_warnings`` saves and restores that
    function, ``showwarning`` and the filters, but not ``_showwarnmsg``, which both ``warnings.warn``
    and its C implementation look up on each warning shown (3.10-3.13): in front of it, one hook for
    the whole session sees every test's warnings, at no cost per test. (Without it warnings are still
    recorded, after the phase.)
    """

    def __init__(self, seen: Callable[[Any], None]) -> None:
        self._seen = seen
        self._next: Callable[[Any], None] | None = None

    def start(self) -> None:
        current = getattr(warnings, "_showwarnmsg", None)
        if current is not None and current != self._show:
            self._next = current
            warnings._showwarnmsg = self._show  # type: ignore[attr-defined]

    def stop(self) -> None:
        """Step out (if something stood in front of us since, we stay and only pass warnings on)."""
        if self._next is not None and getattr(warnings, "_showwarnmsg", None) == self._show:
            warnings._showwarnmsg = self._next  # type: ignore[attr-defined]
        self._seen = _ignore

    def _show(self, message: Any) -> None:
        try:
            self._seen(message)
        finally:
            if self._next is not None:
                self._next(message)


def _ignore(message: Any) -> None:
    pass


class RecordHandler(logging.Handler):
    """Sees the records pytest's own log capture sees (same level), from every thread but ours."""

    def __init__(self, tail: RecordSink) -> None:
        super().__init__()
        self.tail = tail

    def emit(self, record: logging.LogRecord) -> None:
        if threading.current_thread().name.startswith("mcpdebug-"):
            return  # our sender's own logging must not feed itself
        try:
            self.tail.record(record)
        except Exception:
            self.handleError(record)


def pytest_log_level(config: pytest.Config) -> int | None:
    try:
        from _pytest.logging import get_log_level_for_setting

        return get_log_level_for_setting(config, "log_level")
    except Exception:
        return None
