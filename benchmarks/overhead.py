"""Measure what `pytest --mcp-debug` costs against plain pytest and pytest-timeout, in alternating pairs.

Every run is a fresh `python -m pytest` subprocess, so the figures include interpreter start-up and
plugin import, which is what a user waits for. Each mode is measured in *pairs* with plain pytest,
run back to back in alternating order (plain first in one pair, second in the next): the ratio of
a pair is taken between two runs a second apart, so a background job or slow drift on a shared
machine shifts both sides of it, and the median of the per-pair ratios is the figure. Beside the
wall time, the child's user+system CPU time (``os.wait4``) is reported: it is steadier when other
jobs compete for the cores. Bytecode is cached (in the temp dir) as on a developer's machine.

Two suites are measured: N trivial tests (the per-test cost) and one test (start-up, as the
median of the per-pair differences in milliseconds). Each wall median comes with a 95% confidence
interval (order statistics, no assumption about the noise's shape): where a target lies inside it, the
pairs have not resolved whether it is met.

Usage: python benchmarks/overhead.py [--tests 2000] [--pairs 9] [--startup-pairs 27]
       [--modes pytest-timeout,...] [--markdown FILE] [--save FILE] [--phases]
       python benchmarks/overhead.py --pool FILE [FILE ...]

The one-test suite gets three times the pairs by default: its pairs are quick, and the start-up's
target (+20 ms) is about as large as what a 45-pair median moves by from run to run on this project's
shared 2-core VM. ``--save`` keeps every pair's timings, and ``--pool`` reads several runs' back into
one table: the pooled median of many runs' pairs, not the best of them.

``--phases`` loads `segments.py`'s probe into every run, plain pytest's too, and adds a table of
where each mode's extra time goes, phase by phase, in the same pairs: the whole-run ratios and the
phases then come from the same runs (the probe's few hooks cost every mode alike).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Run as `python benchmarks/overhead.py`: the script's folder is on sys.path, so this resolves.
from gen_suite import generate

MODES = ("plain", "pytest-timeout", "mcpdebug-spool", "mcpdebug-stream")
MCPDEBUG_MODES = ("mcpdebug-spool", "mcpdebug-stream")
MODE_ARGS: dict[str, list[str]] = {
    # `-p no:mcpdebug` keeps the baselines free of the plugin once it is installed; harmless before.
    "plain": ["-p", "no:mcpdebug"],
    "pytest-timeout": ["--timeout=60", "-p", "no:mcpdebug"],
    "mcpdebug-spool": ["--mcp-debug"],
    "mcpdebug-stream": ["--mcp-debug"],
}
SERVER_START_TIMEOUT = 15.0
RUN_TIMEOUT = 900.0


class BenchmarkError(RuntimeError):
    """A run or the server misbehaved, so the timings would be meaningless."""


def clean_env() -> dict[str, str]:
    """Copy the caller's environment minus MCPDEBUG* and PYTEST_* variables.

    Otherwise a caller's PYTEST_ADDOPTS, PYTEST_DISABLE_PLUGIN_AUTOLOAD or MCPDEBUG_DIR (e.g. when
    this script runs inside a test) would silently change what is being measured.
    """
    return {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}


def bytecode_env(env: dict[str, str], prefix: Path) -> dict[str, str]:
    """Let the runs cache bytecode (in a folder of ours), as a developer's Python does by default.

    With PYTHONDONTWRITEBYTECODE set (some sandboxes set it) pytest re-rewrites the asserts of every
    plugin module (hypothesis, anyio, ...) on each run: over a second of start-up that is the same
    in every mode and would make the ratios look smaller than a user sees them.
    """
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def nproc() -> int:
    """CPUs this process may use (what `nproc` prints), falling back to the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def plugin_installed(name: str) -> bool:
    """Whether a pytest11 entry point called NAME is installed for this Python."""
    return any(ep.name == name for ep in importlib.metadata.entry_points(group="pytest11"))


