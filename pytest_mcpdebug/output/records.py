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
    """Sees each warning as it is issued, by standing in front of the function ``warnings`` calls to
    show one.

    Inside a test pytest's ``catch_warnings(record=True)`` makes that function ``log.append``; pytest
    reads the log after the test, too late to place a warning among the lines printed around it.
    (A private hook of the ``warnings`` module, present in 3.10-3.13; without it warnings are still
    recorded, after the phase.) One bound method is put in place and taken out again per test, so
    watching costs two attribute writes.
    """

    def __init__(self, seen: Callable[[Any], None]) -> None:
        self._seen = seen
        self._next: Callable[[Any], None] | None = None

    def start(self) -> bool:
        """Watch from now on; False if already watching (a nested start must not stop it)."""
        current = getattr(warnings, "_showwarnmsg_impl", None)
        if current is None or current == self._show:
            return False
        self._next = current
        warnings._showwarnmsg_impl = self._show  # type: ignore[attr-defined]
        return True

    def stop(self, started: bool = True) -> None:
        """Stop watching, if ``started`` (what `start` returned) says this caller started it."""
        if started and self._next is not None and getattr(warnings, "_showwarnmsg_impl", None) == self._show:
            warnings._showwarnmsg_impl = self._next  # type: ignore[attr-defined]

    def _show(self, message: Any) -> None:
        try:
            self._seen(message)
        finally:
            if self._next is not None:
                self._next(message)


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
