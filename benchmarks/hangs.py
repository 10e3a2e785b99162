"""Hang timeouts: what the watchdog costs passing tests, how soon a hang is recorded, how each fixture
hang is diagnosed.

1. Overhead: a generated suite of N trivial tests, whole `python -m pytest -q -p no:cacheprovider`
   runs interleaved round-robin after a warm-up round (bytecode cached, see `bytecode_env`): plain
   pytest, pytest-timeout's signal method (`--timeout=30 --timeout-method=signal`), `--mcp-debug` and
   `--mcp-debug --mcp-debug-timeout=30` (both spooling into a fresh folder per run, no server). The
   watchdog's own cost is the last minus `--mcp-debug`, to hold against pytest-timeout minus plain.
2. Detection latency: a test writes time.time() to a file as its first line, then hangs. For a busy
   loop, the latency is the recorded HangDetected's ts minus that; for a catastrophic regex (a C call
   holding the GIL) it is when faulthandler's backstop wrote its dump, as the store has it after
   `lookup.refresh` (spool ingested, dump attributed). With and without `-n 2`.
3. Classification: `fixtures/hangs` (copied to a temp folder) run with `--mcp-debug-timeout=2
   --mcp-debug-hang-grace=1 -n 2`; every test's recorded hang against the `# HANG` comment in its
   source (format in fixtures/hangs/README.md). Run in pytest's own order, then again with
   `test_gil.py` first as that README does, since the order changes what is lost and measured.

Usage: cd benchmarks && python hangs.py [--rounds 9] [--tests 2000] [--latency-runs 3] [--timeouts 1,2]
       [--graces 1,3] [--only overhead,latency,classify] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

# Run as `python hangs.py` from benchmarks/: the script's folder is on sys.path, so these resolve.
from gen_suite import generate
from overhead import BenchmarkError, bytecode_env, clean_env, nproc
from overhead import run_timed as timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from mcpdebug.store import Store  # noqa: E402
from mcpdebug.views import lookup  # noqa: E402
from pytest_mcpdebug.hangs import gil_dump  # noqa: E402

HANG_FIXTURES = ROOT / "fixtures" / "hangs"
SECTIONS = ("overhead", "latency", "classify")
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
RUN_TIMEOUT = 600.0

# 1. Overhead ---------------------------------------------------------------------------------------

OVERHEAD_MODES: dict[str, list[str]] = {
    # `-p no:mcpdebug` keeps the baselines free of the plugin; pytest-timeout is loaded (idle) in all.
    "plain": ["-p", "no:mcpdebug"],
    "pytest-timeout": ["--timeout=30", "--timeout-method=signal", "-p", "no:mcpdebug"],
    "mcpdebug": ["--mcp-debug"],
    "mcpdebug-timeout": ["--mcp-debug", "--mcp-debug-timeout=30"],
}
STORE_MODES = ("mcpdebug", "mcpdebug-timeout")


@dataclasses.dataclass
class Timed:
    wall: list[float] = dataclasses.field(default_factory=list)
    session: list[float] = dataclasses.field(default_factory=list)
    """pytest's own "N passed in X s": the session without interpreter start-up and plugin import."""
    cpu: list[float] = dataclasses.field(default_factory=list)
    """user + system seconds of the pytest process (and anything it waited for)."""


MEASURES = {"wall": "wall time", "session": "session time", "cpu": "CPU time"}
SESSION = re.compile(r"(\d+) passed in ([\d.]+)s")


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str, int]:
    """Wall and CPU seconds of one subprocess, its output and exit code."""
    return timed(cmd, cwd, env, RUN_TIMEOUT)


