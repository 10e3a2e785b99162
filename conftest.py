"""Shared fixtures of the project's own tests.

`fixtures/` and `examples/` hold sample suites that the tests run as *inner* pytest runs, so they
are kept out of this collection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

collect_ignore = ["fixtures", "examples", "benchmarks"]

ROOT = Path(__file__).parent
FIXTURES = ROOT / "fixtures"
MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))

NEEDED = ("pytest_mcpdebug", "mcpdebug", "mcp", "msgspec", "websockets", "anyio", "httpx2", "hypothesis")
"""What the suite imports from the project and its `[dev]` extra: without them every module fails to
collect, one import error after another."""


def pytest_configure(config: pytest.Config) -> None:
    import importlib.util

    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise pytest.UsageError(
            f"{sys.executable} lacks {', '.join(missing)}: the suite runs in the project's virtualenv. "
            "Set it up and run the tests with README command 2: python3 -m venv .venv && "
            '.venv/bin/pip install -e ".[dev]" && .venv/bin/python -m pytest'
        )


STACKS_BEFORE_TIMEOUT = 20.0
"""Seconds before pytest-timeout fails a test at which the stacks of the processes it started are
dumped (py-spy), for the report: an inner run that never ends is otherwise a test stuck in
``Popen.wait()`` with nothing of why."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    timeout = item.config.getini("timeout")
    limit = float(timeout) if timeout else 0.0
    dumps: list[str] = []
    timer = None
    if limit > STACKS_BEFORE_TIMEOUT:
        import threading

        timer = threading.Timer(limit - STACKS_BEFORE_TIMEOUT, lambda: dumps.extend(_children_stacks()))
        timer.daemon = True
        timer.start()
    try:
        return (yield)
    except BaseException:
        if dumps:
            item.add_report_section("call", "stacks of its processes before the timeout", "\n".join(dumps))
        raise
    finally:
        if timer is not None:
            timer.cancel()


def _children_stacks() -> list[str]:
    """`py-spy dump` of every process this one started (an inner pytest run, a server), or why not."""
    import psutil

    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())[:300]
        except psutil.Error:
            continue
        if spy is None:
            out.append(f"pid {child.pid}: {cmd} (py-spy not found)")
            continue
        dumped = subprocess.run(
            [spy, "dump", "--pid", str(child.pid), "--locals"], capture_output=True, text=True, timeout=30
        )
        out.append(f"pid {child.pid}: {cmd}\n{dumped.stdout}{dumped.stderr}")
    return out


@pytest.fixture(autouse=True)
def _clean_mcpdebug_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs must not inherit a developer's MCPDEBUG* settings."""
    for name in list(os.environ):
        if name.startswith("MCPDEBUG"):
            monkeypatch.delenv(name)


@pytest.fixture
def anyio_backend() -> str:
    """The server runs on asyncio; anyio's own fixture would also run every test on trio whenever
    trio is installed (selenium, of the dev extra, brings it)."""
    return "asyncio"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Iterator[SuiteCopier]:
    yield SuiteCopier(pytester.path)


class SuiteCopier:
    """Copies a suite from `fixtures/` into the pytester folder: ``suite("failing")``."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest

    def __call__(self, name: str) -> Path:
        source = FIXTURES / name
        for item in source.iterdir():
            if item.name in ("__pycache__", ".mcpdebug", ".pytest_cache"):
                continue
            target = self.dest / item.name
            if item.is_dir():
                shutil.copytree(item, target)
            else:
                shutil.copy(item, target)
        return self.dest


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    directory: Path
    url: str
    token: str
    log: Path
    mcp_url: str = ""  # the streamable HTTP endpoint and the bearer token it requires
    mcp_token: str = ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_server(directory: Path, *extra: str, timeout: float = 60.0) -> RunningServer:
    """`mcpdebug serve --http --port 0` on ``directory``, waiting until it advertises itself."""
    directory.mkdir(parents=True, exist_ok=True)
    info_file = directory / "server.json"
    info_file.unlink(missing_ok=True)
    log = directory.parent / f"serve-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        [MCPDEBUG, "serve", "--http", "--port", "0", "--dir", str(directory), *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),  # noqa: SIM115
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mcpdebug serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            info = json.loads(info_file.read_text())
            if info["pid"] == process.pid:
                return RunningServer(
                    process, directory, info["url"], info["token"], log, info["mcp_url"], info["mcp_token"]
                )
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"mcpdebug serve did not start within {timeout} s:\n{log.read_text()}")


@pytest.fixture
def server(pytester: pytest.Pytester) -> Iterator[RunningServer]:
    """A real `mcpdebug serve` whose store is the inner runs' default `.mcpdebug/` folder."""
    running = start_server(pytester.path / ".mcpdebug")
    yield running
    running.stop()
