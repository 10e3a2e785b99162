"""`--mcp-debug-html=PATH`: the run's HTML report, written when the run ends, with or without a server.

The plugin never imports the server, so the report is built by `mcpdebug report RUN --html PATH` in
a child process, once the recorder has closed its sender (every event acknowledged by the server
or in the spool file, which that command takes in first). Registered only when the option is given:
a run without it pays nothing. A report that cannot be written is one warning line; the run's
outcome and exit status never change.

A run killed by SIGTERM (a CI job cancelled at its time limit, when a report matters most) writes it
too, before it goes: once its stop is recorded, within `KILLED_BUDGET` seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest

# Timeouts
BUILD_TIMEOUT: Final = 300.0
"""A 10,000-test run's report takes a few seconds; this only bounds a stuck child."""
KILLED_BUDGET: Final = 8.0
"""A killed run's report: runners allow a cancelled job some seconds (GitLab's and Jenkins' SIGKILL
follows after 10 s or more) before they end it for good."""


class HtmlReport:
    def __init__(self, config: pytest.Config, path: Path, recorder: Any) -> None:
        self.config = config
        self.path = path
        self.recorder = recorder
        self.done = False

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        timeouts = getattr(self.recorder, "timeouts", None)  # made at the recorder's (earlier) start
        if timeouts is not None:
            timeouts.on_killed = self.write_before_exit

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        line, warn = self.write()
        terminalreporter.write_line(line, yellow=warn)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not self.done:  # no terminal summary (-p no:terminal): say it on stderr
            line, _ = self.write()
            print(line, file=sys.stderr)

    def write(self) -> tuple[str, bool]:
        self.done = True
        self.recorder.close()  # idempotent: the first caller at the summary closes it, the rest return
        return self._build(BUILD_TIMEOUT)

    def write_before_exit(self) -> str:
        """On SIGTERM, from the kill's thread once the stop is recorded and the sender flushed (the
        recorder is not closed: the interrupted main thread may hold its locks)."""
        self.done = True
        return self._build(KILLED_BUDGET)[0]

    def _build(self, timeout: float) -> tuple[str, bool]:
        command = [
            sys.executable,
            "-m",
            "mcpdebug",
            "report",
            self.recorder.run_id,
            "--dir",
            str(self.recorder.dir),
            "--html",
            str(self.path),
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"mcpdebug: warning: the HTML report was not written ({exc})", True
        if done.returncode != 0:
            why = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
            return f"mcpdebug: warning: the HTML report was not written: {why.splitlines()[-1]}", True
        return f"mcpdebug: HTML report: {self._display()}", False

    def _display(self) -> str:
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)
