"""Helpers for tests that run an inner pytest with the plugin and read what it recorded."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpdebug.ingest import ingest_spool
from mcpdebug.store import Store

# Hypothesis's pytest plugin alone costs ~1 s of start-up per inner run; none of these suites need it.
FAST = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*FAST, *args, timeout=120)


def recorded(directory: Path) -> Store:
    """The store of ``directory`` with any spool taken in, as the CLI or server would."""
    store = Store(directory)
    ingest_spool(store)
    return store


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def start_inner(pytester: pytest.Pytester, *args: str) -> subprocess.Popen[bytes]:
    """An inner pytest in the background (for watching it live), its output in one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *FAST, *args],
        cwd=pytester.path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
