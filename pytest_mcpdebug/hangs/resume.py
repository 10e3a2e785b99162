"""A run outlives a test that cannot be stopped: the rest of it goes on in a fresh process.

Without xdist, a hung test that ignores its interruptions (a cleanup that swallows every exception,
a C call that never returns) would end the whole run. Instead, once the grace period is over, the
watchdog records the test as failed, writes what the run has done so far to
``.mcpdebug/resume/<run id>.json`` (every logged report, serialized as xdist does, and the hangs),
and replaces the process with a new pytest started with the same command line (``os.execv``, so
the pid, the terminal and the parent's wait stay the same).

The new process (`Resumed`) takes the same run id and the next process name (the store and the
spool see one run, two processes), leaves out the tests already run, puts their reports back into
the terminal's statistics and pytest's failure count, and so prints the one summary, and exits
with the status, that a single process would have. xdist needs none of this: it replaces a worker
that ends.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import RESUME_ENV
from pytest_mcpdebug.hangs.leaks import Leak
from pytest_mcpdebug.plugin_object import register
from pytest_mcpdebug.recording.reporter import Reporter, final_outcome

if TYPE_CHECKING:
    from pytest_mcpdebug.hangs.target import Target

MAX_GENERATIONS: Final = 5
"""Replacements in one run; past this a stuck test ends the run as before (exit status 3)."""


class Finished:
    """Every report logged in this process (and those handed on to it): what a replacement needs.

    A passing phase is kept as a few fields, not as the report (whose captured output may be large):
    the replacement only counts it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reports: list[pytest.TestReport | tuple[str, Any, str, float]] = []

    def add(self, report: pytest.TestReport) -> None:
        """Each report of this process's tests (a listener of the reporter: no hook of its own)."""
        if report.passed and not hasattr(report, "wasxfail"):
            self.reports.append((report.nodeid, report.location, report.when or "call", report.duration))
        else:
            self.reports.append(report)

    def serialized(self) -> list[dict[str, Any]]:
        hook = self.config.hook
        out = []
        for kept in self.reports:
            report = kept if isinstance(kept, pytest.TestReport) else _passed(*kept)
            with contextlib.suppress(Exception):
                out.append(hook.pytest_report_to_serializable(config=self.config, report=report))
        return out


def _passed(nodeid: str, location: Any, when: str, duration: float) -> pytest.TestReport:
    phase: Literal["setup", "call", "teardown"] = "setup" if when == "setup" else "teardown"
    if when == "call":
        phase = "call"
    return pytest.TestReport(
        nodeid=nodeid, location=location, keywords={}, outcome="passed", longrepr=None, when=phase,
        duration=duration,
    )  # fmt: skip


def possible(config: pytest.Config, generation: int) -> bool:
    """Can this process be replaced by one running the same command? Only a pytest started from its
    command line (not ``pytest.main()`` inside another program), a few times per run."""
    if generation >= MAX_GENERATIONS or not hasattr(sys, "orig_argv") or not hasattr(os, "execv"):
        return False
    return sys.argv[1:] == [str(a) for a in config.invocation_params.args]


def resume_into(
    config: pytest.Config, state: dict[str, Any], session: pytest.Session, reporter: Reporter
) -> tuple[list[pytest.TestReport], list[Leak], list[tuple[str, str]]]:
    """Register the `Resumed` plugin of a replacement process; returns the reports, leaks and hangs
    handed on, for the timeouts plugin and the hang summary."""
    resumed = Resumed(config, state)
    register(config, resumed, "mcpdebug-resumed")
    resumed.start(session)
    reporter.started = float(state.get("started") or reporter.started)
    reporter.collected_before = len(resumed.done)
    leaks: list[Leak] = []
    for leak in state.get("leaks", []):
        with contextlib.suppress(TypeError):
            leaks.append(Leak(**leak))
    hangs = [(str(n), str(h)) for n, h in state.get("hangs", [])]
    return list(resumed.reports), leaks, hangs


def stuck_state(
    reporter: Reporter,
    target: Target,
    why: str,
    *,
    generation: int,
    finished: Finished,
    hangs: list[tuple[str, str]],
    leaks: list[dict[str, Any]],
) -> dict[str, Any]:
    """Record the stuck test as failed, and what the replacement process needs to go on."""
    duration = time.monotonic() - target.started
    when = (target.report.phase if target.report else "") or "call"
    outcome = final_outcome([*reporter.outcomes(target.nodeid), (when, "failed", False)])
    reporter.emit(
        protocol.PhaseFinished, nodeid=target.nodeid, worker=reporter.worker, when=when,
        outcome="failed", duration=duration, message=why, longrepr=why,
    )  # fmt: skip
    reporter.emit(
        protocol.TestFinished, nodeid=target.nodeid, worker=reporter.worker, outcome=outcome,
        duration=duration, message=why,
    )  # fmt: skip
    return {
        "run_id": reporter.run_id,
        "generation": generation,
        "started": reporter.started,
        "reports": finished.serialized(),
        "stuck": {
            "nodeid": target.nodeid,
            "location": reporter.location,
            "when": when,
            "message": why,
            "duration": duration,
        },
        "hangs": hangs,
        "leaks": leaks,
    }