def overhead(workdir: Path, n_tests: int, rounds: int, warmup: int) -> dict[str, Timed]:
    suite = workdir / "suite"
    generate(n_tests, suite)
    base_env = bytecode_env(clean_env(), workdir / "pycache")
    modes = list(OVERHEAD_MODES)
    times = {m: Timed() for m in modes}
    run_no = 0
    for rep in range(warmup + rounds):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for mode in order:
            env = dict(base_env)
            store_dir: Path | None = None
            if mode in STORE_MODES:
                run_no += 1
                store_dir = workdir / f"store-{run_no:03d}"  # fresh: no server.json to find
                env["MCPDEBUG_DIR"] = str(store_dir)
            cmd = [*PYTEST, "-q", *OVERHEAD_MODES[mode], str(suite)]
            wall, cpu, out, code = run_timed(cmd, suite, env)
            session = SESSION.search(out)
            if code != 0 or session is None or int(session[1]) != n_tests:
                tail = "\n".join(out.splitlines()[-20:])
                raise BenchmarkError(f"{mode}: exit code {code} for {shlex.join(cmd)}\n{tail}")
            if store_dir is not None:
                spooled = list((store_dir / "spool").glob("*.jsonl"))
                if not spooled or (store_dir / "server.json").exists():
                    raise BenchmarkError(f"{mode}: expected a spool file and no server in {store_dir}")
                shutil.rmtree(store_dir, ignore_errors=True)
            timed = rep >= warmup
            label = f"round {rep - warmup + 1}/{rounds}" if timed else f"warm-up {rep + 1}/{warmup}"
            print(
                f"{label:>14}  {mode:<17} {wall:7.3f} s wall {session[2]:>6} s session {cpu:7.3f} s CPU",
                file=sys.stderr,
            )
            if timed:
                times[mode].wall.append(wall)
                times[mode].session.append(float(session[2]))
                times[mode].cpu.append(cpu)
    return times


