"""`get_suspects` and the suspects `get_failure` lists: a run's lines ranked by coverage (how much more
the failing tests ran them than the passing ones) and the other evidence the store holds: the failing
stacks, statement kinds, traced values and the dynamic localizer's verdicts
(`pytest_mcpdebug.diagnosis.localization`); functions by coverage alone (`diagnosis.ranking`)."""

from __future__ import annotations

import linecache
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpdebug.replies.diagnosis import SuspectLine, Suspects
from mcpdebug.views import calls
from mcpdebug.views.calls import call
from mcpdebug.views.runs import bound
from pytest_mcpdebug.coverage.data import RunCoverage, find_files, load
from pytest_mcpdebug.diagnosis import localization, ranking
from pytest_mcpdebug.diagnosis.functions import MODULE, line_functions
from pytest_mcpdebug.diagnosis.localization import Evidence, StackFrame
from pytest_mcpdebug.diagnosis.values import failing_value_lines
from pytest_mcpdebug.operands import names_at

if TYPE_CHECKING:
    from mcpdebug.store import Store

LEVELS = ("statement", "function")
MAX_TRACED = 5
"""Failing tests whose traces are read for value evidence."""
FAILING = ("failed", "error")
PASSING = ("passed",)


class NoCoverage(Exception):
    """The run has no per-test coverage to rank: the message says why."""


def run_coverage(store: Store, run: dict[str, Any]) -> RunCoverage | None:
    """The run's per-test coverage, or None when it was not recorded with --mcp-debug-coverage."""
    paths, missing = find_files(store.dir, run["run_id"], store.coverage_files(run["run_id"]))
    if not paths:
        if missing:
            raise NoCoverage(
                f"Run {run['run_id']} was recorded with coverage, but its data is not where it was "
                f"recorded ({', '.join(missing[:3])}): copy it into {store.dir / 'coverage'}, or record "
                "the run again with coverage."
            )
        return None
    coverage = load(paths)
    coverage.missing = missing
    return coverage


def suspects(store: Store, run: dict[str, Any], top: int = 10, level: str = "statement") -> Suspects:
    """The ranking; a run without per-test coverage gets a reply that says how to record it (an
    answer the agent acts on, not an error)."""
    rid = run["run_id"]
    tests = store.tests(rid)
    failing = {t["nodeid"] for t in tests if t["status"] in FAILING}
    passing = {t["nodeid"] for t in tests if t["status"] in PASSING}
    try:
        coverage = run_coverage(store, run)
    except NoCoverage as exc:
        return _without_coverage(run, failing, passing, level, str(exc))
    if coverage is None:
        return _without_coverage(run, failing, passing, level, None)
    root = run["rootdir"] or ""
    ranked: list[Any]
    if level == "function":
        ranked, places = _rank(coverage, failing, passing)
        rows = [_row(s, root, places, len(failing & coverage.tests)) for s in ranked[:top]]
    else:
        ranked = rank_run(store, run, coverage, failing, passing)
        rows = [_line_row(s, root, len(failing & coverage.tests)) for s in ranked[:top]]
    reply = Suspects(
        text="",
        run_id=rid,
        level=level,
        failing_tests=len(failing),
        passing_tests=len(passing),
        suspects=rows,
        next_call=_next_call(rid, sorted(failing)),
    )
    reply.text = _text(reply, ranked, coverage, failing, top)
    return reply


def _without_coverage(
    run: dict[str, Any], failing: set[str], passing: set[str], level: str, why: str | None
) -> Suspects:
    """No suspects: what to run to get them (this run's tests again, with coverage)."""
    rid = run["run_id"]
    args = recorded_with_coverage(run)
    again = call("run_tests", args=args, cwd=_cwd(run))
    shell = calls.pytest_command(args, run["cwd"])
    if not failing:
        text = (
            f"No suspects in run {rid}: no test failed, and suspects are the lines failing tests ran "
            "that passing tests did not."
        )
        next_call = None
    else:
        text = why or f"Run {rid} was recorded without per-test coverage, so there are no suspects to rank."
        how = shell if calls.in_terminal() else f"{again}, or {shell} in a shell"
        text += (
            f"\nTo get them, run its tests again with coverage: {how}; then "
            f"{call('get_suspects', run_id='latest')}."
            + "\nTo record coverage on every run (it costs what coverage.py's per-test contexts cost), set "
            "`mcpdebug_coverage = true` in the project's pytest configuration (`mcpdebug init --coverage` "
            "writes it)."
        )
        next_call = again
    return Suspects(
        text=text,
        run_id=rid,
        level=level,
        failing_tests=len(failing),
        passing_tests=len(passing),
        suspects=[],
        next_call=next_call,
    )


