"""Run real projects' own test suites plain and recorded, and compare (issue 43, item 3).

    python benchmarks/corpus/run.py --runs 10 --jobs 2                 # every project, every configuration
    python benchmarks/corpus/run.py --runs 2 --only toolz --only sh    # a few, to try something
    python benchmarks/corpus/run.py --table results.json               # the table of a saved run again

For each project of ``projects.py`` (fetched and given a venv by ``prepare.py``) and each configuration,
``--runs`` pairs of runs (three times as many for a suite that forks), each a plain run and a recorded
one, plain first in one pair and second in the next, ``--jobs`` runs at a time (two: as on a loaded CI
machine), always through the venv's ``bin/pytest`` console script:

    serial     pytest -p no:mcpdebug ...        against   pytest --mcp-debug ...
    xdist      pytest -p no:mcpdebug -n 2 ...   against   pytest --mcp-debug -n 2 ...
    coverage   pytest -p no:mcpdebug ...        against   pytest --mcp-debug-coverage ...

A run taking longer than the project's ``timeout`` is a hang: its processes are dumped with py-spy,
then killed. Each recorded run is compared with the plain runs of its configuration: every test's
outcome (junit xml) and the exit status, the warnings summary, the lines on stderr. The wall-time
ratio is the median of the pairs' ratios. The raw results go to ``--json`` (rewritten after every run,
so a long run can be watched); the Markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

import outcomes
import saved
from prepare import REPO, cache_dir, prepare, slot
from projects import PROJECTS, Project, by_name
from table import markdown

PLUGINS = Path(__file__).resolve().parent / "plugins"
CONFIGS: dict[str, tuple[list[str], list[str]]] = {
    "serial": (["-p", "no:mcpdebug"], ["--mcp-debug"]),
    "xdist": (["-p", "no:mcpdebug", "-n", "2"], ["--mcp-debug", "-n", "2"]),
    "coverage": (["-p", "no:mcpdebug"], ["--mcp-debug-coverage"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=10, help="pairs per configuration (x3 for a suite that forks)"
    )
    parser.add_argument(
        "--fork-factor", type=int, default=3, help="how many times --runs a forking suite gets"
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--only", action="append", default=[], help="a project's name (repeatable, or a,b)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which of serial,xdist,coverage")
    parser.add_argument(
        "--cache", help="cache folder (default $MCPDEBUG_CORPUS_CACHE or ~/.cache/mcpdebug-corpus)"
    )
    parser.add_argument("--json", help="where the raw results go (default CACHE/results/DATE.json)")
    parser.add_argument("--prepare-only", action="store_true", help="fetch and build the venvs, run nothing")
    parser.add_argument(
        "--table", metavar="JSON", nargs="+", help="print the table of saved results files and stop"
    )
    parser.add_argument(
        "--save-summaries", metavar="JSON", help="with --table: save the runs without each test's outcome"
    )
    args = parser.parse_args()
    if args.table:
        merged = saved.merge([json.loads(Path(p).read_text()) for p in args.table])
        if args.save_summaries:
            saved.save(saved.without_outcomes(merged), Path(args.save_summaries))
        print(markdown(merged))
        return
    names = [n for given in args.only for n in given.split(",") if n]
    projects = by_name(names) if names else list(PROJECTS)
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(sorted(unknown))}; known: {', '.join(CONFIGS)}")
    cache = cache_dir(args.cache)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%MZ")
    path = Path(args.json) if args.json else cache / "results" / f"{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "date": stamp,
        "command": "python benchmarks/corpus/run.py " + " ".join(sys.argv[1:]),
        "commit": _commit(),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "load_at_start": os.getloadavg(),
        "runs": args.runs,
        "jobs": args.jobs,
        "projects": {},
    }
    for project in projects:
        print(f"== {project.name} {project.version}: preparing", flush=True)
        src, bin_dir = prepare(project, cache)
        if args.prepare_only:
            continue
        entry: dict[str, Any] = {
            "version": project.version,
            "covers": list(project.covers),
            "notes": project.notes,
            "deselected": project.deselect,
            "forks": project.forks,
            "configs": {},
        }
        results["projects"][project.name] = entry
        _warm_up(project, src, bin_dir, cache, args.jobs)
        for config in configs:
            pairs = args.runs * (args.fork_factor if project.forks else 1)
            runs = _run_config(project, src, bin_dir, cache, config, pairs, args.jobs, results, path)
            entry["configs"][config] = {"runs": runs, "summary": summarise(runs)}
            saved.save(results, path)
            _print_progress(project, config, entry["configs"][config]["summary"])
    saved.save(results, path)
    if not args.prepare_only:
        print(f"\nraw results: {path}\n")
        print(markdown(results))


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "pytest_mcpdebug"],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "?"


def command(project: Project, bin_dir: Path, extra: list[str], junit: Path) -> list[str]:
    deselect: list[str] = []
    for target in project.deselect:
        if target.endswith((".py", ".yml")) and "::" not in target:
            deselect += ["--ignore", target]
        else:
            deselect += ["--deselect", target]
    plugins = [arg for name in project.plugins for arg in ("-p", name)]
    return [
        str(bin_dir / "pytest"),
        "-p",
        "no:cacheprovider",
        *plugins,
        "-rA",
        f"--junitxml={junit}",
        *extra,
        *deselect,
        *project.args,
    ]


def _default_signals() -> None:
    """In the child: the signals a terminal or a CI runner leaves at their defaults, whatever this
    harness inherited (started with ``nohup`` or ``&`` in a script, SIGHUP or SIGINT are ignored, and an
    exec'd child keeps them ignored: sh's `test_custom_timeout_signal` then fails, plain and recorded)."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _env(tmp: Path, project: Project) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a developer's machine: bytecode cached after the first run
    env["MCPDEBUG_DIR"] = str(tmp / "mcpdebug")
    if project.plugins:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(PLUGINS), env.get("PYTHONPATH")) if x)
    return env


