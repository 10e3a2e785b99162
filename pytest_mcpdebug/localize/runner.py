"""The dynamic localizer's test process: re-runs a run's failing tests (and a few passing neighbours)
with small changes of its top suspect lines, within a time budget, and writes what each change did.

Loaded by the localizer's command only (``-p pytest_mcpdebug.localize.runner --mcp-debug-localize
PLAN``), in a pytest run of exactly those tests that is not recorded. The plan (JSON, written by
the server) names the lines in rank order, the failing tests, each line's passing neighbours
(tests that run it), the budget and the result file. Collection is pytest's own; the loop is
this module's: each test is run with `runtestprotocol` (set-up, call, teardown, fixtures as
usual, nothing reported), once to see it still fails, then once per change of a line
(`mutations`, applied in memory by `patching`); when a change turns failing tests green, the
line's neighbours are run too, to see what it breaks. The result file is rewritten after each
line, so a run stopped at its budget still says what it learnt.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_mcpdebug.localize.mutations import changes
from pytest_mcpdebug.localize.patching import CannotPatch, patch

PLAN_OPTION: Final = "--mcp-debug-localize"
TEST_LIMIT: Final = 10.0
"""Seconds one changed test may run (a change can loop forever): then it counts as failing."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(PLAN_OPTION, metavar="PLAN", dest="mcpdebug_localize", help="(internal) localizer plan")


def pytest_configure(config: pytest.Config) -> None:
    plan = config.getoption("mcpdebug_localize")
    if plan:
        config.pluginmanager.register(Localizer(json.loads(Path(plan).read_text())), "mcpdebug-localizer")


class _TooLong(Exception):
    pass


class Localizer:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.started = time.monotonic()
        budget = float(plan.get("budget", 30.0))
        if "until" in plan:  # the budget counts from the plan, start-up and collection included
            budget = min(budget, float(plan["until"]) - time.time())
        self.deadline = self.started + max(budget, 0.0)
        self.out = Path(plan["out"])
        self.result: dict[str, Any] = {
            "failing": [],
            "still_failing": [],
            "lines": [],
            "complete": False,
            "note": "",
            "elapsed": 0.0,
        }

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        try:
            self._loop(session)
        finally:
            self.result["elapsed"] = round(time.monotonic() - self.started, 3)
            self._write()
        return True

    def _loop(self, session: pytest.Session) -> None:
        items = {item.nodeid: item for item in session.items}
        failing = [items[n] for n in self.plan["failing"] if n in items]
        self.result["failing"] = [i.nodeid for i in failing]
        if not failing:
            self.result["note"] = (
                "none of the failing tests was collected (renamed, deselected, or the run's args differ)"
            )
            return
        still = [item for item in failing if not self._passes(item)]
        self.result["still_failing"] = [i.nodeid for i in still]
        if not still:
            self.result["note"] = "the failing tests pass now (flaky, or the code changed since the run)"
            return
        sources: dict[str, str] = {}
        for entry in self.plan["lines"]:
            if time.monotonic() >= self.deadline:
                self.result["note"] = "the budget ran out before every line was tried"
                return
            file = entry["file"]
            if file not in sources:
                try:
                    sources[file] = Path(file).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    self._line(entry, 0, None, f"unreadable: {exc}")
                    continue
            neighbours = [items[n] for n in entry.get("passing", []) if n in items]
            self._try_line(entry, sources[file], still, neighbours)
            self._write()
        self.result["complete"] = True

    def _try_line(
        self, entry: dict[str, Any], source: str, failing: list[pytest.Item], neighbours: list[pytest.Item]
    ) -> None:
        file, line = entry["file"], int(entry["line"])
        lines = source.splitlines()
        if not 1 <= line <= len(lines):
            self._line(entry, 0, None, "no such line now")
            return
        best: dict[str, Any] | None = None
        tried = 0
        note = ""
        for change in changes(lines[line - 1]):
            if time.monotonic() >= self.deadline:
                note = "budget ran out"
                break
            try:
                undo = patch(file, source, line, change.text)
            except CannotPatch as exc:
                if "does not compile" in str(exc):
                    continue
                note = str(exc)
                break
            try:
                fixed = sum(self._passes(item) for item in failing)
                broke = sum(not self._passes(item) for item in neighbours) if fixed else 0
            finally:
                undo()
            tried += 1
            verdict = {
                "mutant": change.description,
                "fixed": fixed,
                "failing": len(failing),
                "broke": broke,
                "passing": len(neighbours),
            }
            if best is None or _better(verdict, best):
                best = verdict
            if fixed == len(failing) and not broke:
                break  # nothing can do better
        self._line(entry, tried, best, note)

    def _line(self, entry: dict[str, Any], tried: int, best: dict[str, Any] | None, note: str) -> None:
        self.result["lines"].append(
            {"file": entry["file"], "line": int(entry["line"]), "tried": tried, "best": best, "note": note}
        )

    def _passes(self, item: pytest.Item) -> bool:
        from _pytest.runner import runtestprotocol

        limit = max(0.1, min(TEST_LIMIT, self.deadline - time.monotonic() + 1.0))
        previous = signal.signal(signal.SIGALRM, _alarm) if hasattr(signal, "SIGALRM") else None
        if previous is not None:
            signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            reports = runtestprotocol(item, log=False, nextitem=None)
        finally:
            if previous is not None:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        return all(r.passed or (r.skipped and r.when != "call") for r in reports) and any(
            r.when == "call" and r.passed for r in reports
        )

    def _write(self) -> None:
        temporary = self.out.with_name(self.out.name + ".tmp")
        temporary.write_text(json.dumps(self.result))
        os.replace(temporary, self.out)


def _better(verdict: dict[str, Any], best: dict[str, Any]) -> bool:
    def merit(v: dict[str, Any]) -> float:
        return float(v["fixed"] / max(v["failing"], 1) - 0.5 * v["broke"] / max(v["passing"], 1))

    return merit(verdict) > merit(best)


def _alarm(signum: int, frame: Any) -> None:
    raise _TooLong(f"a changed test ran over {TEST_LIMIT:g} s")