def recorded_with_coverage(run: dict[str, Any]) -> list[str]:
    """The run's pytest arguments with `--mcp-debug-coverage` (which implies `--mcp-debug`)."""
    kept = [a for a in run["args"] or [] if a not in ("--mcp-debug", "--mcp-debug-coverage")]
    return ["--mcp-debug-coverage", *kept]


def _cwd(run: dict[str, Any]) -> str | None:
    """The run's folder, when it is not its rootdir (where run_tests starts by default)."""
    return run["cwd"] if run["cwd"] and run["cwd"] != run["rootdir"] else None


def rank_run(
    store: Store, run: dict[str, Any], coverage: RunCoverage, failing: set[str], passing: set[str]
) -> list[localization.Suspect]:
    """The run's lines ranked with every piece of evidence the store holds for it."""
    return localization.rank_lines(coverage.lines, failing, passing, evidence(store, run))


def evidence(store: Store, run: dict[str, Any]) -> Evidence:
    stacks: dict[str, list[StackFrame]] = {}
    values: dict[tuple[str, int], str] = {}
    for failure in store.failures(run["run_id"]):
        frames = [StackFrame(f.file, f.line, f.function) for f in failure["snapshot"].frames if not f.library]
        stacks.setdefault(failure["nodeid"], frames)
    for nodeid in list(stacks)[:MAX_TRACED]:  # what trace_test recorded of a failing test, if it ran
        traced = store.trace(None, nodeid)
        if traced is not None and traced["outcome"] in FAILING:
            for key, how in failing_value_lines(traced["trace"], names_at).items():
                values.setdefault(key, how)
    return Evidence(stacks=stacks, source=_source, values=values, dynamic=localized(store, run))


def localized(store: Store, run: dict[str, Any]) -> dict[tuple[str, int], localization.Verdict]:
    """The dynamic localizer's verdicts for the run, when it was asked for them (`localize`)."""
    result = store.localization(run["run_id"])
    if result is None:
        return {}
    return {
        (r.file, r.line): localization.Verdict(r.mutant, r.fixed, r.failing, r.broke, r.passing, r.tried)
        for r in result.lines
        if r.tried
    }


def _source(file: str) -> str:
    linecache.checkcache(file)
    return "".join(linecache.getlines(file))


def _rank(
    coverage: RunCoverage, failing: set[str], passing: set[str]
) -> tuple[list[ranking.Suspect[Any]], dict[Any, int]]:
    """Functions ranked by Ochiai, and each function's def line."""
    measured_failing = failing & coverage.tests
    owner: dict[tuple[str, int], tuple[str, str]] = {}
    for file, line in coverage.lines:
        owner[(file, line)] = (file, _functions(file).get(line, MODULE))
    covers = ranking.group(coverage.lines, owner)
    starts: dict[Any, int] = {}
    for (_, line), key in owner.items():
        starts[key] = min(starts.get(key, line), line)
    for key in starts:  # the def line, where the file still parses
        starts[key] = _starts(key[0]).get(key[1], starts[key])
    order = sorted(covers, key=lambda k: (k[0], starts[k]))
    by_function = ranking.spectrum(covers, failing, passing)
    return ranking.rank(by_function, len(measured_failing), order), starts


