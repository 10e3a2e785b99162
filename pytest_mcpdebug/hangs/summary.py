"""The run's hangs in the terminal summary, and the diagnosis of an xdist worker that died hung.

Registered in the process that prints the summary (no xdist: the only one; xdist: the controller).
"""

from __future__ import annotations

import collections
import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.hangs import gil_dump
from pytest_mcpdebug.hangs.leaks import Leaks
from pytest_mcpdebug.plugin_object import PluginObject
from pytest_mcpdebug.recording.reporter import Reporter, final_outcome

RESENT = 8
"""Finished tests of a worker the controller repeats when that worker dies."""


class HangSummary(PluginObject):
    """In the process that prints the terminal summary (no xdist: the only one; xdist: the controller):
    lists the run's hangs, and diagnoses an xdist worker that died hung from its dump file."""

    def __init__(self, *, reporter: Reporter, directory: Path, leaks: Leaks | None = None) -> None:
        self.reporter = reporter
        self.leaks = leaks
        self.directory = directory
        self.hangs: list[tuple[str, str]] = []
        self._phases: dict[str, list[tuple[str, str, bool, float, str]]] = {}
        self._finished: dict[str, collections.deque[dict[str, Any]]] = {}
        if reporter.role != "controller":  # told by the reporter (cheaper than a hook of its own)
            reporter.report_listeners.append(self.add)

    def add(self, report: pytest.TestReport) -> None:
        """Each report: the reporter's listener in a process that runs tests, else the hook below."""
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
        if worker is not None:
            self._remember(str(worker), report)
        outcome: str = report.outcome  # "rerun": pytest-rerunfailures runs this attempt again
        if not report.failed and outcome != "rerun":
            return
        for message in _crash_messages(report.longrepr):
            for name in ("HangTimeout: ", "HangExit: "):
                if name in message:
                    summary = message.split(name, 1)[1].splitlines()[0]
                    attempt = int(getattr(report, "rerun", None) or 0) + 1
                    if outcome == "rerun" or attempt > 1:
                        summary = f"(attempt {attempt}) {summary}"
                    self.hangs.append((report.nodeid, summary))
                    return

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "")
        self._record_crash(crashitem, str(worker), str(report.longrepr))
        found = self._dump_of(str(worker))
        if found is None:
            return
        diagnosis = gil_dump.report(found)
        if diagnosis is None:
            return
        self.hangs.append((crashitem, diagnosis.summary))
        frames = next((t.frames for t in diagnosis.threads if t.test), [])
        shown = [f for i, f in enumerate(frames) if i == 0 or not f.library]  # the C call, the project's
        stacks = "\n".join(f"  {f.file}:{f.line} in {f.function}()" for f in shown[:12])
        report.longrepr = f"{report.longrepr}\nmcpdebug: {diagnosis.summary}" + (
            f"\nThe test's thread (innermost first):\n{stacks}" if stacks else ""
        )
        if diagnosis.kind != "stuck":  # a stuck worker sent its own report before it ended
            self.reporter.emit(
                protocol.HangDetected, nodeid=crashitem, worker=str(worker), when="call", report=diagnosis
            )

    def _remember(self, worker: str, report: pytest.TestReport) -> None:
        """The controller's copy of a worker's last finished tests: a worker that dies holding the GIL
        starves its own sender, so the events of the tests just before may never leave it."""
        when = report.when or "call"
        phases = self._phases.setdefault(report.nodeid, [])
        message = (
            "" if report.passed else str(getattr(getattr(report.longrepr, "reprcrash", None), "message", ""))
        )
        phases.append((when, report.outcome, hasattr(report, "wasxfail"), report.duration, message[:500]))
        if when != "teardown":
            return
        del self._phases[report.nodeid]
        self._finished.setdefault(worker, collections.deque(maxlen=RESENT)).append(
            {
                "nodeid": report.nodeid,
                "worker": worker,
                "outcome": final_outcome([p[:3] for p in phases]),
                "duration": sum(p[3] for p in phases),
                "message": next((p[4] for p in phases if p[4]), ""),
                "passed_phases": [
                    protocol.PassedPhase(p[0], p[3], time.time())
                    for p in phases
                    if p[1] == "passed" and not p[2]
                ],
            }
        )

    def _record_crash(self, nodeid: str, worker: str, message: str) -> None:
        """The dead worker cannot say its test ended: the controller does, as pytest counts it, and
        repeats the worker's last finished tests (storing them again changes nothing)."""
        for finished in self._finished.pop(worker, ()):
            self.reporter.emit(protocol.TestFinished, **finished)
        line = message.splitlines()[0] if message else "worker crashed"
        self.reporter.emit(
            protocol.PhaseFinished,
            nodeid=nodeid,
            worker=worker,
            when="call",
            outcome="failed",
            duration=0.0,
            message=line,
            longrepr=message,
        )
        self.reporter.emit(
            protocol.TestFinished, nodeid=nodeid, worker=worker, outcome="failed", duration=0.0, message=line
        )

    def _dump_of(self, worker: str) -> Path | None:
        folder = self.directory / "hangs"
        try:
            candidates = [
                p for p in folder.glob(f"{self.reporter.run_id}.{worker}-*.txt") if gil_dump.has_dump(p)
            ]
        except OSError:
            return None
        return max(candidates, key=lambda p: p.stat().st_mtime, default=None)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from pytest_mcpdebug.recording import brief as brief_block

        brief = terminalreporter.config.pluginmanager.get_plugin(brief_block.NAME)
        briefed = brief.shown(terminalreporter.stats) if brief is not None else set()
        hangs = [(nodeid, summary) for nodeid, summary in self.hangs if nodeid not in briefed]
        leaks = self.leaks.found if self.leaks is not None else ()
        if not hangs and not leaks:
            return  # every hang is in the block after pytest's short summary ("beyond the traceback")
        terminalreporter.section("mcpdebug: hangs", sep="-", yellow=True, bold=True)
        for nodeid, summary in hangs:
            terminalreporter.write_line(f"HANG {nodeid}: {summary}")
        for leak in leaks:
            terminalreporter.write_line(f"LEFT RUNNING by {leak.nodeid}: {leak.describe()}")
        if not hangs:
            return
        from pytest_mcpdebug.commands import program
        from pytest_mcpdebug.folder import dir_arg

        base = Path(terminalreporter.config.invocation_params.dir)
        where = dir_arg(self.directory, base)
        rid = self.reporter.run_id
        # one hang: the command works as pasted; several: the reader puts in the test
        test = shlex.quote(hangs[0][0]) if len(hangs) == 1 else "<test>"
        tool = json.dumps(hangs[0][0]) if len(hangs) == 1 else "..."  # a node id may hold quotes
        terminalreporter.write_line(
            f"Inspect: `{program('mcpdebug', base)} failure {rid} {test}{where}`, or the MCP tool "
            f'get_hang(run_id="{rid}", test={tool}) for every thread\'s stack and the locals.'
        )


class ControllerHangSummary(HangSummary):
    """xdist's controller runs no test: its reports (its workers') reach it through the hook."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.add(report)


def _crash_messages(longrepr: Any) -> list[str]:
    """The failure's exception messages, the last raised first, then those it was raised from or
    during: a task cancelled with the hang's message fails the test with a bare ``CancelledError``
    on Python 3.10, raised while handling the one that carries it."""
    crashes = [getattr(longrepr, "reprcrash", None)]
    crashes += [link[1] for link in reversed(getattr(longrepr, "chain", None) or ())]
    return [str(getattr(crash, "message", "") or "") for crash in crashes if crash is not None]
