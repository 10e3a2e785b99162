"""The `mcpdebug_process` fixture: services a test talks to, run under `mcpdebug run`.

Each service is a process session of its own (label, lines, state; `control_process` and
`send_stdin` reach it), linked to the test run that started it, so `get_failure` of a failing test
shows the lines the service wrote while that test ran. The runner is a separate command (`python
-m mcpdebug run`): the plugin never imports the server. It stops its service when the test process
goes away, even if that process is killed (``--watch-fd``), so no service outlives its tests.

Imported only by a test that asks for the fixture.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

import pytest

# Timeouts
STOP_TIMEOUT: Final = 10.0
# Limits
KEPT_LINES: Final = 10_000
"""Lines of a service's output the fixture keeps for `Service.wait_for` and its errors."""


class Service:
    """A command running under `mcpdebug run`; its output is also read here, for `wait_for`."""

    def __init__(self, process: subprocess.Popen[bytes], command: list[str], label: str, watch: int) -> None:
        self.process = process
        self.command = command
        self.label = label
        """The label asked for (the server adds -2, -3, ... when another live session holds it)."""
        self.lines: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self._watch = watch
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"mcpdebug-service-{label}", daemon=True)
        self._reader.pydev_do_not_trace = True  # type: ignore[attr-defined]  # a debug run's debugpy
        self._reader.is_pydev_daemon_thread = True  # type: ignore[attr-defined]  # leaves it running
        self._reader.start()

    @property
    def pid(self) -> int:
        """The runner's pid; `signal` reaches the service itself."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        """The first line (from the start) matching the regex ``pattern``, waiting up to ``timeout``."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._arrived:
            while True:
                lines = list(self.lines)
                for line in lines[seen:]:
                    if regex.search(line):
                        return line
                seen = len(lines)
                left = deadline - time.monotonic()
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(
                        f"{self.label} ended (status {self.process.returncode}) before printing a line "
                        f"matching {pattern!r}; its last lines:\n" + "\n".join(lines[-20:])
                    )
                if left <= 0:
                    raise TimeoutError(
                        f"{self.label} printed no line matching {pattern!r} within {timeout:g} s; its last "
                        "lines:\n" + "\n".join(lines[-20:])
                    )
                self._arrived.wait(min(left, 0.5))

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the service (the runner passes it on to its process group)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signum)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Stop the service (SIGTERM, then SIGKILL); returns the runner's exit status."""
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.close(self._watch)  # the runner stops the service and exits
                    self._watch = -1
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        if self._watch >= 0:
            with contextlib.suppress(OSError):
                os.close(self._watch)
            self._watch = -1
        self._reader.join(2.0)
        return self.process.returncode

    def _read(self) -> None:
        stream: IO[bytes] | None = self.process.stdout
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            with self._arrived:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()


class Services:
    """What the fixture hands a test: ``mcpdebug_process(command, label=..., ready=...)``."""

    def __init__(self, directory: Path, *, url: str | None, token: str | None, cwd: Path) -> None:
        self.directory = directory
        self.url = url
        self.token = token
        self.cwd = cwd
        self.started: list[Service] = []

    def __call__(
        self,
        command: str | Sequence[str],
        *,
        label: str | None = None,
        ready: str | None = None,
        timeout: float = 30.0,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        restart: str = "no",
    ) -> Service:
        """Start ``command`` (a string split as a shell would, or a list) under `mcpdebug run`;
        with ``ready`` (a regex), wait until it prints a matching line."""
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("mcpdebug_process: the command is empty")
        name = label or Path(argv[0]).name
        read_end, write_end = os.pipe()
        runner = [sys.executable, "-m", "mcpdebug", "run", "--dir", str(self.directory)]
        runner += ["--watch-fd", str(read_end), "--restart", restart, "--label", name]
        environment = {**os.environ, **(env or {})}
        if self.url:
            environment["MCPDEBUG_URL"] = self.url
        if self.token:
            environment["MCPDEBUG_TOKEN"] = self.token
        try:
            process = subprocess.Popen(
                [*runner, "--", *argv],
                cwd=cwd if cwd is not None else self.cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(read_end,),
            )
        finally:
            os.close(read_end)
        service = Service(process, argv, name, write_end)
        self.started.append(service)
        if ready is not None:
            service.wait_for(ready, timeout)
        return service

    def close(self) -> None:
        for service in reversed(self.started):
            service.stop()


def services_for(config: pytest.Config) -> Services:
    """Where the services' sessions go: the recording's folder and server, else the project's."""
    recorder = config.pluginmanager.get_plugin("mcpdebug-recorder")
    if recorder is not None:
        return Services(recorder.dir, url=recorder.url, token=recorder.token, cwd=Path(config.rootpath))
    from pytest_mcpdebug import settings

    found = settings.resolve(config)
    return Services(found.dir, url=found.url, token=found.token, cwd=Path(config.rootpath))