def run_once(
    project: Project, src: Path, bin_dir: Path, cache: Path, extra: list[str], check_record: bool = False
) -> dict[str, Any]:
    """One run of the suite: its wall time, exit status, outcomes, warnings, stderr; a hang's dumps."""
    (cache / "tmp").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{project.name}-", dir=cache / "tmp"))
    junit = tmp / "junit.xml"
    argv = command(project, bin_dir, extra, junit)
    with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=src,
            env=_env(tmp, project),
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=_default_signals,
        )
        hung, dumps = False, []
        try:
            rc = proc.wait(timeout=project.timeout)
        except subprocess.TimeoutExpired:
            hung = True
            dumps = _dump_tree(proc.pid, bin_dir)
            _kill_session(proc.pid)
            rc = proc.wait()
        wall = time.monotonic() - start
    stdout = (tmp / "stdout").read_text(errors="replace")
    stderr = (tmp / "stderr").read_text(errors="replace")
    leftover = _session_processes(proc.pid)
    if leftover:
        _kill_session(proc.pid)
    found = outcomes.junit_outcomes(junit)
    record: dict[str, Any] = {
        "args": extra,
        "wall": round(wall, 3),
        "rc": rc,
        "hung": hung,
        "outcomes": found,
        "failures": outcomes.junit_failures(junit),
        "summary": outcomes.summary_line(stdout),
        "warnings": outcomes.warnings_summary(stdout),
        "stderr": sorted({outcomes.normalise(line) for line in stderr.splitlines() if line.strip()})[:50],
        "plugin_lines": outcomes.plugin_lines(stdout)[:20],
        "leftover_processes": leftover,
        "dumps": dumps,
        "load": os.getloadavg()[0],  # the host's 1-minute load average as the run ended
        "tail": stdout[-3000:] if (hung or rc not in (0, 1, 5)) else "",
    }
    if check_record and not hung:
        record["record_check"] = _check_record(bin_dir, tmp, rc, record["summary"], found)
    shutil.rmtree(tmp, ignore_errors=True)
    return record


