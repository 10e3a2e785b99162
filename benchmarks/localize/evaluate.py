"""Where the suspects place each frozen mutant's line, against plain Ochiai, with and without the
dynamic localizer; and whether the first `get_failure` reply names it.

Usage: python benchmarks/localize/evaluate.py dev|heldout|fresh [--budget 30] [--no-localize]
       [--scratch DIR] [--only ID,ID] [--rerecord] [--record-only]

For each mutant of ``<set>.json`` (applied to a fresh copy of its package, put back after):

1. record (kept in the scratch folder, so scoring again costs no run): the suite with
   ``--mcp-debug-coverage`` into a store of its own; the suite again under pytest-cov
   ``--cov-context=test`` (this plugin off), the anchor's data;
2. score: plain Ochiai over pytest-cov's contexts (a test's lines: the union of its set-up, call and
   teardown contexts; outcomes of the recorded run); `get_suspects`' ranking; the first `get_failure`
   reply (no test named, as an agent first asks) through the MCP server in memory; then the dynamic
   localizer with the budget (``localize`` through the same server), and the ranking after it.

The figures come from fresh runs (``--rerecord``): scored again, a store holds the localizer's
verdicts from before, which the first `get_failure` reply then names too.

Places count ties at their worst (the end of the line's tie group). A held-out set (``heldout``,
``fresh``) prints its totals only: its per-mutant rows go to ``<scratch>/<set>-*-rows.jsonl``,
outside the repository, never read while tuning. A recording run stops a test at 60 s.
``--subjects`` scores some packages only (one process each, in parallel);
``--summarize`` prints the table of all rows written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from subjects import OPTIONS, REPO, SETS, Subject, cache_dir, environment, source

sys.path.insert(0, str(REPO / "server"))

from mcp import Client

from mcpdebug.app import build_server
from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import Store
from mcpdebug.views import lookup
from mcpdebug.views import suspects as suspects_view
from pytest_mcpdebug.coverage.data import find_files, load
from pytest_mcpdebug.diagnosis import localization, ranking

HERE = Path(__file__).resolve().parent
FAILING = ("failed", "error")
TOPS = (1, 3, 5, 10)


@dataclass
class Row:
    id: str
    subject: str
    mutation: str
    failing: int
    anchor: int | None = None
    static: int | None = None
    localized: int | None = None
    in_failure: bool = False
    localize_seconds: float | None = None
    notes: list[str] = field(default_factory=list)


def pytest(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", *OPTIONS, "-q", "--tb=short", *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=900)


def apply(folder: Path, mutant: dict[str, Any]) -> str:
    path = folder / mutant["file"]
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    line = lines[mutant["line"] - 1]
    if line.rstrip("\n") != mutant["original"]:
        raise SystemExit(f"{mutant['id']}: line {mutant['line']} is not the frozen one; regenerate the set")
    lines[mutant["line"] - 1] = line[: mutant["start"]] + mutant["new"] + line[mutant["end"] :]
    path.write_text("".join(lines))
    return original


TIMEOUT = ("-p", "timeout", "--timeout=60")
"""A mutant that makes a test loop for ever (a test over 60 s fails, as under pytest-timeout in CI)."""


def record(subject: Subject, folder: Path, env: dict[str, str], mutant: dict[str, Any], into: Path) -> None:
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    store = str(into / "store")
    pytest(folder, env, *TIMEOUT, "--mcp-debug-coverage", "--mcp-debug-dir", store, *subject.tests)
    targets = sorted({str(Path(f).parent) for f in subject.files})
    cov_env = {**env, "COVERAGE_FILE": str(into / "pytest-cov.coverage")}
    covs = [f"--cov={t}" for t in targets]
    contexts = ("--cov-report=", "--cov-context=test")
    pytest(folder, cov_env, "-p", "no:mcpdebug", *TIMEOUT, *covs, *contexts, *subject.tests)


def anchor_place(data_file: Path, outcomes: dict[str, str], target: tuple[str, int]) -> int | None:
    """Plain Ochiai over pytest-cov's per-test contexts, the line's worst place (None: not ranked, or
    no data: pytest-cov writes none when no test ran, e.g. a test module failed to import)."""
    if not data_file.is_file():
        return None
    coverage = load([data_file])
    failing = {t for t, o in outcomes.items() if o in FAILING}
    passing = {t for t, o in outcomes.items() if o == "passed"}
    counts = ranking.spectrum(coverage.lines, failing, passing)
    ranked = ranking.rank(counts, len(failing & coverage.tests))
    return next((s.last for s in ranked if s.key == target), None)


async def first_failure(store: Store, run_id: str) -> str:
    async with Client(build_server(store)) as client:
        reply = await client.call_tool("get_failure", {"run_id": run_id})
        return str(reply.content[0].text)


def names_line(text: str, names: tuple[str, ...], line: int) -> bool:
    """Whether a reply names ``file:line`` (not ``file:line0``, a longer number), alone or in a
    function's tied lines (``file:12, 15, 19 in f``)."""
    for name in names:
        for found in re.finditer(rf"{re.escape(name)}:(\d+(?:, \d+)*)(?!\d)", text):
            if str(line) in found.group(1).split(", "):
                return True
    return False


