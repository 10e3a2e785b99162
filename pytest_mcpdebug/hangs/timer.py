"""The per-test hooks of the hang timeouts, registered only when some test of the run has a timeout.

Arming and disarming the watchdog around each test (or only its call, ``func_only``), each attempt
of a rerun test afresh, the landing of an interruption, and what an interrupted test leaves running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any, Protocol

import pytest

from pytest_mcpdebug.hangs.leaks import Leaks
from pytest_mcpdebug.hangs.target import HangTimeout
from pytest_mcpdebug.hangs.watchdog import Watchdog
from pytest_mcpdebug.recording.sender import Sender


class Owner(Protocol):
    """What the timer needs of `timeouts.Timeouts` (which registers it): no import back to it."""

    @property
    def watchdog(self) -> Watchdog: ...
    @property
    def leaks(self) -> Leaks: ...
    @property
    def sender(self) -> Sender: ...
    def _resolve(self, item: pytest.Item) -> tuple[float | None, bool]: ...
    def _arm(self, item: pytest.Item, timeout: float) -> None: ...


class TestTimer:
    """The per-test hooks, registered only when some test of the run has a timeout.

    Each attempt of a test is timed afresh: pytest-rerunfailures runs the phases of every attempt
    inside one ``pytest_runtest_protocol`` (starting each with ``pytest_runtest_logstart``), and
    reports them only after the attempt's teardown, so an interruption is seen to land from
    ``pytest_runtest_makereport``, not from the logged report."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.watchdog = owner.watchdog
        self._item: pytest.Item | None = None
        self._attempts = 0
        self._interrupted = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Generator[None, Any, Any]:
        timeout, func_only = self.owner._resolve(item)
        armed = timeout is not None and not func_only
        if timeout is not None:
            self.owner.leaks.before()
            self._interrupted = False
        if timeout is not None and armed:
            self.owner._arm(item, timeout)
            self._item, self._attempts = item, 0
        try:
            return (yield)
        finally:
            if armed:
                self._item = None
                if self.watchdog.hung:
                    self.owner.sender.drained()  # the diagnosis leaves before a next test takes the GIL
                self.watchdog.disarm()
            if self._interrupted:  # what it started and left running, named at the end of the run
                with contextlib.suppress(Exception):
                    self.owner.leaks.after(item.nodeid, self.watchdog.own_pids)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        item = self._item
        if item is None or item.nodeid != nodeid:
            return
        self._attempts += 1
        if self._attempts > 1:  # a rerun: its own whole timeout
            timeout, _ = self.owner._resolve(item)
            if timeout is not None:
                if self.watchdog.hung:
                    self.owner.sender.drained()
                self.watchdog.disarm()
                self.owner._arm(item, timeout)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        if call.excinfo is not None and isinstance(call.excinfo.value, HangTimeout):
            self._interrupted = True
            if self.watchdog.hung:
                self.watchdog.landed()  # interrupted: the rest of the test gets a fresh timeout


class CallTimer:
    """The timeout of a test's call alone (``func_only``): a hook of its own, registered only when a
    test of the run has one (every other run pays for no wrapper around each call)."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.watchdog = owner.watchdog

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        timeout, func_only = self.owner._resolve(item)
        armed = timeout is not None and func_only
        if timeout is not None and armed:
            self.owner._arm(item, timeout)
        try:
            return (yield)
        finally:
            if armed:
                self.watchdog.disarm()
