"""The dynamic localizer (`localize`, `mcpdebug localize`): what to try, how to run it, what it found.

It re-runs a run's failing tests (and a few passing neighbours: tests that run the line) with small
changes of the top suspect lines, in a test process of its own (`pytest_mcpdebug.localize.runner`),
within the budget the caller gives. What it found is stored with the run as a `Localization` event
through `Store.apply`; the suspects' ranking (`views.suspects`) weighs it from then on, and
`get_failure` names it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

from mcpdebug.replies.localize import LocalizedRow, LocalizeReply
from mcpdebug.store import Store
from mcpdebug.views import lookup
from mcpdebug.views import suspects as suspects_view
from mcpdebug.views.calls import call
from mcpdebug.views.suspects import FAILING, PASSING, NoCoverage, rank_run, relative, run_coverage
from pytest_mcpdebug import protocol

# Limits
NEIGHBOURS: Final = 6
"""Passing tests run for a line whose change turned failing tests green (what else it breaks)."""
MAX_FAILING: Final = 20
RESERVE: Final = (0.1, 3.0)
"""The localizer's process stops trying changes this share of the budget (at most this many seconds)
before the budget ends: its exit, the result stored and the ranking of the reply fit in the budget."""
GRACE: Final = 2.0
"""Seconds past the budget before a process still running is stopped (what it learnt is in its result
file, rewritten after each line)."""
KEPT_OPTIONS: Final = ("-p", "-o", "-c", "--rootdir", "--import-mode", "--confcutdir", "-W", "--override-ini")
"""The recorded run's options the localizer's run keeps (its paths are replaced by the failing tests)."""
QUIET_ENV: Final = {
    "MCPDEBUG": "0",
    "MCPDEBUG_COVERAGE": "0",
    "MCPDEBUG_TRACE": "0",
    "MCPDEBUG_BREAK": "0",
    "MCPDEBUG_TIMEOUT": "0",
}
"""The localizer's runs are not recorded (a project may record every run)."""


class Planned:
    def __init__(
        self, run: dict[str, Any], plan: dict[str, Any], path: Path, out: Path, started: float
    ) -> None:
        self.run = run
        self.plan = plan
        self.path = path
        self.out = out
        self.started = started
        """``time.monotonic()`` when the call began: the budget counts from there."""

    @property
    def cwd(self) -> str:
        return str(self.run["rootdir"] or self.run["cwd"] or ".")

    def command(self) -> list[str]:
        tests = sorted({*self.plan["failing"], *(n for e in self.plan["lines"] for n in e["passing"])})
        # one argument: pytest reads a plugin option's separate value as a path when it chooses the
        # rootdir, and a plan outside the project (--mcp-debug-dir elsewhere) moved it and every node id
        runner = ["-p", "pytest_mcpdebug.localize.runner", f"--mcp-debug-localize={self.path}"]
        kept = kept_options(list(self.run["args"] or []))
        if self.run["rootdir"] and not any(a == "--rootdir" or a.startswith("--rootdir=") for a in kept):
            kept.append(f"--rootdir={self.run['rootdir']}")  # the node ids are the recorded run's
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *runner, *kept, *tests]

    def environment(self) -> dict[str, str]:
        return {**os.environ, **QUIET_ENV, "PYTHONUNBUFFERED": "1"}

    @property
    def deadline(self) -> float:
        """``time.monotonic()`` past which the localizer's process is stopped."""
        return self.started + float(self.plan["budget"]) + GRACE


def kept_options(args: list[str]) -> list[str]:
    """The options of `KEPT_OPTIONS` in ``args``, with their values (``-p x``, ``-px``, ``--rootdir=x``)."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in KEPT_OPTIONS and i + 1 < len(args):
            kept += [arg, args[i + 1]]
            i += 2
            continue
        if arg.startswith(tuple(f"{o}=" for o in KEPT_OPTIONS if o.startswith("--"))) or (
            len(arg) > 2 and arg[:2] in ("-p", "-o", "-c", "-W") and not arg.startswith("--")
        ):
            kept.append(arg)
        i += 1
    return kept


def plan(
    store: Store, run: dict[str, Any], budget: float, lines: int, started: float | None = None
) -> Planned:
    """What to try: the top ``lines`` suspects in rank order, each with its passing neighbours.

    ``started`` (``time.monotonic()``, default now) is when the call began: the whole call, this
    ranking, the process's start-up and the reply included, fits in ``budget``."""
    started = time.monotonic() if started is None else started
    rid = run["run_id"]
    tests = store.tests(rid)
    failing = {t["nodeid"] for t in tests if t["status"] in FAILING}
    passing = {t["nodeid"] for t in tests if t["status"] in PASSING}
    if not failing:
        raise lookup.NotFound(f"Run {rid} has no failing test: there is nothing to localize.")
    try:
        coverage = run_coverage(store, run)
    except NoCoverage as exc:
        raise lookup.NotFound(str(exc)) from None
    if coverage is None:
        raise lookup.NotFound(
            f"Run {rid} was recorded without per-test coverage: the localizer changes the top suspect lines, "
            f"which come from it. Record the run with --mcp-debug-coverage "
            f"({call('run_tests', args=['--mcp-debug-coverage'])}), then localize it."
        )
    ranked = rank_run(store, run, coverage, failing, passing)
    entries = []
    for suspect in ranked[:lines]:
        ran = sorted(coverage.lines.get(suspect.key, frozenset()) & passing)
        entries.append({"file": suspect.key[0], "line": suspect.key[1], "passing": ran[:NEIGHBOURS]})
    folder = store.dir / "localize"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"{rid}-{time.time_ns()}"
    out = folder / f"{stamp}.result.json"
    document = {
        "run_id": rid,
        "failing": sorted(failing & coverage.tests)[:MAX_FAILING],
        "lines": entries,
        "budget": budget,
        "until": time.time() + (started - time.monotonic()) + budget - reserve(budget),
        "out": str(out),
    }
    path = folder / f"{stamp}.plan.json"
    path.write_text(json.dumps(document))
    return Planned(run, document, path, out, started)