_TIMERS: Final = tuple(
    getattr(signal, name)
    for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
    if hasattr(signal, name)
)
"""Interval timers (``signal.alarm`` is ITIMER_REAL's): their signals would kill a process that has not
installed handlers yet."""


def restart(
    config: pytest.Config,
    *,
    state: dict[str, Any],
    directory: Path,
    run_id: str,
    stdout: int | None,
    stderr: int | None,
) -> None:
    """Write the state and replace this process (called from the watchdog's thread; does not return
    unless the replacement could not start)."""
    folder = directory / "resume"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.json"
    env = {**os.environ, RESUME_ENV: str(path)}
    if "MCPDEBUG_RUN_ID" not in os.environ:
        env["MCPDEBUG_RUN_ID"] = run_id
        state["set_run_id"] = True
    path.write_text(json.dumps(state), encoding="utf-8")
    with contextlib.suppress(Exception):
        faulthandler.cancel_dump_traceback_later()
    for timer in _TIMERS:  # armed for the stuck test (pytest-timeout's signal method, an alarm), they
        with contextlib.suppress(Exception):  # outlive exec and would end the replacement at once
            signal.setitimer(timer, 0)
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    for saved, fd in ((stdout, 1), (stderr, 2)):  # the terminal, not the capture's files
        if saved is not None:
            with contextlib.suppress(OSError):
                os.dup2(saved, fd)
    with contextlib.suppress(OSError):
        os.chdir(config.invocation_params.dir)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def load() -> dict[str, Any] | None:
    """The state handed to this process by the one it replaces, if any (read once)."""
    path = os.environ.pop(RESUME_ENV, None)
    if not path:
        return None
    try:
        state: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if state.get("set_run_id"):
        os.environ.pop("MCPDEBUG_RUN_ID", None)  # the tests' own pytest runs get their own ids
    with contextlib.suppress(OSError):
        Path(path).unlink()
    return state


class Resumed:
    """In the replacement process: the tests already run are left out, and counted."""

    def __init__(self, config: pytest.Config, state: dict[str, Any]) -> None:
        self.config = config
        self.state = state
        self.done = {str(r.get("nodeid", "")) for r in state.get("reports", [])}
        self.done.add(state["stuck"]["nodeid"])
        self.reports = [*self._reports(), self._stuck()]
        self.failed = sum(1 for r in self.reports if r.failed and not hasattr(r, "wasxfail"))

    def _reports(self) -> list[pytest.TestReport]:
        out = []
        for data in self.state.get("reports", []):
            with contextlib.suppress(Exception):
                report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
                if isinstance(report, pytest.TestReport):
                    out.append(report)
        return out

    def _stuck(self) -> pytest.TestReport:
        stuck = self.state["stuck"]
        location = stuck.get("location") or [stuck["nodeid"].split("::")[0], None, stuck["nodeid"]]
        return pytest.TestReport(
            nodeid=stuck["nodeid"],
            location=(location[0], location[1], location[2]),
            keywords={},
            outcome="failed",
            longrepr=stuck["message"],
            when=stuck.get("when") or "call",
            duration=float(stuck.get("duration", 0.0)),
        )

    def start(self, session: pytest.Session) -> None:
        """At session start, before the terminal's header (the recorder's ``tryfirst`` hook)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        self.config.option.no_header = True  # the first process showed it; its summary is this one's
        terminal.write_line("")
        terminal.write_sep(
            "=",
            f"mcpdebug: {self.state['stuck']['nodeid']} could not be stopped; the run goes on in a "
            f"fresh process ({len(self.done)} tests done)",
            yellow=True,
        )
        lastfailed = self.config.pluginmanager.get_plugin("lfplugin")
        for report in self.reports:
            category = self.config.hook.pytest_report_teststatus(report=report, config=self.config)[0]
            terminal.stats.setdefault(category, []).append(report)
            if lastfailed is not None:
                with contextlib.suppress(Exception):
                    lastfailed.pytest_runtest_logreport(report)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The summary's duration is the run's, from the first process's start."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        start = getattr(terminal, "_session_start", None)
        began = self.state.get("started")
        if start is not None and isinstance(began, (int, float)):
            with contextlib.suppress(Exception):
                earlier = max(start.time - began, 0.0)
                object.__setattr__(start, "perf_count", start.perf_count - earlier)
                object.__setattr__(start, "time", start.time - earlier)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        maxfail = int(config.getoption("maxfail", 0) or 0)
        if maxfail and self.failed >= maxfail:
            items[:] = []  # -x: the run stops at the stuck test, as it would have
        else:
            items[:] = [item for item in items if item.nodeid not in self.done]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            session.testsfailed += self.failed  # after the loop: it refuses to start with failures