def _check_record(bin_dir: Path, tmp: Path, rc: int, summary: str, junit: outcomes.Outcomes | None) -> str:
    """Whether the run's record (`mcpdebug show`, read from the spool) says what pytest said: the exit
    status and the counts of its closing line, and each test's outcome (`--all --json`) as its junit
    report has it. "" if it does, else what differs."""
    problems: list[str] = []
    text = _show(bin_dir, tmp, problems)
    status = next((line for line in text.splitlines() if line.startswith("Run ")), "")
    tests = next((line for line in text.splitlines() if line.startswith("Tests:")), "")
    if f"exit status {rc}" not in status:
        problems.append(f"status line {status!r}, pytest exited {rc}")
    if outcomes.counts(tests) != outcomes.counts(summary):
        problems.append(f"record {tests!r}, pytest {summary!r}")
    shown = _show(bin_dir, tmp, problems, "--all", "--json")
    if shown:
        try:
            listed = json.loads(shown)["tests"]
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"mcpdebug show --json gave no list of tests: {exc}")
        else:
            problems += outcomes.record_differences(listed, junit)
    return "; ".join(problems)


def _show(bin_dir: Path, tmp: Path, problems: list[str], *args: str) -> str:
    """What `mcpdebug show ARGS` prints of the run's folder ("" and a problem if it fails)."""
    try:
        out = subprocess.run(
            [str(bin_dir / "mcpdebug"), "show", *args, "--dir", str(tmp / "mcpdebug")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problems.append(f"mcpdebug show {' '.join(args)} failed: {exc}")
        return ""
    if out.returncode:
        problems.append(f"mcpdebug show {' '.join(args)} exited {out.returncode}: {out.stderr[-300:]}")
    return out.stdout


def _warm_up(project: Project, src: Path, bin_dir: Path, cache: Path, jobs: int) -> None:
    """One plain run in each slot, untimed: bytecode written, a venv's first-import costs paid."""
    for index in range(jobs):
        record = run_once(project, slot(project, src, cache, index), bin_dir, cache, CONFIGS["serial"][0])
        summary = record["summary"] or f"rc {record['rc']}"
        print(f"   warm-up, slot {index}: {summary} ({record['wall']:.1f} s)", flush=True)


def _schedule(pairs: int) -> Iterator[tuple[int, str]]:
    for i in range(pairs):
        yield from ([(i, "plain"), (i, "recorded")] if i % 2 == 0 else [(i, "recorded"), (i, "plain")])


def _run_config(
    project: Project,
    src: Path,
    bin_dir: Path,
    cache: Path,
    config: str,
    pairs: int,
    jobs: int,
    results: dict[str, Any],
    path: Path,
) -> list[dict[str, Any]]:
    plain_args, recorded_args = CONFIGS[config]
    runs: list[dict[str, Any]] = []
    lock = threading.Lock()
    live = results["projects"][project.name]["configs"].setdefault(config, {"runs": runs})

    slots = threading.local()
    taken = iter(range(jobs))

    def one(pair: int, mode: str) -> None:
        if not hasattr(slots, "path"):  # each worker thread of the pool is one slot, its checkout its own
            with lock:
                slots.path = slot(project, src, cache, next(taken))
        recorded = mode == "recorded"
        check = recorded and pair in (0, pairs - 1)  # the record read back: first and last pair
        record = run_once(
            project, slots.path, bin_dir, cache, recorded_args if recorded else plain_args, check
        )
        record.update(pair=pair, mode=mode, finished=time.time())
        with lock:
            runs.append(record)
            live["runs"] = runs
            saved.save(results, path)
        if record["hung"]:
            print(f"   HANG {config} {mode} pair {pair} after {record['wall']:.0f} s", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(one, pair, mode) for pair, mode in _schedule(pairs)]:
            future.result()
    runs.sort(key=lambda r: (r["pair"], r["mode"]))
    return runs


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    plain = [r for r in runs if r["mode"] == "plain"]
    recorded = [r for r in runs if r["mode"] == "recorded"]
    plain_maps = [r["outcomes"] for r in plain if r["outcomes"] is not None and not r["hung"]]
    seen, always = outcomes.allowed(plain_maps)
    plain_rcs = {r["rc"] for r in plain if not r["hung"]}
    plain_warnings = {w for r in plain for w in r["warnings"]}
    plain_stderr = {line for r in plain for line in r["stderr"]}
    mismatches = []
    for r in recorded:
        if r["hung"]:
            continue
        found = outcomes.deviations(r["outcomes"], seen, always)
        if r["rc"] not in plain_rcs:
            found.append(f"exit status {r['rc']} (plain: {sorted(plain_rcs)})")
        if found:
            mismatches.append({"pair": r["pair"], "deviations": found[:20]})
    by_pair: dict[int, dict[str, float]] = {}
    for r in runs:
        if not r["hung"]:
            by_pair.setdefault(r["pair"], {})[r["mode"]] = r["wall"]
    ratios = [p["recorded"] / p["plain"] for p in by_pair.values() if len(p) == 2 and p["plain"] > 0]
    tests = max((len(m) for m in plain_maps), default=0)
    loads = [r["load"] for r in runs if "load" in r]
    return {
        "tests": tests,
        "plain_runs": len(plain),
        "recorded_runs": len(recorded),
        "plain_hangs": sum(r["hung"] for r in plain),
        "hangs": sum(r["hung"] for r in recorded),
        "mismatched_runs": len(mismatches),
        "mismatches": mismatches[:10],
        "plain_varies": outcomes.varying(plain_maps)[:20],
        "plain_exit_statuses": sorted(plain_rcs),
        "new_warnings": sorted({w for r in recorded for w in r["warnings"]} - plain_warnings),
        "new_stderr": sorted({line for r in recorded for line in r["stderr"]} - plain_stderr)[:20],
        "record_checked": sum("record_check" in r for r in recorded),
        "record_differs": [r["record_check"] for r in recorded if r.get("record_check")][:5],
        "plugin_warnings": sorted(
            {line for r in recorded for line in r["plugin_lines"] if "warning" in line.lower()}
        ),
        "recorded_leftovers": sum(bool(r["leftover_processes"]) for r in recorded),
        "plain_leftovers": sum(bool(r["leftover_processes"]) for r in plain),
        "ratio": round(statistics.median(ratios), 3) if ratios else None,
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)] if ratios else None,
        "plain_median_wall": round(statistics.median(r["wall"] for r in plain), 2) if plain else None,
        "load": [round(min(loads), 1), round(statistics.median(loads), 1), round(max(loads), 1)]
        if loads
        else None,
        "summary_line": next((r["summary"] for r in plain if r["summary"]), ""),
    }