def _row(s: ranking.Suspect[Any], root: str, starts: dict[Any, int], failed: int) -> SuspectLine:
    file, function = s.key
    line = starts[s.key]
    return SuspectLine(
        position=s.position,
        rank=str(s.first) if s.first == s.last else f"{s.first}-{s.last}",
        file=relative(file, root),
        line=line,
        function=function,
        source=linecache.getline(file, line).strip(),
        ochiai=round(s.ochiai, 4),
        dstar=None if math.isinf(s.dstar) else round(s.dstar, 4),
        failed=s.failed,
        passed=s.passed,
        tied=s.tied,
        score=round(s.ochiai, 4),
        why=f"ran in {s.failed}/{failed} failing, {s.passed} passing tests (Ochiai {s.ochiai:.2f})",
    )


def _line_row(s: localization.Suspect, root: str, failed: int) -> SuspectLine:
    file, line = s.key
    dstar = ranking.dstar(s.failed, s.passed, failed)
    return SuspectLine(
        position=s.position,
        rank=str(s.first) if s.first == s.last else f"{s.first}-{s.last}",
        file=relative(file, root),
        line=line,
        function=s.function,
        source=linecache.getline(file, line).strip(),
        ochiai=round(s.ochiai, 4),
        dstar=None if math.isinf(dstar) else round(dstar, 4),
        failed=s.failed,
        passed=s.passed,
        tied=s.tied,
        score=round(s.score, 4),
        why=s.why,
    )


def _text(reply: Suspects, ranked: list[Any], coverage: RunCoverage, failing: set[str], top: int) -> str:
    rid, level = reply.run_id, reply.level
    what = "lines" if level == "statement" else "functions"
    unmeasured = sorted(failing - coverage.tests)
    how = (
        "Ochiai (coverage) plus the failing stack, statement kinds and any localizer verdict, each row "
        "saying why"
        if level == "statement"
        else "Ochiai (DStar orders ties)"
    )
    lines = [
        f"Suspects in run {rid}: {what} ranked by {how}, over {reply.failing_tests} failing and "
        f"{reply.passing_tests} passing tests; {len(ranked)} {what} ran in a failing test."
    ]
    if unmeasured:
        lines.append(
            f"{len(unmeasured)} failing test(s) have no coverage (failed before measuring, or in another "
            f"process): {', '.join(unmeasured[:3])}"
        )
    if coverage.missing:
        lines.append(f"Coverage files not found (other machines?): {', '.join(coverage.missing[:3])}")
    if not reply.failing_tests:
        lines.append("No test failed in this run: there is nothing to rank.")
        return "\n".join(lines)
    if not reply.suspects:
        lines.append("No failing test ran measured code (the project's own code, not its tests).")
        return "\n".join(lines)
    lines.append(f"{'#':>5}  {'score':>6}  {'Ochiai':>6}  fail/pass  where")
    for row in reply.suspects:
        where = f"{row.file}:{row.line} in {row.function}"
        lines.append(
            f"{row.rank:>5}  {row.score:6.3f}  {row.ochiai:6.3f}  {row.failed:>4}/{row.passed:<4}  {where}"
        )
        if row.source:
            lines.append(f"{'':>7}{row.source[:150]}")
        if level == "statement" and row.why:
            lines.append(f"{'':>7}why: {row.why[:300]}")
    lines += _ties(reply.suspects, ranked, top, rid, level)
    if reply.next_call:
        lines.append(f"Next: {reply.next_call}")
    return bound("\n".join(lines))


def _ties(rows: list[SuspectLine], ranked: list[Any], top: int, rid: str, level: str) -> list[str]:
    notes: list[str] = []
    for row in rows:
        if row.tied and row.rank.startswith(f"{row.position}-"):
            if level == "function":
                notes.append(
                    f"Ties: #{row.rank} share a score: each ran in {row.failed} failing and {row.passed} "
                    "passing tests; ordered by DStar, then by place."
                )
            else:
                notes.append(
                    f"Ties: #{row.rank} share a score: no evidence tells them apart (by file, line)."
                )
    if rows and rows[-1].tied and len(ranked) > top:
        last = ranked[len(rows) - 1]
        beyond = last.last - len(rows)
        if beyond > 0:
            more = call(
                "get_suspects", run_id=rid, top=last.last, level=None if level == "statement" else level
            )
            notes.append(f"{beyond} more tie with #{len(rows)}: {more}.")
    return notes[:6]


