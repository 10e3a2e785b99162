"""Mutation benchmark of the diagnosis tools, and what coverage mode and tracing cost.

Usage: python benchmarks/mutants.py [--mutants 25] [--subjects shop,inflection,toolz,boltons]
       [--scratch /tmp/mcpdebug-mutants] [--seed 15] [--skip-mutants] [--cost-rounds 5] [--trace-python PY]

1. Mutants: single-line mutants (comparison flips, off-by-one integers, ``return x`` -> ``return None``,
   ``and``/``or`` swaps) of the lines the suite runs, in the project's fixture `fixtures/suspects` (its
   bug fixed first) and in three pure-Python packages downloaded as sdists with pip into the scratch
   folder (never into the repository). A mutant counts when it makes 1-20 tests fail, and the same
   tests fail again on a second run. For each: the mutated line's place in get_suspects (as shown, and
   at the end of its tie group), its function's place at function level, whether get_failure names the
   line, and whether get_history (after the same run trace_test makes) reaches it.
2. Cost, per subject suite, alternating, CPU time of the pytest process: plain pytest, --mcp-debug,
   --mcp-debug --mcp-debug-coverage, pytest-cov --cov, pytest-cov --cov --cov-context=test.
3. trace_test's cost on a test of 10^5 line events, traced and not (also with --trace-python, e.g. a
   Python 3.13 with this project installed, for sys.monitoring).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from mcp import Client
from overhead import bytecode_env, clean_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from mcpdebug.app import build_server  # noqa: E402
from mcpdebug.ingest.spool import ingest_spool  # noqa: E402
from mcpdebug.store import Store  # noqa: E402
from mcpdebug.views import lookup  # noqa: E402
from mcpdebug.views.suspects import suspects  # noqa: E402
from pytest_mcpdebug.coverage.data import find_files, load  # noqa: E402

QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:asyncio", "-p", "no:randomly"]
PIP_DOWNLOAD = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "and": "or", "or": "and"}


@dataclass
class Subject:
    name: str
    files: list[str]
    tests: list[str]
    sdist: str = ""
    fix: tuple[str, str, str] | None = None
    """(file, text, replacement) applied before mutating: the fixture's own bug."""


SUBJECTS = {
    "shop": Subject(
        "shop",
        ["shop/pricing.py", "shop/cart.py"],
        ["tests"],
        fix=("shop/pricing.py", "return subtotal - 10  #", "return 10  #"),
    ),
    "inflection": Subject(
        "inflection", ["inflection/__init__.py"], ["test_inflection.py"], "inflection==0.5.1"
    ),
    "toolz": Subject(
        "toolz",
        ["toolz/itertoolz.py", "toolz/functoolz.py", "toolz/dicttoolz.py", "toolz/recipes.py"],
        ["toolz/tests"],
        "toolz==1.2.0",
    ),
    "boltons": Subject(
        "boltons",
        [f"boltons/{m}.py" for m in ("strutils", "iterutils", "listutils", "mathutils", "setutils")],
        [f"tests/test_{m}.py" for m in ("strutils", "iterutils", "listutils", "mathutils", "setutils")],
        "boltons==26.2.0",
    ),
}


@dataclass
class Result:
    subject: str
    file: str
    line: int
    mutation: str
    failing: int
    position: int | None = None
    worst: int | None = None
    function_position: int | None = None
    function_worst: int | None = None
    in_failure: bool = False
    in_history: bool = False
    notes: list[str] = field(default_factory=list)