def log_tail(path: Path, lines: int = 30) -> str:
    """Last lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


@contextlib.contextmanager
def running_server(
    serverdir: Path, log_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, object]]]:
    """Start `mcpdebug serve --http` for the duration of the block; yield it and its server.json."""
    exe = Path(sys.executable).parent / "mcpdebug"
    if not exe.exists():
        raise BenchmarkError(f"{exe} not found: install the project (pip install -e .) first")
    serverdir.mkdir(parents=True, exist_ok=True)
    # An empty folder given to --dir is a project folder: the store is its .mcpdebug (issue 19).
    info_path = (serverdir if serverdir.name == ".mcpdebug" else serverdir / ".mcpdebug") / "server.json"
    cmd = [str(exe), "serve", "--http", "--port", "0", "--dir", str(serverdir)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    info: dict[str, object] = {}
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise BenchmarkError(f"server exited with {proc.returncode}:\n{log_tail(log_path)}")
            if info_path.exists():
                # The file may be caught half-written; keep polling until it parses with all keys.
                with contextlib.suppress(OSError, ValueError):
                    data = json.loads(info_path.read_text())
                    if isinstance(data, dict) and {"url", "token", "pid"} <= data.keys():
                        info = data
                        break
            if time.monotonic() > deadline:
                raise BenchmarkError(
                    f"no usable {info_path} after {SERVER_START_TIMEOUT:.0f} s:\n{log_tail(log_path)}"
                )
            time.sleep(0.05)
        print(f"server up at {info['url']} (pid {info['pid']})", file=sys.stderr)
        yield proc, info
    finally:
        stop_server(proc, info)


def stop_server(proc: subprocess.Popen[bytes], info: dict[str, object]) -> None:
    """SIGTERM the server we started (and the pid it advertised, if it forked), then reap it."""
    pid = info.get("pid")
    if isinstance(pid, int) and pid != proc.pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print("server ignored SIGTERM for 10 s; killing it", file=sys.stderr)
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    """User + system CPU seconds of the child (and of the children it waited for, e.g. git)."""
    started: float = 0.0
    """`time.perf_counter()` when the child was started (the clock `segments`' probe stamps with)."""
    marks: dict[str, tuple[float, float]] | None = None
    """With ``--phases``: (wall clock, test thread's CPU) at each boundary `segments.SEGMENTS` names."""


def time_run(
    cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT
) -> tuple[Timing, str, int]:
    """Time one subprocess (stdin closed, stderr into stdout): its timing, output and exit code."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    return Timing(wall, usage.ru_utime + usage.ru_stime, start), output, proc.returncode


def run_timed(
    cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT
) -> tuple[float, float, str, int]:
    """(wall seconds, CPU seconds, output, exit code) of one subprocess (the other benchmarks' form)."""
    timing, output, code = time_run(cmd, cwd, env, timeout)
    return timing.wall, timing.cpu, output, code


def run_once(
    mode: str, suite: Path, n_tests: int, env: dict[str, str], extra: tuple[str, ...] = ()
) -> Timing:
    """Run the suite once in MODE; fail loudly unless every test passed."""
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd = [*pytest, *extra, *MODE_ARGS[mode], str(suite)]
    timing, output, code = time_run(cmd, suite, env)
    if code != 0 or f"{n_tests} passed" not in output:
        tail = "\n".join(output.splitlines()[-30:])
        raise BenchmarkError(f"{mode}: exit code {code} for {shlex.join(cmd)}\n{tail}")
    return timing


@dataclass
class Pairs:
    """One mode against plain pytest: the timings of each pair."""

    plain: list[Timing] = field(default_factory=list)
    mode: list[Timing] = field(default_factory=list)

    def ratios(self, what: str) -> list[float]:
        return [getattr(m, what) / getattr(p, what) for p, m in zip(self.plain, self.mode, strict=True)]

    def deltas_ms(self, what: str) -> list[float]:
        return [
            1000 * (getattr(m, what) - getattr(p, what)) for p, m in zip(self.plain, self.mode, strict=True)
        ]


class Runner:
    """Runs a mode on a suite with the right environment (a spool folder of its own, the server's)."""

    def __init__(
        self,
        workdir: Path,
        env: dict[str, str],
        serverdir: Path,
        server: subprocess.Popen[bytes] | None,
        phases: bool = False,
    ) -> None:
        self.workdir, self.env, self.serverdir, self.server = workdir, env, serverdir, server
        self.runs = 0
        self.marks_file: Path | None = None
        if phases:  # every run, plain included, loads `segments`' probe
            from segments import PROBE

            plugins = workdir / "plugins"
            plugins.mkdir(exist_ok=True)
            (plugins / "segments_probe.py").write_text(PROBE)
            self.marks_file = workdir / "marks.txt"
            path = os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH", "")]))
            self.env = {**env, "PYTHONPATH": path, "SEGMENTS_OUT": str(self.marks_file)}

    def __call__(self, mode: str, suite: Path, n_tests: int) -> Timing:
        env = dict(self.env)
        spooldir: Path | None = None
        if mode == "mcpdebug-spool":
            self.runs += 1
            spooldir = self.workdir / f"spool-{self.runs:03d}"
            spooldir.mkdir()
            env["MCPDEBUG_DIR"] = str(spooldir)
        elif mode == "mcpdebug-stream":
            env["MCPDEBUG_DIR"] = str(self.serverdir)
        extra = ("-p", "segments_probe") if self.marks_file is not None else ()
        timing = run_once(mode, suite, n_tests, env, extra)
        if self.marks_file is not None:
            timing = with_marks(timing, self.marks_file)
        if mode == "mcpdebug-stream" and self.server is not None and self.server.poll() is not None:
            # The plugin would quietly fall back to spooling, so the timing would be mislabelled.
            raise BenchmarkError(f"server died during the run:\n{log_tail(self.workdir / 'server.log')}")
        if spooldir is not None:
            if not any(spooldir.iterdir()):
                print(f"warning: {mode} wrote nothing to {spooldir}", file=sys.stderr)
            shutil.rmtree(spooldir, ignore_errors=True)
        return timing


def with_marks(timing: Timing, marks_file: Path) -> Timing:
    """The timing with the phase boundaries the probe wrote, and the process's start and end."""
    from segments import read_marks

    marks = read_marks(marks_file, timing.started, timing.started + timing.wall)
    return Timing(timing.wall, timing.cpu, timing.started, marks)


def render_phases(results: dict[tuple[str, str], Pairs]) -> str:
    """Markdown: where each mode's extra time goes, phase by phase, in the same pairs (``--phases``):
    the median over the pairs of the mode's phase minus plain's, wall and the test thread's CPU (ms)."""
    from segments import phase_table

    tables = []
    for suite in dict.fromkeys(suite for suite, _ in results):
        pairs = {
            mode: [
                (p.marks, m.marks)
                for p, m in zip(found.plain, found.mode, strict=True)
                if p.marks and m.marks
            ]
            for (s, mode), found in results.items()
            if s == suite
        }
        pairs = {mode: marks for mode, marks in pairs.items() if marks}
        if pairs:
            tables.append("\n".join(phase_table(pairs, f"{suite}: phase")))
    return "\n\n".join(tables)


def benchmark(
    modes: list[str],
    suites: dict[str, tuple[Path, int, int]],
    warmup: int,
    workdir: Path,
    phases: bool = False,
) -> dict[tuple[str, str], Pairs]:
    """For each suite (path, tests, pairs) and mode, that many pairs (plain, mode) in alternating order,
    after WARMUP rounds. The rounds are as many as the most pairs asked of a suite; a suite with fewer
    has its pairs spread evenly over them, so every suite's pairs span the whole run's drift."""
    env = bytecode_env(clean_env(), workdir / "pycache")
    results = {(suite, mode): Pairs() for suite in suites for mode in modes}
    rounds = max(pairs for _, _, pairs in suites.values())
    with contextlib.ExitStack() as stack:
        serverdir = workdir / "server"
        server: subprocess.Popen[bytes] | None = None
        if "mcpdebug-stream" in modes:
            server, _ = stack.enter_context(running_server(serverdir, workdir / "server.log"))
        run = Runner(workdir, env, serverdir, server, phases)
        done = dict.fromkeys(suites, -warmup)  # pairs begun per suite (negative: warm-up rounds)
        for number in range(warmup + rounds):
            for name, (suite, n_tests, pairs) in suites.items():
                due = pairs * (number - warmup + 1) // rounds if number >= warmup else done[name] + 1
                while done[name] < due:
                    index, done[name] = done[name], done[name] + 1
                    label = f"pair {index + 1}/{pairs}" if index >= 0 else f"warm-up {index + warmup + 1}"
                    for mode in modes[index % len(modes) :] + modes[: index % len(modes)]:
                        plain, other = run_pair(run, mode, suite, n_tests, plain_first=index % 2 == 0)
                        print(
                            f"{label:>11} {name:<8} {mode:<15} plain {plain.wall:.3f} s, "
                            f"it {other.wall:.3f} s, ratio {other.wall / plain.wall:5.3f} "
                            f"(CPU {other.cpu / plain.cpu:5.3f})",
                            file=sys.stderr,
                        )
                        if index >= 0:
                            results[name, mode].plain.append(plain)
                            results[name, mode].mode.append(other)
    return results


def run_pair(
    run: Runner, mode: str, suite: Path, n_tests: int, *, plain_first: bool
) -> tuple[Timing, Timing]:
    """One pair, back to back: (plain's timing, the mode's)."""
    if plain_first:
        return run("plain", suite, n_tests), run(mode, suite, n_tests)
    other = run(mode, suite, n_tests)
    return run("plain", suite, n_tests), other


def save(results: dict[tuple[str, str], Pairs], path: Path) -> None:
    """The pairs' raw timings as JSON, for `--pool` to read back with other runs'."""
    rows = [
        {
            "suite": suite,
            "mode": mode,
            "pairs": [[p.wall, p.cpu, m.wall, m.cpu] for p, m in zip(pairs.plain, pairs.mode, strict=True)],
        }
        for (suite, mode), pairs in results.items()
    ]
    path.write_text(json.dumps(rows) + "\n")


def load_saved(paths: list[Path]) -> dict[tuple[str, str], Pairs]:
    """Several runs' saved pairs, pooled per suite and mode (`--pool`)."""
    results: dict[tuple[str, str], Pairs] = {}
    for path in paths:
        for row in json.loads(path.read_text()):
            pairs = results.setdefault((row["suite"], row["mode"]), Pairs())
            for plain_wall, plain_cpu, mode_wall, mode_cpu in row["pairs"]:
                pairs.plain.append(Timing(plain_wall, plain_cpu))
                pairs.mode.append(Timing(mode_wall, mode_cpu))
    return results


def _spread(values: list[float]) -> str:
    """The middle half of the values (quartiles), or min-max for fewer than 4."""
    if len(values) < 4:
        return f"{min(values):.3f}-{max(values):.3f}"
    q = statistics.quantiles(values, n=4)
    return f"{q[0]:.3f}-{q[2]:.3f}"


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of what ``values`` sample: the k-th
    smallest and k-th largest value, k the largest for which a Binomial(n, 1/2) count falls below k
    with probability at most (1 - level) / 2 (so the interval covers the median with probability
    ``level`` or more, whatever the distribution). None when there are too few values (n < 6 at 95%)."""
    n = len(values)
    tail, k = 0.0, 0
    while True:
        tail += math.comb(n, k) / 2**n  # P(count <= k)
        if tail > (1 - level) / 2:
            break
        k += 1
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def _interval(values: list[float]) -> str:
    interval = median_interval(values)
    return "n/a" if interval is None else f"{interval[0]:.3f}-{interval[1]:.3f}"


def render_table(results: dict[tuple[str, str], Pairs]) -> str:
    """Markdown: per suite and mode, the median per-pair ratio (wall, CPU) with its quartiles, and how
    sure the wall median is (a 95% interval: a target inside it is not resolved by these pairs)."""
    rows = [
        "| suite | mode | pairs | plain wall (s) | wall ratio (median) | wall median, 95% interval "
        "| wall quartiles | CPU ratio (median) | CPU quartiles | vs pytest-timeout (wall / CPU) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (suite, mode), pairs in results.items():
        wall, cpu = pairs.ratios("wall"), pairs.ratios("cpu")
        base = results.get((suite, "pytest-timeout"))
        versus = "n/a"
        if base is not None and mode != "pytest-timeout":
            versus = (
                f"{statistics.median(wall) / statistics.median(base.ratios('wall')):.3f}x / "
                f"{statistics.median(cpu) / statistics.median(base.ratios('cpu')):.3f}x"
            )
        extra = ""
        if suite == "start-up":
            wall_ms, cpu_ms = (statistics.median(pairs.deltas_ms(what)) for what in ("wall", "cpu"))
            extra = f" ({wall_ms:+.0f} ms; CPU {cpu_ms:+.0f} ms)"
        rows.append(
            f"| {suite} | {mode} | {len(wall)} | {statistics.median(p.wall for p in pairs.plain):.3f} "
            f"| {statistics.median(wall):.3f}x{extra} | {_interval(wall)} | {_spread(wall)} "
            f"| {statistics.median(cpu):.3f}x "
            f"| {_spread(cpu)} | {versus} |"
        )
    return "\n".join(rows)


def heading(n_tests: int, load: tuple[float, float]) -> str:
    """Context a stored result needs to be comparable: when, where, how big, how busy, how it was run."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    pytest_version = importlib.metadata.version("pytest")
    command = shlex.join([sys.executable, *sys.argv])
    return (
        f"## {when}: Python {platform.python_version()}, pytest {pytest_version}, "
        f"nproc {nproc()}, {n_tests} tests, load average {load[0]:.2f} before, {load[1]:.2f} after\n\n"
        f"```\n{command}\n```"
    )


def pick_modes(spec: str | None) -> list[str]:
    """Resolve --modes (each is compared with plain pytest); without it, every installed one."""
    compared = [m for m in MODES if m != "plain"]
    if spec:
        modes = [m.strip() for m in spec.split(",") if m.strip() and m.strip() != "plain"]
        unknown = [m for m in modes if m not in compared]
        if unknown:
            raise SystemExit(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(compared)}")
        explicit = True
    else:
        modes, explicit = compared, False
    missing = {
        "pytest-timeout": importlib.util.find_spec("pytest_timeout") is None,
        **{m: not plugin_installed("mcpdebug") for m in MCPDEBUG_MODES},
    }
    skipped = [m for m in modes if missing.get(m)]
    if skipped and explicit:
        raise SystemExit(f"plugin not installed for mode(s): {', '.join(skipped)}")
    for m in skipped:
        print(f"skipping {m}: its plugin is not installed", file=sys.stderr)
    modes = [m for m in modes if m not in skipped]
    if not modes:
        raise SystemExit("no modes left to run")
    return list(dict.fromkeys(modes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=2000, help="tests in the generated suite (2000)")
    parser.add_argument("--pairs", type=int, default=9, help="timed pairs per mode and suite (9)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first, to warm caches (1)")
    parser.add_argument("--modes", help=f"comma-separated subset of {','.join(MODES[1:])} (default: all)")
    parser.add_argument(
        "--startup-pairs",
        type=int,
        help="timed pairs of the one-test (start-up) suite (3 x --pairs: a pair is ~4 times quicker, and a"
        " start-up's difference of ~20 ms is as large as a 45-pair median's noise on a shared 2-core VM)",
    )
    parser.add_argument("--no-startup", action="store_true", help="skip the one-test (start-up) suite")
    parser.add_argument("--save", type=Path, metavar="FILE", help="write every pair's timings to FILE (JSON)")
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="run nothing: print the table of the pairs several --save runs wrote, pooled",
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="append the results to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (suite, server log)")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="load segments.py's probe into every run (plain too) and show where each mode's extra goes",
    )
    args = parser.parse_args(argv)
    startup_pairs = 3 * args.pairs if args.startup_pairs is None else args.startup_pairs
    if args.tests < 1 or args.pairs < 1 or startup_pairs < 1 or args.warmup < 0:
        parser.error("--tests, --pairs and --startup-pairs must be >= 1, --warmup >= 0")
    if args.pool:
        try:
            print(render_table(load_saved(args.pool)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--pool: cannot read the saved pairs ({exc}); give files written by --save")
        return 0
    modes = pick_modes(args.modes)

    workdir = Path(tempfile.mkdtemp(prefix="mcpdebug-bench-"))
    suites = {f"{args.tests} tests": (workdir / "suite", args.tests, args.pairs)}
    generate(args.tests, workdir / "suite")
    if not args.no_startup:
        suites["start-up"] = (workdir / "one", 1, startup_pairs)
        generate(1, workdir / "one")
    load_before = os.getloadavg()[0]
    print(f"load average {load_before:.2f}", file=sys.stderr)
    try:
        results = benchmark(modes, suites, args.warmup, workdir, args.phases)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    if args.save:
        save(results, args.save)
        print(f"saved the pairs to {args.save} (pool runs with --pool)", file=sys.stderr)
    table = render_table(results)
    if args.phases:
        table += "\n\n" + render_phases(results)
    load = (load_before, os.getloadavg()[0])
    print(table)
    print(f"load average {load[0]:.2f} before, {load[1]:.2f} after", file=sys.stderr)
    if args.markdown:
        with args.markdown.open("a") as fh:
            fh.write(f"{heading(args.tests, load)}\n\n{table}\n\n")
        print(f"appended to {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