def render_overhead(times: dict[str, Timed], n_tests: int) -> tuple[str, bool]:
    def samples(mode: str, what: str) -> list[float]:
        return list(getattr(times[mode], what))

    med = {what: {m: statistics.median(samples(m, what)) for m in times} for what in MEASURES}
    rows = [
        f"Whole `python -m pytest -q -p no:cacheprovider` runs on {n_tests:,} trivial tests, "
        "interleaved round-robin:",
        "",
        "| mode | arguments | runs | wall median (s) | wall min (s) | wall vs plain | session median (s) "
        "| CPU median (s) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, t in times.items():
        rows.append(
            f"| {mode} | `{' '.join(OVERHEAD_MODES[mode])}` | {len(t.wall)} | {med['wall'][mode]:.3f} "
            f"| {min(t.wall):.3f} | {med['wall'][mode] / med['wall']['plain']:.3f}x "
            f"| {med['session'][mode]:.3f} | {med['cpu'][mode]:.3f} |"
        )

    def cost(mode: str, base: str, what: str, how: str) -> float:
        if how == "medians":
            return med[what][mode] - med[what][base]
        pairs = zip(samples(mode, what), samples(base, what), strict=True)
        return statistics.median(x - y for x, y in pairs)

    def cell(seconds: float) -> str:
        return f"{seconds * 1000:+.0f} ms ({seconds / n_tests * 1e6:+.0f} µs/test)"

    ways = [(what, how) for what in MEASURES for how in ("medians", "pairs")]
    rows += [
        "",
        "Cost over the baseline, total and per test: *medians* is the difference of the two modes' "
        "medians, *pairs* the median of the per-round differences (the modes ran next to each other):",
        "",
        "| measure | pytest-timeout − plain | mcpdebug-timeout − mcpdebug (the watchdog) "
        "| mcpdebug − plain (recording) | watchdog ≤ pytest-timeout? |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    verdicts = {}
    for what, how in ways:
        timeout, watchdog = (
            cost("pytest-timeout", "plain", what, how),
            cost("mcpdebug-timeout", "mcpdebug", what, how),
        )
        verdicts[(what, how)] = watchdog <= timeout
        rows.append(
            f"| {MEASURES[what]}, {how} | {cell(timeout)} | {cell(watchdog)} "
            f"| {cell(cost('mcpdebug', 'plain', what, how))} | {'yes' if watchdog <= timeout else 'no'} |"
        )
    met = verdicts[("wall", "medians")]
    agree = sum(verdicts.values())
    rows += [
        "",
        f"Target (watchdog cost ≤ pytest-timeout signal cost; wall, difference of medians): "
        f"**{'met' if met else 'not met'}**; {agree} of {len(verdicts)} measures say met.",
    ]
    return "\n".join(rows), met


# 2. Detection latency ------------------------------------------------------------------------------

BUSY_TESTS = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path


    def test_busy_a():
        Path(os.environ["HANGBENCH_STARTS"], "test_busy_a").write_text(repr(time.time()))
        n = 0
        while True:
            n += 1


    def test_busy_b():
        Path(os.environ["HANGBENCH_STARTS"], "test_busy_b").write_text(repr(time.time()))
        n = 0
        while True:
            n += 1
    """
)
GIL_TEST = textwrap.dedent(
    """
    import os
    import re
    import time
    from pathlib import Path


    def test_regex_gil():
        Path(os.environ["HANGBENCH_STARTS"], "test_regex_gil").write_text(repr(time.time()))
        assert not re.match(r"(a+)+$", "a" * 40 + "b")
    """
)
BUSY_SLACK = 0.5
GIL_SLACK = 1.0


@dataclasses.dataclass
class Sample:
    test: str
    latency: float | None
    """Recorded HangDetected ts minus the test's first line; None when no hang was recorded."""
    kind: str
    dump_latency: float | None = None
    """GIL hangs: the dump file's mtime minus the test's first line."""


@dataclasses.dataclass
class Config:
    hang: str  # busy or gil
    timeout: float
    grace: float
    xdist: bool
    samples: list[Sample] = dataclasses.field(default_factory=list)
    wall: list[float] = dataclasses.field(default_factory=list)

    @property
    def target(self) -> float:
        return self.timeout + (BUSY_SLACK if self.hang == "busy" else self.grace + GIL_SLACK)


def latency_run(workdir: Path, config: Config, run_no: int, env: dict[str, str]) -> None:
    project = workdir / f"latency-{config.hang}"
    if not project.exists():
        project.mkdir(parents=True)
        (project / "pytest.ini").write_text("[pytest]\n")
        name, body = ("test_busy.py", BUSY_TESTS) if config.hang == "busy" else ("test_gil.py", GIL_TEST)
        (project / name).write_text(body)
    tag = f"{config.hang}-t{config.timeout:g}-g{config.grace:g}-{'n2' if config.xdist else 'serial'}-{run_no}"
    store_dir, starts = workdir / f"store-{tag}", workdir / f"starts-{tag}"
    starts.mkdir()
    run_env = {**env, "MCPDEBUG_DIR": str(store_dir), "HANGBENCH_STARTS": str(starts)}
    cmd = [
        *PYTEST,
        "-q",
        f"--mcp-debug-timeout={config.timeout:g}",
        f"--mcp-debug-hang-grace={config.grace:g}",
        *(["-n", "2"] if config.xdist else []),
    ]
    wall, _, out, _ = run_timed(cmd, project, run_env)
    config.wall.append(wall)
    store = Store(store_dir)
    try:
        lookup.refresh(store)  # the spool, and the dump of a process that died holding the GIL
        runs = store.runs(2)
        if len(runs) != 1:
            raise BenchmarkError(f"{tag}: expected one recorded run, found {len(runs)}:\n{out[-2000:]}")
        hangs = {h["nodeid"]: h for h in store.hangs(runs[0]["run_id"])}
    finally:
        store.close()
    dumps = [p for p in (store_dir / "hangs").glob("*.txt") if gil_dump.has_dump(p)]
    for start_file in sorted(starts.iterdir()):
        started = float(start_file.read_text())
        nodeid = f"{'test_busy.py' if config.hang == 'busy' else 'test_gil.py'}::{start_file.name}"
        hang = hangs.get(nodeid)
        sample = Sample(
            test=start_file.name,
            latency=hang["detected"] - started if hang else None,
            kind=hang["kind"] if hang else "(none recorded)",
        )
        if config.hang == "gil" and dumps:
            sample.dump_latency = max(p.stat().st_mtime for p in dumps) - started
        config.samples.append(sample)
        shown = f"{sample.latency:.2f} s" if sample.latency is not None else "not recorded"
        print(f"  {tag:<26} {sample.test:<15} {shown:>12} {sample.kind}", file=sys.stderr)
    if not any(starts.iterdir()):
        raise BenchmarkError(f"{tag}: no test started:\n{out[-2000:]}")


def latency(workdir: Path, runs: int, timeouts: list[float], graces: list[float]) -> list[Config]:
    env = bytecode_env(clean_env(), workdir / "pycache")
    configs = [Config("busy", t, 3.0, xdist) for t in timeouts for xdist in (False, True)]  # default grace
    configs += [Config("gil", t, g, xdist) for t in timeouts for g in graces for xdist in (False, True)]
    for run_no in range(1, runs + 1):  # interleaved, so drift on the machine hits every config alike
        for config in configs:
            latency_run(workdir, config, run_no, env)
    return configs


def render_latency(configs: list[Config]) -> tuple[str, bool]:
    rows = [
        "From the test's first line to the hang being recorded (busy: the HangDetected event's ts; "
        "gil: the dump faulthandler wrote, as the store has it after `lookup.refresh`). Busy runs have "
        "two busy tests (one per worker under `-n 2`), GIL runs one regex test; *late by* is the median "
        "minus T (busy) or minus T + G (gil):",
        "",
        "| hang | timeout T | grace G | xdist | samples | kind recorded | median | late by | max | all (s) "
        "| target | met |",
        "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    all_met = True
    for c in configs:
        values = [s.latency for s in c.samples if s.latency is not None]
        missing = len(c.samples) - len(values)
        kinds = [f"{k} ×{n}" for k, n in sorted(collections.Counter(s.kind for s in c.samples).items())]
        due = c.timeout + (c.grace if c.hang == "gil" else 0.0)
        late = f"{statistics.median(values) - due:+.3f} s" if values else "—"
        met = bool(values) and not missing and max(values) <= c.target
        all_met &= met
        verdict = "yes" if met else "**no**"
        if values and max(values) > c.target:
            verdict += f" (max over by {(max(values) - c.target) * 1000:.1f} ms)"
        median = f"{statistics.median(values):.3f} s" if values else "—"
        worst = f"{max(values):.3f} s" if values else "—"
        listed = ", ".join(f"{v:.3f}" for v in values) + (f" (+{missing} not recorded)" if missing else "")
        target_text = (
            f"≤ T + {BUSY_SLACK:g} = {c.target:g} s"
            if c.hang == "busy"
            else (f"≤ T + G + {GIL_SLACK:g} = {c.target:g} s")
        )
        rows.append(
            f"| {'busy loop' if c.hang == 'busy' else 'GIL (regex)'} | {c.timeout:g} s "
            f"| {c.grace:g} s{'' if c.hang == 'gil' else ' (n/a)'} | {'-n 2' if c.xdist else 'no'} "
            f"| {len(c.samples)} | {', '.join(kinds)} | {median} | {late} | {worst} | {listed} "
            f"| {target_text} | {verdict} |"
        )
    gil = [s for c in configs if c.hang == "gil" for s in c.samples]
    if gil:
        apart = [abs(s.latency - s.dump_latency) for s in gil if s.latency is not None and s.dump_latency]
        rows += [
            "",
            f"GIL hangs: {sum(s.dump_latency is not None for s in gil)} of {len(gil)} runs left a dump; "
            + (
                f"the store's ts and the dump file's mtime differ by at most {max(apart) * 1000:.0f} ms."
                if apart
                else "none could be compared with the store."
            ),
        ]
    return "\n".join(rows), all_met


# 3. Classification ---------------------------------------------------------------------------------


def _load_expected(folder: Path) -> Any:
    """The suite's own parser of its `# HANG` comments (fixtures/hangs/expected.py)."""
    spec = importlib.util.spec_from_file_location("hangs_expected", folder / "expected.py")
    if spec is None or spec.loader is None:
        raise BenchmarkError(f"cannot load {folder / 'expected.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def expectations(folder: Path) -> tuple[list[Any], list[str]]:
    """The `# HANG` comments of every test file, and every test function's node id."""
    expected = _load_expected(folder)
    return expected.expectations(folder), expected.test_ids(folder)


OUR_COMMENTS = re.compile(r"\s*# HANG [^`\n]*")
"""The expectation comments, which some summaries quote with the source line: never matched against."""


def wait_for_fixtures(max_wait: float) -> None:
    deadline = time.monotonic() + max_wait
    while not list(HANG_FIXTURES.glob("test_*.py")):
        if time.monotonic() > deadline:
            raise BenchmarkError(f"no test files in {HANG_FIXTURES} after waiting {max_wait:.0f} s")
        print(f"waiting for {HANG_FIXTURES} ...", file=sys.stderr)
        time.sleep(30)


def check(expected: Any, hang: dict[str, Any] | None) -> tuple[str, str, bool, list[str]]:
    """(reported kind, reported location, match, why not) for one comment."""
    if hang is None:
        return "(not recorded)", "—", False, ["no hang recorded in the store"]
    report = hang["report"]
    summary = OUR_COMMENTS.sub("", hang["summary"])
    problems = []
    if expected.thread:  # the joined thread: in the summary, after the test's own diagnosis
        part = summary.split(f"'{expected.thread}'", 1)
        if len(part) < 2:
            return hang["kind"], "—", False, [f"thread {expected.thread!r} not named"]
        joined = part[1]
        where = re.search(r"at line (\d+) of (\w+)\(\)", joined)
        location = f"{expected.file}:{where[1]} in {where[2]}() (thread {expected.thread})" if where else "—"
        kind_said = "blocked" if "is blocked in" in joined else joined.split()[1] if joined.split() else "?"
        if not where or int(where[1]) != expected.line:
            problems.append(f"line {where[1] if where else '?'} ≠ {expected.line}")
        if expected.kind != kind_said:
            problems.append(f"kind {kind_said} ≠ {expected.kind}")
        if expected.call and expected.call not in joined:
            problems.append(f"`{expected.call}` not said")
        return f"{kind_said} (thread)", location, not problems, problems
    file = Path(report.file).name if report.file else ""
    lines = sorted(report.lines) or ([report.line] if report.line else [])
    if expected.first != expected.last or expected.kind in ("busy", "polling"):
        location = f"{file}:{lines[0]}-{lines[-1]}" if lines else "—"
        if not lines or (lines[0], lines[-1]) != (expected.first, expected.last):
            problems.append(f"lines {location} ≠ {expected.first}-{expected.last}")
    else:
        location = f"{file}:{report.line}" if report.line else "—"
        if report.line != expected.line:
            problems.append(f"line {report.line} ≠ {expected.line}")
    if file and file != expected.file:
        problems.append(f"file {file} ≠ {expected.file}")
    if hang["kind"] != expected.kind:
        problems.append(f"kind {hang['kind']} ≠ {expected.kind}")
    if (hang["phase"] or "call") != expected.phase:
        problems.append(f"phase {hang['phase'] or 'call'} ≠ {expected.phase}")
    if expected.call and expected.call not in summary:
        problems.append(f"`{expected.call}` not in the summary")
    if report.function and report.function != expected.function:
        problems.append(f"function {report.function}() ≠ {expected.function}()")
    return (
        hang["kind"],
        f"{location} in {report.function}()" if report.function else location,
        not problems,
        problems,
    )


def copy_fixtures(workdir: Path) -> Path:
    suite = workdir / "hangs-suite"
    shutil.copytree(HANG_FIXTURES, suite, ignore=shutil.ignore_patterns("__pycache__", ".mcpdebug", "*.pyc"))
    if not any((suite / name).exists() for name in ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")):
        (suite / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: the project's conftest stays out
    return suite


def classify(
    workdir: Path, suite: Path, timeout: float, grace: float, paths: list[str], tag: str
) -> tuple[str, bool, dict[str, str]]:
    """Run the suite once; the table, whether every row matches, and each row's verdict by name."""
    store_dir = workdir / f"store-classify-{tag}"
    env = {**bytecode_env(clean_env(), workdir / "pycache"), "MCPDEBUG_DIR": str(store_dir)}
    args = [f"--mcp-debug-timeout={timeout:g}", f"--mcp-debug-hang-grace={grace:g}", "-n", "2", *paths]
    wall, _, out, code = run_timed([*PYTEST, "-q", *args], suite, env)
    counts = next((line for line in reversed(out.splitlines()) if " in " in line and "=" not in line), "")
    counts = counts or out.strip().splitlines()[-1]
    terminal = set(re.findall(r"^HANG (\S+): ", out.split("mcpdebug: hangs", 1)[-1], re.MULTILINE))
    store = Store(store_dir)
    try:
        lookup.refresh(store)
        run = store.runs(1)[0]
        hangs = {h["nodeid"]: h for h in store.hangs(run["run_id"])}
        status = {t["nodeid"]: t["status"] for t in store.tests(run["run_id"])}
    finally:
        store.close()
    expected, tests = expectations(suite)
    commented = {e.nodeid for e in expected}
    rows = [
        f"`pytest -p no:cacheprovider -q {' '.join(args)}` on a copy of `fixtures/hangs` "
        f"({len(tests)} tests in {len(list(suite.glob('test_*.py')))} files): exit code {code}, "
        f"{wall:.1f} s, `{counts.strip()}`.",
        "",
        "| test | expected (`# HANG` comment) | kind recorded | location recorded | summary (recorded; the "
        "fixtures' `# HANG` comments it quotes removed) | match |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    all_ok = True
    verdicts: dict[str, str] = {}
    for nodeid in tests:
        mine = [e for e in expected if e.nodeid == nodeid]
        hang = hangs.get(nodeid)
        if not mine:
            ok = hang is None and status.get(nodeid) == "passed"
            all_ok &= ok
            reported = hang["kind"] if hang else f"no hang ({status.get(nodeid, 'not recorded')})"
            rows.append(
                f"| `{nodeid}` | passes (no comment) | {reported} | — | — | {'yes' if ok else '**no**'} |"
            )
            verdicts[nodeid] = "yes" if ok else f"no: {reported}"
            continue
        for e in mine:
            kind, location, ok, problems = check(e, hang)
            all_ok &= ok
            summary = OUR_COMMENTS.sub("", hang["summary"]).replace("|", "\\|") if hang else "—"
            name = nodeid + (f" (thread `{e.thread}`)" if e.thread else "")
            where = f"{e.file}:{e.line}"
            verdict = "yes" if ok else "**no**: " + "; ".join(problems)
            verdicts[name] = "yes" if ok else "no: " + "; ".join(problems)
            rows.append(
                f"| `{name}` | {e.kind}{'' if e.first == e.last else f' lines {e.first}-{e.last}'}"
                f"{f' in `{e.call}`' if e.call else ''}{f' ({e.phase})' if e.phase != 'call' else ''} "
                f"at {where} | {kind} | {location} | {summary} | {verdict} |"
            )
    stray = sorted(set(hangs) - set(tests))
    missing = sorted(n for n in terminal if n not in hangs)
    notes = []
    if stray:
        notes.append(f"Hangs recorded for tests not in the sources: {', '.join(stray)}.")
    if missing:
        all_ok = False
        notes.append(
            f"In the terminal's hang summary but not in the store: {', '.join(f'`{n}`' for n in missing)}."
        )
    uncommented_hangs = sorted(n for n in hangs if n not in commented and n in tests)
    if uncommented_hangs:
        notes.append(f"Hangs of tests without a `# HANG` comment: {', '.join(uncommented_hangs)}.")
    left_running = sorted(n for n, s in status.items() if s == "running")
    if left_running:
        notes.append(f"Tests the store still shows as running: {', '.join(f'`{n}`' for n in left_running)}.")
    matched = sum(1 for line in rows if line.endswith("| yes |"))
    rows += ["", f"{matched} of {len(rows) - 4} rows match.", *notes]
    return "\n".join(rows), all_ok, verdicts


# Main ------------------------------------------------------------------------------------------------


def heading(argv: list[str]) -> str:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"### {when}: Python {platform.python_version()}, pytest {importlib.metadata.version('pytest')}, "
        f"pytest-timeout {importlib.metadata.version('pytest-timeout')}, nproc {nproc()}, "
        f"load average {load}\n\n"
        f"```\n{shlex.join(['python', 'hangs.py', *argv])}\n```"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000, help="trivial tests for the overhead runs (2000)")
    parser.add_argument("--rounds", type=int, default=9, help="timed overhead rounds per mode (9)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed overhead rounds first (1)")
    parser.add_argument("--latency-runs", type=int, default=3, help="runs per latency configuration (3)")
    parser.add_argument("--timeouts", default="1,2", help="timeouts T for the latency runs, seconds (1,2)")
    parser.add_argument("--graces", default="1,3", help="hang graces G for the GIL latency runs (1,3)")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--wait-fixtures", type=float, default=1200, help="wait for fixtures/hangs (s)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also append the tables to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args(argv)
    raw_argv = sys.argv[1:] if argv is None else argv
    sections = [s.strip() for s in (args.only or ",".join(SECTIONS)).split(",") if s.strip()]
    if unknown := [s for s in sections if s not in SECTIONS]:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    if args.tests < 1 or args.rounds < 1 or args.latency_runs < 1:
        parser.error("--tests, --rounds and --latency-runs must be >= 1")
    timeouts = [float(t) for t in args.timeouts.split(",") if t.strip()]
    graces = [float(g) for g in args.graces.split(",") if g.strip()]

    started = time.monotonic()
    parts = [heading(raw_argv)]
    verdicts: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="mcpdebug-hangbench-"))
    try:
        if "overhead" in sections:
            t0 = time.monotonic()
            table, met = render_overhead(overhead(workdir, args.tests, args.rounds, args.warmup), args.tests)
            parts.append(f"#### Watchdog overhead ({time.monotonic() - t0:.0f} s)\n\n{table}")
            verdicts.append(f"overhead: {'met' if met else 'NOT met'}")
        if "latency" in sections:
            t0 = time.monotonic()
            table, met = render_latency(latency(workdir, args.latency_runs, timeouts, graces))
            parts.append(f"#### Detection latency ({time.monotonic() - t0:.0f} s)\n\n{table}")
            verdicts.append(f"latency: {'met' if met else 'NOT met'}")
        if "classify" in sections:
            t0 = time.monotonic()
            wait_for_fixtures(args.wait_fixtures)
            suite = copy_fixtures(workdir)
            table, ok, default = classify(workdir, suite, 2.0, 1.0, [], "default")
            # fixtures/hangs/README.md (and tests/test_hangs.py) put test_gil.py first: compare.
            others = sorted(p.name for p in suite.glob("test_*.py") if p.name != "test_gil.py")
            _, ok_gil_first, gil_first = classify(
                workdir, suite, 2.0, 1.0, ["test_gil.py", *others], "gil-first"
            )
            changed = [
                f"`{name}`: {default.get(name, '—')} → {v}"
                for name, v in gil_first.items()
                if default.get(name) != v
            ]
            table += (
                f"\n\nThe same run with `test_gil.py` first on the command line (as fixtures/hangs/README.md "
                f"runs it): {sum(v == 'yes' for v in gil_first.values())} of {len(gil_first)} rows match"
                + (f"; differences: {'; '.join(changed)}." if changed else ", the same verdicts.")
            )
            parts.append(f"#### Classification of fixtures/hangs ({time.monotonic() - t0:.0f} s)\n\n{table}")
            verdicts.append(
                f"classification: {'all match' if ok else 'NOT all match'} (test_gil.py first: "
                f"{'all match' if ok_gil_first else 'NOT all match'})"
            )
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    parts.append(f"Targets: {'; '.join(verdicts)}. Script run time {time.monotonic() - started:.0f} s.")
    text = "\n\n".join(parts)
    print(text)
    if args.markdown:
        with args.markdown.open("a") as fh:
            fh.write(f"\n{text}\n")
        print(f"appended to {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