def static_place(
    store: Store, run: dict[str, Any], target: tuple[str, int], localized: bool = False
) -> int | None:
    """The line's worst place in `get_suspects`' ranking: without the localizer's verdicts (the
    recorded run), or with them once stored (``localized``)."""
    outcomes = {t["nodeid"]: t["status"] for t in store.tests(run["run_id"])}
    failing = {t for t, o in outcomes.items() if o in FAILING}
    passing = {t for t, o in outcomes.items() if o == "passed"}
    paths, _ = find_files(store.dir, run["run_id"], store.coverage_files(run["run_id"]))
    evidence = suspects_view.evidence(store, run)
    if not localized:  # a store scored before holds verdicts: the recorded run's ranking has none
        evidence.dynamic = {}
    ranked = localization.rank_lines(load(paths).lines, failing, passing, evidence)
    return next((s.last for s in ranked if s.key == target), None)


async def localize(store: Store, run_id: str, budget: float, cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    async with Client(build_server(store)) as client:
        reply = await client.call_tool("localize", {"run_id": run_id, "budget": budget})
    return time.perf_counter() - started, str(reply.content[0].text)


def score(subject: Subject, folder: Path, mutant: dict[str, Any], into: Path, budget: float | None) -> Row:
    folder_of_store = into / "store"
    if (folder_of_store / ".mcpdebug").is_dir():  # a folder that is not a store yet gets one inside
        folder_of_store = folder_of_store / ".mcpdebug"
    store = Store(folder_of_store)
    ingest_spool(store)
    run = lookup.run(store, "latest")
    outcomes = {t["nodeid"]: t["status"] for t in store.tests(run["run_id"])}
    failing = sorted(t for t, o in outcomes.items() if o in FAILING)
    row = Row(mutant["id"], subject.name, f"{mutant['old']} -> {mutant['new']}", len(failing))
    target = (str((folder / mutant["file"]).resolve()), mutant["line"])
    row.anchor = anchor_place(into / "pytest-cov.coverage", outcomes, target)
    row.static = static_place(store, run, target)
    text = asyncio.run(first_failure(store, run["run_id"]))
    row.in_failure = names_line(text, (mutant["file"], target[0]), mutant["line"])
    if budget and store.localization(run["run_id"]) is None:
        seconds, said = asyncio.run(localize(store, run["run_id"], budget, folder))
        row.localize_seconds = round(seconds, 2)
        if "Localized" not in said:
            row.notes.append(said[:300])
    stored = store.localization(run["run_id"])
    if budget and stored is not None:  # scored again (other weights): the verdicts stored with the run
        row.localized = static_place(store, run, target, localized=True)
        if row.localize_seconds is None:
            row.localize_seconds = stored.elapsed
    store.close()
    return row


def share(rows: list[Row], attribute: str, top: int) -> str:
    hits = sum(1 for r in rows if (getattr(r, attribute) or 10**9) <= top)
    return f"{100 * hits / len(rows):.0f}%" if rows else "-"


def table(rows: list[Row], name: str) -> str:
    out = [
        f"\n{name}: {len(rows)} mutants of {len({r.subject for r in rows})} packages",
        "| ranking | top-1 | top-3 | top-5 | top-10 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, attribute in (
        ("plain Ochiai (pytest-cov contexts)", "anchor"),
        ("get_suspects, recorded run", "static"),
        ("get_suspects after `localize`", "localized"),
    ):
        if any(getattr(r, attribute) is not None for r in rows):
            out.append(f"| {label} | " + " | ".join(share(rows, attribute, t) for t in TOPS) + " |")
    broken = sum(1 for r in rows if any(n.startswith("scoring failed") for n in r.notes))
    if broken:
        out.append(f"\n{broken} mutant(s) the harness could not score (counted as not found)")
    unranked = sum(1 for r in rows if r.failing == 0 and not any(n.startswith("scoring") for n in r.notes))
    if unranked:
        out.append(
            f"{unranked} mutant(s) failed no test in the recorded run (a collection error is no test: "
            "nothing ranks it; counted as not found)"
        )
    named = sum(r.in_failure for r in rows)
    percent = 100 * named / max(len(rows), 1)
    out.append(f"\nFirst `get_failure` reply names the mutated line: {named}/{len(rows)} ({percent:.0f}%)")
    times = [r.localize_seconds for r in rows if r.localize_seconds is not None and r.failing]
    if times:
        out.append(
            f"`localize` time per mutant: median {statistics.median(times):.1f} s, max {max(times):.1f} s"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", choices=sorted(SETS))
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--no-localize", action="store_true")
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--only", default="", help="mutant ids (dev set only)")
    parser.add_argument("--rerecord", action="store_true")
    parser.add_argument(
        "--record-only", action="store_true", help="only the runs (no place is computed or printed)"
    )
    parser.add_argument("--subjects", default="", help="only these packages (one process each, in parallel)")
    parser.add_argument(
        "--summarize", action="store_true", help="the table of every package's rows written so far"
    )
    options = parser.parse_args()
    cache = cache_dir()
    scratch = options.scratch or cache / "localize" / "runs"
    frozen = json.loads((HERE / f"{options.set}.json").read_text())["mutants"]
    heldout = options.set != "dev"  # held-out sets print totals only
    only = set(filter(None, options.only.split(",")))
    if only and heldout:
        raise SystemExit("a held-out set is scored whole, never mutant by mutant")
    chosen = set(filter(None, options.subjects.split(",")))
    subjects = {s.name: s for s in SETS[options.set] if not chosen or s.name in chosen}
    if options.summarize:
        found = [
            Row(**json.loads(line))
            for path in sorted(scratch.glob(f"{options.set}-*rows.jsonl"))
            for line in path.read_text().splitlines()
        ]
        print(table(found, options.set))
        return
    rows: list[Row] = []
    out = scratch / f"{options.set}-{'-'.join(sorted(chosen)) or 'all'}-rows.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Python {sys.version.split()[0]}, {now}", flush=True)
    for name, subject in subjects.items():
        mutants = [m for m in frozen if m["subject"] == name and (not only or m["id"] in only)]
        if not mutants:
            continue
        folder = source(subject, cache)
        env = environment(subject, folder, dict(os.environ))
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the localizer's runs start from this process's environment
        try:
            for mutant in mutants:
                into = scratch / options.set / mutant["id"]
                original = apply(folder, mutant)
                try:
                    if options.rerecord or not (into / "pytest-cov.coverage").exists():
                        try:
                            record(subject, folder, env, mutant, into)
                        except subprocess.TimeoutExpired:  # scored as it is: a miss when nothing ranks it
                            print(f"  {mutant['id']}: a recording run took over 900 s", flush=True)
                    if options.record_only:
                        print(f"  {mutant['id']} recorded", flush=True)
                        continue
                    budget = None if options.no_localize else options.budget
                    try:
                        row = score(subject, folder, mutant, into, budget)
                    except Exception as exc:  # one mutant the harness cannot score is a miss, not the end
                        row = Row(mutant["id"], subject.name, f"{mutant['old']} -> {mutant['new']}", 0)
                        row.notes.append(f"scoring failed: {type(exc).__name__}: {str(exc)[:200]}")
                finally:
                    (folder / mutant["file"]).write_text(original)
                rows.append(row)
                with out.open("a") as f:
                    f.write(json.dumps(asdict(row)) + "\n")
                if not heldout:
                    print(
                        f"{row.id} {mutant['file']}:{mutant['line']} {row.mutation!r}: "
                        f"{row.failing} failing; "
                        f"anchor {row.anchor}, static {row.static}, localized {row.localized} "
                        f"({row.localize_seconds} s), get_failure {row.in_failure} {row.notes[:1]}",
                        flush=True,
                    )
                else:
                    print(f"  {len(rows)} scored", flush=True)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    print(table(rows, options.set))


if __name__ == "__main__":
    main()
