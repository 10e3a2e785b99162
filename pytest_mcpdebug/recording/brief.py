"""What the recording knows beyond the traceback, per failure, at the end of pytest's own output.

An agent reads pytest's output first, and often nothing else: after pytest's short summary, each failed
or errored test gets at most three lines, at most `MAX_TESTS` tests (30 lines in all), also under
``-q``. The first names the test (a hung one with its diagnosis); the second is the best evidence the
run has of where it went wrong: the top suspects among the lines the test ran (a run recorded with
coverage), else how the failing line's values got their state (a traced test), else the locals of the
innermost frame of the project's code (pytest shows them only with ``-l``); the third is the command
(and MCP tool) that gives all of it. A run where nothing failed prints nothing.

The evidence is taken where the test ran (its process has the snapshot and the trace) and reaches the
process that prints the summary with xdist's worker output; the suspects are ranked there, from the
run's coverage file (`pytest_mcpdebug.diagnosis.ranking`, as the server's ``get_suspects``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_mcpdebug import protocol
from pytest_mcpdebug.plugin_object import PluginObject, register

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.recorder import Recorder

MAX_TESTS: Final = 10
"""Tests given a block (three lines each at most); the others are counted, with where to see them."""
WIDTH: Final = 200
"""Longest evidence line (a value cut short ends with ``...``)."""
KEY: Final = "mcpdebug_brief"
"""xdist's worker output: each failed test's evidence line."""
NAME: Final = "mcpdebug-brief"


class Brief(PluginObject):
    def __init__(
        self,
        config: pytest.Config,
        *,
        run_id: str,
        coverage: Path,
        hangs: Callable[[], list[tuple[str, str]]],
        inspect: Callable[[str], str],
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.coverage = coverage
        """The run's per-test coverage file (it exists when the run recorded coverage)."""
        self.hangs = hangs
        """The run's hangs so far: (node id, headline)."""
        self.inspect = inspect
        """The command that shows a test's failure, as pasted where pytest was started."""
        self.evidence: dict[str, str] = {}
        self._showlocals = bool(config.getoption("showlocals", False))

    # Evidence, where the test ran -----------------------------------------------------------------

    def from_snapshot(self, nodeid: str, snapshot: protocol.Snapshot) -> None:
        """The locals of the innermost frame of the project's code (unless pytest shows them: ``-l``)."""
        if self._showlocals or nodeid in self.evidence or len(self.evidence) >= 4 * MAX_TESTS:
            return
        frame = next((f for f in snapshot.frames if not f.library and f.locals), None)
        if frame is None:
            return
        shown = ", ".join(f"{v.name} = {_cut(v.value, 60)}" for v in frame.locals[:8])
        where = f"{frame.function}() at {_relative(frame.file, self.config)}:{frame.line}"
        self.evidence[nodeid] = _cut(f"locals of {where}: {shown}", WIDTH)

    def from_trace(self, nodeid: str, trace: protocol.Trace) -> None:
        """How the failing line's first operand got its value (a traced test): stronger than locals."""
        if len(self.evidence) >= 4 * MAX_TESTS and nodeid not in self.evidence:
            return
        with contextlib.suppress(Exception):  # a brief never breaks a run
            line = _value_line(trace, self.config)
            if line:
                self.evidence[nodeid] = _cut(line, WIDTH)

    # Hooks ------------------------------------------------------------------------------------------

    def pytest_sessionfinish(self) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is not None:  # an xdist worker: the controller prints
            output[KEY] = dict(self.evidence)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        found = (getattr(node, "workeroutput", None) or {}).get(KEY)
        if isinstance(found, dict):
            self.evidence.update({str(k): str(v) for k, v in found.items()})

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, Any, Any]:
        """After pytest's own summary (its short summary is the last thing before the counts)."""
        try:
            return (yield)
        finally:
            if getattr(self.config, "workeroutput", None) is None:
                with contextlib.suppress(Exception):  # a brief never breaks a run
                    self._write(terminalreporter)

    # The block --------------------------------------------------------------------------------------

    def shown(self, stats: dict[str, list[Any]]) -> set[str]:
        """The tests the block will name (a hung one with its headline: the hang summary leaves
        those to it)."""
        return {nodeid for nodeid, _ in _failed(stats)[:MAX_TESTS]}

    def _write(self, terminal: Any) -> None:
        failed = _failed(terminal.stats)
        if not failed:
            return
        lines = self.lines(failed, terminal.stats)
        terminal.write_sep("-", "mcpdebug: beyond the traceback")
        for line in lines:
            terminal.write_line(line)

    def lines(self, failed: list[tuple[str, str]], stats: dict[str, list[Any]]) -> list[str]:
        hangs = dict(self.hangs())
        suspects = self._suspects([nodeid for nodeid, _ in failed], stats)
        out: list[str] = []
        for nodeid, outcome in failed[:MAX_TESTS]:
            headline = hangs.get(nodeid)
            out.append(f"HANG {nodeid}: {headline}" if headline else f"{outcome.upper()} {nodeid}")
            evidence = suspects.get(nodeid) or self.evidence.get(nodeid)
            if evidence:
                out.append(f"  {evidence}")
            tools = ["get_hang" if headline else "get_failure"]
            if evidence and evidence.startswith(("suspects:", "value:")):
                tools.append("get_suspects" if evidence.startswith("suspects:") else "get_history")
            out.append(f"  more: `{self.inspect(nodeid)}` (MCP: {', '.join(tools)})")
        if len(failed) > MAX_TESTS:
            out.append(f"... and {len(failed) - MAX_TESTS} more failed tests: `{self.inspect('')}`")
        return out

    def _suspects(self, failing: list[str], stats: dict[str, list[Any]]) -> dict[str, str]:
        """Per failed test: the best-ranked lines of the run that it ran (coverage only)."""
        if not self.coverage.is_file():
            return {}
        from pytest_mcpdebug.coverage.data import load
        from pytest_mcpdebug.diagnosis import ranking
        from pytest_mcpdebug.diagnosis.functions import line_functions

        coverage = load([self.coverage])
        passing = {r.nodeid for r in stats.get("passed", []) if getattr(r, "when", "") == "call"}
        failed = set(failing) & coverage.tests
        ranked = ranking.rank(ranking.spectrum(coverage.lines, failed, passing), len(failed))
        functions: dict[str, dict[int, str]] = {}
        out: dict[str, str] = {}
        for nodeid in failing:
            mine = [s for s in ranked if nodeid in coverage.lines[s.key]][:3]
            if not mine:
                continue
            shown = []
            for s in mine:
                file, line = s.key
                if file not in functions:
                    functions[file] = _functions_of(file, line_functions)
                function = functions[file].get(line, "<module>")
                tie = f", tied with {s.tied}" if s.tied else ""
                shown.append(f"{_relative(file, self.config)}:{line} in {function} ({s.ochiai:.2f}{tie})")
            out[nodeid] = _cut("suspects: " + "; ".join(shown), WIDTH)
        return out