def _next_call(rid: str, failing: list[str]) -> str | None:
    if not failing:
        return None
    return (
        f'trace_test(test="{failing[0]}", run_id="{rid}") re-runs that failing test recording how its values '
        "changed; then get_history(test=...) shows where each value came from."
    )


def failure_suspects(
    store: Store, run: dict[str, Any], top: int = 5, listed: int = 10, most: int = 15
) -> str:
    """The suspects for `get_failure`'s text, or "" when the run has no coverage or no failure: the
    first ``top`` with why; then the places up to ``listed`` (and the rest of a tie across it, up to
    place ``most``) one line each, the lines of one function that tie on one line: a single line's
    fault sits between places 6 and 15 often enough to be worth a line, not a paragraph."""
    if not store.coverage_files(run["run_id"]):  # (before reading every test of a 100,000-test run)
        return ""
    reply = suspects(store, run, max(top, most))
    if not reply.suspects:
        return ""
    lines = [
        f"Suspects (--mcp-debug-coverage: {reply.failing_tests} failing / {reply.passing_tests} passing "
        "tests, the failing stack, statement kinds):"
    ]
    for row in reply.suspects[:top]:
        lines.append(f"  {row.rank:>4}. {row.file}:{row.line} in {row.function}: {row.source[:100]}")
        lines.append(f"        why: {row.why[:200]}")
    following = [r for r in reply.suspects[top:] if r.position <= listed or _first(r.rank) <= listed]
    if following:
        lines.append("  then (why: get_suspects):")
        lines += _grouped(following)
    shown = (following or reply.suspects[:top])[-1]
    end = int(shown.rank.split("-")[-1])
    rid = reply.run_id
    if end > shown.position:
        more = call("get_suspects", run_id=rid, top=end)
        lines.append(f"  {end - shown.position} more tie with #{shown.position}: {more}.")
    else:
        lines.append(f"  {call('get_suspects', run_id=rid)} for more, with ties explained.")
    return "\n".join(lines)


def _first(rank: str) -> int:
    return int(rank.split("-")[0])


def _grouped(rows: list[SuspectLine]) -> list[str]:
    """One line per suspect, or per function's lines that share a tie (``file:12, 15, 19 in f``)."""
    groups: list[list[SuspectLine]] = []
    for row in rows:
        last = groups[-1][0] if groups else None
        if last and (last.rank, last.file, last.function) == (row.rank, row.file, row.function):
            groups[-1].append(row)
        else:
            groups.append([row])
    out = []
    for group in groups:
        row = group[0]
        if len(group) == 1:
            out.append(f"  {row.rank:>4}. {row.file}:{row.line} in {row.function}: {row.source[:70]}")
        else:
            numbers = ", ".join(str(r.line) for r in group)
            out.append(f"  {row.rank:>4}. {row.file}:{numbers} in {row.function} (tied)")
    return out


def relative(file: str, root: str) -> str:
    if root:
        try:
            return str(Path(file).relative_to(root))
        except ValueError:
            pass
    return file


def _functions(file: str) -> dict[int, str]:
    return _function_cache(file, _mtime(file))


def _starts(file: str) -> dict[str, int]:
    starts: dict[str, int] = {}
    for line, name in sorted(_functions(file).items()):
        starts.setdefault(name, line)
    return starts


def _mtime(file: str) -> int:
    try:
        return Path(file).stat().st_mtime_ns
    except OSError:
        return 0


_cache: dict[tuple[str, int], dict[int, str]] = {}


def _function_cache(file: str, mtime: int) -> dict[int, str]:
    key = (file, mtime)
    found = _cache.get(key)
    if found is None:
        if len(_cache) > 2000:
            _cache.clear()
        linecache.checkcache(file)
        found = _cache[key] = line_functions("".join(linecache.getlines(file)))
    return found