def reserve(budget: float) -> float:
    """Seconds of the budget kept for what follows the last change (`RESERVE`)."""
    share, most = RESERVE
    return min(budget * share, most)


def store_result(store: Store, planned: Planned, elapsed: float, terminal: str) -> protocol.Localization:
    """Read what the localizer's process wrote, and store it with the run (through `Store.apply`)."""
    try:
        found = json.loads(planned.out.read_text())
    except (OSError, ValueError):
        found = {
            "note": "the localizer's process wrote no result: " + (terminal.strip()[-600:] or "no output")
        }
    lines = []
    for entry in found.get("lines", []):
        best = entry.get("best") or {}
        lines.append(
            protocol.LocalizedLine(
                file=entry["file"],
                line=entry["line"],
                tried=entry.get("tried", 0),
                mutant=best.get("mutant", ""),
                fixed=best.get("fixed", 0),
                failing=best.get("failing", 0),
                broke=best.get("broke", 0),
                passing=best.get("passing", 0),
                note=entry.get("note", ""),
            )
        )
    run = planned.run
    event = protocol.Localization(
        run_id=run["run_id"],
        process=f"localize-{time.time_ns()}",
        seq=0,
        ts=run.get("last_event") or run.get("started") or time.time(),  # the run's span stays as it was
        budget=float(planned.plan["budget"]),
        elapsed=round(elapsed, 2),
        failing=list(found.get("failing", planned.plan["failing"])),
        still_failing=list(found.get("still_failing", [])),
        lines=lines,
        complete=bool(found.get("complete", False)),
        note=str(found.get("note", "")),
    )
    store.apply([event])
    for path in (planned.path, planned.out):
        path.unlink(missing_ok=True)
    return event


def reply(store: Store, run: dict[str, Any], result: protocol.Localization, top: int = 10) -> LocalizeReply:
    from mcpdebug.views.suspects import suspects

    root = run["rootdir"] or ""
    rid = run["run_id"]
    rows = [
        LocalizedRow(
            file=relative(r.file, root),
            line=r.line,
            change=r.mutant,
            fixed=r.fixed,
            failing=r.failing,
            broke=r.broke,
            passing=r.passing,
            tried=r.tried,
            note=r.note,
        )
        for r in result.lines
    ]
    ranked = suspects(store, run, top)
    critical = [r for r in rows if r.fixed]
    lines = [
        f"Localized run {rid} in {result.elapsed:.1f} s (budget {result.budget:g} s): {len(rows)} suspect "
        f"line(s) changed against {len(result.still_failing)} failing test(s)"
        + ("" if result.complete else " (stopped before every planned line)")
        + "."
    ]
    if result.note:
        lines.append(f"Note: {result.note}")
    if critical:
        lines.append("Lines whose change turned failing tests green (where a fix can be made):")
        for r in sorted(critical, key=lambda r: (-r.fixed, r.broke)):
            broke = f", broke {r.broke}/{r.passing} passing neighbour(s)" if r.passing else ""
            lines.append(f"  {r.file}:{r.line} ({r.change}): {r.fixed}/{r.failing} failing pass{broke}")
    else:
        lines.append("No change of the lines tried turned a failing test green.")
    lines += ["", ranked.text]
    return LocalizeReply(
        text="\n".join(lines),
        run_id=rid,
        budget=result.budget,
        elapsed=result.elapsed,
        complete=result.complete,
        lines=rows,
        next_call=call("get_suspects", run_id=rid),
    )


def suspects_and_note(store: Store, run: dict[str, Any]) -> str:
    """What `get_failure` (and ``mcpdebug failure``) add after the failure: the suspects and the
    localizer's result or how to ask for it; "" when the run has no coverage or no failure."""
    suspects = suspects_view.failure_suspects(store, run)
    return f"\n\n{suspects}\n{failure_note(store, run)}" if suspects else ""


def failure_note(store: Store, run: dict[str, Any]) -> str:
    """A line for `get_failure`: the localizer's result once it exists, or how to ask for it."""
    result = store.localization(run["run_id"])
    root = run["rootdir"] or ""
    if result is None:
        return (
            f"Not localized yet: {call('localize', run_id=run['run_id'], budget=30)} re-runs the failing "
            "tests with small changes of the top suspects (the suspects above then weigh what it finds)."
        )
    critical = sorted((r for r in result.lines if r.fixed), key=lambda r: (-r.fixed, r.broke))
    said = f"Localized ({result.elapsed:.1f} s, {len(result.lines)} lines changed): "
    if not critical:
        return said + "no change of the top suspects turned a failing test green."
    best = critical[0]
    return (
        said + f"changing {relative(best.file, root)}:{best.line} ({best.mutant}) made "
        f"{best.fixed}/{best.failing} failing tests pass"
        + (f" and {best.broke}/{best.passing} passing neighbours fail" if best.passing else "")
        + (f"; {len(critical) - 1} other line(s) too" if len(critical) > 1 else "")
        + "."
    )