def _failed(stats: dict[str, list[Any]]) -> list[tuple[str, str]]:
    """Failed and errored tests, once each, in the order pytest reported them."""
    seen: dict[str, str] = {}
    for outcome in ("failed", "error"):
        for report in stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if nodeid and nodeid not in seen:
                seen[nodeid] = outcome
    return list(seen.items())


def _value_line(trace: protocol.Trace, config: pytest.Config) -> str:
    from pytest_mcpdebug.diagnosis.values import ValueHistory
    from pytest_mcpdebug.operands import names_at

    values = ValueHistory(trace)
    failure = values.failure()
    if failure is None:
        return ""
    links = values.explain(
        failure.frame, failure.line, names_at(failure.frame.file, failure.line), failure.index, names_at
    )
    link = next((link for link in links if link.change is not None), None)
    if link is None or link.change is None:
        return ""
    change = link.change
    where = f"{_relative(change.frame.file, config)}:{change.line} in {change.frame.function}"
    text = f"value: {change.name} = {_cut(change.new, 60)}, set at {where}"
    if link.origin is not None:
        origin = link.origin
        text += (
            f", returned by {origin.frame.function}() at {_relative(origin.frame.file, config)}:{origin.line}"
        )
    return text


def _functions_of(file: str, line_functions: Callable[[str], dict[int, str]]) -> dict[int, str]:
    try:
        return line_functions(Path(file).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}


def _relative(file: str, config: pytest.Config) -> str:
    root = str(config.rootpath)
    try:
        relative = os.path.relpath(file, root)
    except ValueError:
        return file
    return file if relative.startswith("..") else relative


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def start(recorder: Recorder) -> None:
    """Register the recorder's brief (every process: where tests run it collects, where the summary is
    printed it prints) and tell the reporter of it."""
    from pytest_mcpdebug.commands import program
    from pytest_mcpdebug.folder import coverage_file, dir_arg

    reporter = recorder.reporter
    assert reporter is not None
    started = Path(recorder.config.invocation_params.dir)

    def hangs() -> list[tuple[str, str]]:
        return recorder.hang_summary.hangs if recorder.hang_summary is not None else []

    reporter.brief = brief = Brief(
        recorder.config,
        run_id=recorder.run_id,
        coverage=coverage_file(recorder.dir, recorder.run_id),
        hangs=hangs,
        inspect=inspect_command(
            program("mcpdebug", started), recorder.run_id, dir_arg(recorder.dir, started)
        ),
    )
    register(recorder.config, brief, NAME)


def inspect_command(program: str, run_id: str, dir_arg: str) -> Callable[[str], str]:
    """``mcpdebug failure RUN TEST`` as pasted where pytest was started (no test: the run's summary)."""

    def command(nodeid: str) -> str:
        if not nodeid:
            return f"{program} show {run_id}{dir_arg}"
        return f"{program} failure {run_id} {shlex.quote(nodeid)}{dir_arg}"

    return command