def _print_progress(project: Project, config: str, s: dict[str, Any]) -> None:
    print(
        f"   {config}: {s['tests']} tests, {s['recorded_runs']} recorded runs, mismatched "
        f"{s['mismatched_runs']}, "
        f"hangs {s['hangs']} (plain {s['plain_hangs']}), new warnings {len(s['new_warnings'])}, "
        f"new stderr {len(s['new_stderr'])}, ratio {s['ratio']} (plain {s['plain_median_wall']} s)",
        flush=True,
    )


# Processes ------------------------------------------------------------------------------------------


def _session_pids(sid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == sid:
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # session id, not a zombie
            pids.append(int(name))
    return pids


def _session_processes(sid: int, grace: float = 3.0) -> list[str]:
    """Processes of the run's session still alive ``grace`` seconds after pytest exited (its leftovers:
    a multiprocessing resource tracker, say, takes a moment to see its pipe closed and exit)."""
    deadline = time.monotonic() + grace
    while _session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    found = []
    for pid in _session_pids(sid):
        try:
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except OSError:
            continue
    return found


def _dump_tree(sid: int, bin_dir: Path) -> list[str]:
    """py-spy dumps of the hung run's processes (py-spy comes with the plugin)."""
    spy = bin_dir / "py-spy"
    dumps = []
    for pid in ([sid, *_session_pids(sid)])[:6]:
        try:
            out = subprocess.run(
                [str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
            )
            dumps.append(f"pid {pid}:\n{out.stdout[-6000:]}{out.stderr[-500:]}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            dumps.append(f"pid {pid}: py-spy failed: {exc}")
    return dumps


def _kill_session(sid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(sid, signal.SIGKILL)
    for pid in _session_pids(sid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