def fetch(subject: Subject, scratch: Path) -> Path:
    """A fresh copy of the subject's source in the scratch folder."""
    target = scratch / "src" / subject.name
    shutil.rmtree(target, ignore_errors=True)
    if not subject.sdist:
        shutil.copytree(ROOT / "fixtures" / "suspects", target, ignore=shutil.ignore_patterns(".mcpdebug"))
    else:
        sdists = scratch / "sdists"
        sdists.mkdir(parents=True, exist_ok=True)
        name = subject.sdist.split("==")[0]
        found = list(sdists.glob(f"{name}-*.tar.gz"))
        if not found:
            subprocess.run(
                [*PIP_DOWNLOAD, subject.sdist, "-d", str(sdists)],
                check=True,
            )
            found = list(sdists.glob(f"{name}-*.tar.gz"))
        with tarfile.open(found[0]) as archive:
            top = archive.getnames()[0].split("/")[0]
            archive.extractall(scratch / "src", filter="data")
        (scratch / "src" / top).rename(target)
    if subject.fix:
        path = target / subject.fix[0]
        path.write_text(path.read_text().replace(subject.fix[1], subject.fix[2]))
    return target


def pytest(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def outcomes(store: Store, run_id: str) -> dict[str, str]:
    return {t["nodeid"]: t["status"] for t in store.tests(run_id)}


def candidates(path: Path, covered: set[int]) -> list[tuple[int, int, int, str, str]]:
    """(line, start col, end col, old, new) of each single-token mutation on a covered line."""
    source = path.read_text()
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        (line, start), (end_line, end) = token.start, token.end
        if line != end_line or line not in covered:
            continue
        if token.string in SWAPS and token.type in (tokenize.OP, tokenize.NAME):
            found.append((line, start, end, token.string, SWAPS[token.string]))
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            value = int(token.string)
            found.append((line, start, end, token.string, str(value + 1)))
            if value > 0:
                found.append((line, start, end, token.string, str(value - 1)))
        elif token.type == tokenize.NAME and token.string == "return":
            rest = source.splitlines()[line - 1][end:].strip()
            if rest and rest != "None" and not rest.endswith(("(", "[", "{", "\\", ",")):
                found.append(
                    (line, start, len(source.splitlines()[line - 1]), "return " + rest, "return None")
                )
    return found


def mutate(path: Path, line: int, start: int, end: int, new: str) -> str:
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    text = lines[line - 1]
    lines[line - 1] = text[:start] + new + text[end:]
    mutated = "".join(lines)
    compile(mutated, str(path), "exec")
    path.write_text(mutated)
    return original


async def assess(
    result: Result, store: Store, run_id: str, cwd: Path, env: dict[str, str], failing: list[str]
) -> None:
    """Where the tools place the mutated line: get_suspects, get_failure and get_history."""
    from pytest_mcpdebug.diagnosis.functions import MODULE, line_functions

    abspath = str(cwd / result.file)
    target = (cwd / result.file).resolve()
    function = line_functions(target.read_text()).get(result.line, MODULE)
    run = lookup.run(store, run_id)
    root = Path(run["rootdir"])
    for level in ("statement", "function"):
        reply = suspects(store, run, top=10_000, level=level)
        for row in reply.suspects:
            same_file = (root / row.file).resolve() == target
            hit = same_file and (
                row.line == result.line if level == "statement" else row.function == function
            )
            if hit:
                worst = int(row.rank.split("-")[-1])
                if level == "statement":
                    result.position, result.worst = row.position, worst
                else:
                    result.function_position, result.function_worst = row.position, worst
                break
    needle = (f"{result.file}:{result.line}", f"{abspath}:{result.line}")
    async with Client(build_server(store)) as client:
        failure = await client.call_tool("get_failure", {"run_id": run_id, "test": failing[0]})
        result.in_failure = any(n in failure.content[0].text for n in needle)
    trace_dir = cwd / ".mcpdebug-trace"
    pytest(cwd, "--mcp-debug-trace", "--mcp-debug-dir", str(trace_dir), failing[0], env=env)
    traced = Store(trace_dir)
    ingest_spool(traced)
    async with Client(build_server(traced)) as client:
        reply = await client.call_tool("get_history", {"test": failing[0]})
        text = reply.content[0].text
        result.in_history = not reply.is_error and any(n in text for n in needle)
    traced.close()
    shutil.rmtree(trace_dir, ignore_errors=True)


def run_subject(subject: Subject, scratch: Path, wanted: int, seed: int, env: dict[str, str]) -> list[Result]:
    cwd = fetch(subject, scratch)
    stores = scratch / "stores" / subject.name
    shutil.rmtree(stores, ignore_errors=True)
    base_dir = stores / "baseline"
    pytest(cwd, "--mcp-debug-coverage", "--mcp-debug-dir", str(base_dir), *subject.tests, env=env)
    base = Store(base_dir)
    ingest_spool(base)
    rid = base.run_ids(1)[0]
    baseline = outcomes(base, rid)
    broken = [n for n, o in baseline.items() if o in ("failed", "error")]
    if broken:
        print(f"  {subject.name}: {len(broken)} test(s) fail before any mutation, left out: {broken[:3]}")
    coverage = load(find_files(base_dir, rid, base.coverage_files(rid))[0])
    pool = []
    for rel in subject.files:
        path = (cwd / rel).resolve()
        covered = {line for (file, line) in coverage.lines if Path(file).resolve() == path}
        pool += [(rel, *c) for c in candidates(path, covered)]
    random.Random(seed).shuffle(pool)
    print(f"  {subject.name}: {len(baseline)} tests, {len(pool)} candidate mutants")
    results: list[Result] = []
    for n, (rel, line, start, end, old, new) in enumerate(pool):
        if len(results) >= wanted:
            break
        path = cwd / rel
        try:
            original = mutate(path, line, start, end, new)
        except SyntaxError:
            continue
        try:
            directory = stores / f"m{n}"
            pytest(cwd, "--mcp-debug-coverage", "--mcp-debug-dir", str(directory), *subject.tests, env=env)
            store = Store(directory)
            ingest_spool(store)
            run_id = store.run_ids(1)[0]
            now = outcomes(store, run_id)
            failing = sorted(
                t
                for t, o in now.items()
                if o in ("failed", "error") and baseline.get(t) not in ("failed", "error")
            )
            if not 1 <= len(failing) <= 20:
                continue
            again = pytest(cwd, "-p", "no:mcpdebug", *failing, env=env)
            if f"{len(failing)} failed" not in again.stdout and f"{len(failing)} error" not in again.stdout:
                continue  # not reproducible
            result = Result(subject.name, rel, line, f"{old} -> {new}", len(failing))
            asyncio.run(assess(result, store, run_id, cwd, env, failing))
            results.append(result)
            print(
                f"    {rel}:{line} {old!r}->{new!r}: {len(failing)} failing; suspect #{result.position} "
                f"(worst {result.worst}), function #{result.function_position}, failure {result.in_failure}, "
                f"history {result.in_history}"
            )
            store.close()
        finally:
            path.write_text(original)
    base.close()
    return results


def share(results: list[Result], attribute: str, top: int) -> str:
    hits = sum(1 for r in results if (getattr(r, attribute) or 10**9) <= top)
    return f"{100 * hits / len(results):.0f}%" if results else "-"


def report(results: list[Result]) -> None:
    print(
        "\n| subject | mutants | top 1 | top 5 | top 10 | top 1 worst | top 5 worst | top 10 worst | "
        "function top 1 | function top 5 | get_failure names it | get_history reaches it |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    groups = {
        name: [r for r in results if r.subject == name] for name in dict.fromkeys(r.subject for r in results)
    }
    groups["all"] = results
    for name, rows in groups.items():
        print(
            f"| {name} | {len(rows)} | {share(rows, 'position', 1)} | {share(rows, 'position', 5)} | "
            f"{share(rows, 'position', 10)} | {share(rows, 'worst', 1)} | {share(rows, 'worst', 5)} | "
            f"{share(rows, 'worst', 10)} | {share(rows, 'function_position', 1)} | "
            f"{share(rows, 'function_position', 5)} | "
            f"{100 * sum(r.in_failure for r in rows) / max(len(rows), 1):.0f}% | "
            f"{100 * sum(r.in_history for r in rows) / max(len(rows), 1):.0f}% |"
        )


def cpu_run(cwd: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", *QUIET, *args], cwd=cwd, env=env, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, time.perf_counter() - start


def cost(subject: Subject, scratch: Path, rounds: int, env: dict[str, str]) -> None:
    cwd = fetch(subject, scratch)
    sources = sorted({str(Path(f).parent) for f in subject.files})
    cov = [f"--cov={s}" for s in sources] + ["--cov-report="]
    store = ["--mcp-debug-dir", str(scratch / "cost")]
    modes = {
        "plain": ["-p", "no:mcpdebug"],
        "--mcp-debug": ["--mcp-debug", *store],
        "--mcp-debug-coverage": ["--mcp-debug-coverage", *store],
        "pytest-cov --cov": ["-p", "no:mcpdebug", *cov],
        "pytest-cov --cov-context=test": ["-p", "no:mcpdebug", *cov, "--cov-context=test"],
    }
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode, args in modes.items():
            times[mode].append(cpu_run(cwd, [*args, *subject.tests], env))
    plain = statistics.median(c for c, _ in times["plain"])
    print(f"\n{subject.name} ({rounds} rounds, median CPU s / wall s, CPU ratio to plain):")
    for mode, pairs in times.items():
        c, w = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        print(f"| {subject.name} | {mode} | {c:.2f} | {w:.2f} | {c / plain:.2f}x |")


TRACED = """
def work(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total


def test_loop():
    assert work(50_000) > 0
"""


def trace_cost(scratch: Path, pythons: list[str], rounds: int, env: dict[str, str]) -> None:
    folder = scratch / "trace"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "test_loop.py").write_text(TRACED)
    for python in pythons:
        for mode in ("--mcp-debug", "--mcp-debug-trace"):
            durations, lines, steps = [], 0, 0
            for r in range(rounds):
                directory = folder / f"store-{Path(python).parent.parent.name}-{mode}-{r}"
                subprocess.run(
                    [python, "-m", "pytest", *QUIET, mode, "--mcp-debug-dir", str(directory), "test_loop.py"],
                    cwd=folder,
                    env=env,
                    capture_output=True,
                    check=False,
                )
                store = Store(directory)
                ingest_spool(store)
                rid = store.run_ids(1)[0]
                durations.append(store.tests(rid)[0]["duration"])
                found = store.trace(rid, "test_loop.py::test_loop")
                if found:
                    lines, steps = found["trace"].lines, len(found["trace"].steps)
                store.close()
            version = subprocess.run(
                [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
            ).stdout.strip()
            print(f"| Python {version} | {mode} | {statistics.median(durations):.3f} s | {lines} | {steps} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mutants", type=int, default=25, help="mutants per subject")
    parser.add_argument("--subjects", default=",".join(SUBJECTS))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/mcpdebug-mutants"))
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--skip-mutants", action="store_true")
    parser.add_argument("--cost-rounds", type=int, default=5, help="0: skip the cost measurement")
    parser.add_argument(
        "--trace-python", action="append", default=[], help="another Python for the trace cost"
    )
    options = parser.parse_args()
    options.scratch.mkdir(parents=True, exist_ok=True)
    env = bytecode_env(clean_env(), options.scratch / "pycache")
    subjects = [SUBJECTS[s] for s in options.subjects.split(",")]
    print(f"Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if not options.skip_mutants:
        results = [
            r for s in subjects for r in run_subject(s, options.scratch, options.mutants, options.seed, env)
        ]
        report(results)
    if options.cost_rounds:
        print("\n| suite | mode | CPU s | wall s | CPU vs plain |\n| --- | --- | ---: | ---: | ---: |")
        for subject in subjects:
            cost(subject, options.scratch, options.cost_rounds, env)
        print("\n| Python | mode | test duration | line events | steps kept |")
        print("| --- | --- | ---: | ---: | ---: |")
        trace_cost(options.scratch, [sys.executable, *options.trace_python], options.cost_rounds, env)


if __name__ == "__main__":
    main()
