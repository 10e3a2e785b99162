"""The timed test (`Target`: its deadline, samples and interruption state) and the exceptions it is
interrupted with; the watchdog, the timer, the resumed process and `detect_hang` share them."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Final

import pytest

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import tasks as async_tasks
from pytest_mcpdebug.hangs.classify import Sample
from pytest_mcpdebug.protocol import HangReport

MAX_SAMPLES: Final = 600


class HangTimeout(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The test ran past its mcpdebug timeout; the message is the diagnosis."""

    message = "hang"

    def __init__(self, msg: str | None = None, pytrace: bool = True) -> None:
        super().__init__(msg or self.message, pytrace=pytrace)


class HangExit(pytest.exit.Exception):  # type: ignore[name-defined,misc]
    """``--mcp-debug-hang-action=exit``: the run ends at the first hang."""

    message = "hang"

    def __init__(self, msg: str | None = None, returncode: int | None = 2) -> None:
        super().__init__(msg or self.message, returncode=returncode)


@dataclass
class Target:
    """The test being timed."""

    nodeid: str
    thread: int
    timeout: float
    action: str
    started: float = field(default_factory=time.monotonic)
    clock: int | None = None
    cpu_start: float | None = None
    samples: collections.deque[Sample] = field(default_factory=lambda: collections.deque(maxlen=MAX_SAMPLES))
    fired: float | None = None
    report: HangReport | None = None
    exc: type[BaseException] | None = None
    """What the test was interrupted with, to raise again at a new blocking point."""
    interrupted_at: tuple[classifier.Frame, ...] = ()
    """The test's stack when last interrupted."""
    seen: tuple[classifier.Frame, ...] = ()
    still: int = 0
    """Ticks the test's stack has been ``seen`` unchanged since the interruption."""
    repeats: int = 0
    hung: bool = False
    """Diagnosed as hung (stays so after the interruption lands and the rest is timed afresh)."""
    test: async_tasks.TestFunction | None = None
    """The test's function, to find its coroutine among an event loop's tasks."""

    @property
    def deadline(self) -> float:
        return self.started + self.timeout
