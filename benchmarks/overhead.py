"""Measure the wall-clock overhead of `pytest --mcp-debug` against plain pytest and pytest-timeout.

Every run is a fresh `python -m pytest` subprocess on a generated suite of trivial tests, so the
numbers include interpreter start-up and plugin import, which is what a user actually waits for.
Modes are interleaved round-robin (not run back to back) so slow drift on the machine, such as
thermal throttling or a background job, hits every mode alike instead of skewing one of them.

Usage: python benchmarks/overhead.py [--tests 2000] [--repeats 5] [--modes plain,...] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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
    info_path = serverdir / "server.json"
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


def run_timed(
    cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT
) -> tuple[float, float, str, int]:
    """Wall and CPU seconds of one subprocess (stdin closed, stderr into stdout), its output and exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout, proc.returncode


def run_once(mode: str, suite: Path, n_tests: int, env: dict[str, str]) -> float:
    """Run the suite once in MODE and return wall seconds; fail loudly unless every test passed."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODE_ARGS[mode], str(suite)]
    elapsed, _, output, code = run_timed(cmd, suite, env)
    if code != 0 or f"{n_tests} passed" not in output:
        tail = "\n".join(output.splitlines()[-30:])
        raise BenchmarkError(f"{mode}: exit code {code} for {shlex.join(cmd)}\n{tail}")
    return elapsed


def benchmark(
    modes: list[str], n_tests: int, repeats: int, warmup: int, workdir: Path
) -> dict[str, list[float]]:
    """Time every mode REPEATS times, round-robin, after WARMUP untimed rounds."""
    suite = workdir / "suite"
    generate(n_tests, suite)
    base_env = bytecode_env(clean_env(), suite.parent / "pycache")
    times: dict[str, list[float]] = {m: [] for m in modes}

    with contextlib.ExitStack() as stack:
        serverdir = workdir / "server"
        server: subprocess.Popen[bytes] | None = None
        if "mcpdebug-stream" in modes:
            server, _ = stack.enter_context(running_server(serverdir, workdir / "server.log"))

        run_no = 0
        for rep in range(warmup + repeats):
            timed = rep >= warmup
            # Rotate the starting mode each round so no mode always runs first (or last).
            order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
            for mode in order:
                env = dict(base_env)
                spooldir: Path | None = None
                if mode == "mcpdebug-spool":
                    run_no += 1
                    spooldir = workdir / f"spool-{run_no:03d}"
                    spooldir.mkdir()
                    env["MCPDEBUG_DIR"] = str(spooldir)
                elif mode == "mcpdebug-stream":
                    env["MCPDEBUG_DIR"] = str(serverdir)
                elapsed = run_once(mode, suite, n_tests, env)
                if mode == "mcpdebug-stream" and server is not None and server.poll() is not None:
                    # The plugin would quietly fall back to spooling, so the timing would be mislabelled.
                    raise BenchmarkError(f"server died during the run:\n{log_tail(workdir / 'server.log')}")
                label = f"round {rep - warmup + 1}/{repeats}" if timed else f"warm-up {rep + 1}/{warmup}"
                print(f"{label:>14}  {mode:<16} {elapsed:7.3f} s", file=sys.stderr)
                if timed:
                    times[mode].append(elapsed)
                if spooldir is not None:
                    if not any(spooldir.iterdir()):
                        print(f"warning: {mode} wrote nothing to {spooldir}", file=sys.stderr)
                    shutil.rmtree(spooldir, ignore_errors=True)
    return times


def render_table(times: dict[str, list[float]]) -> str:
    """Markdown table of median/min per mode and the median ratios to the two baselines."""
    medians = {m: statistics.median(t) for m, t in times.items()}

    def ratio(mode: str, base: str) -> str:
        return f"{medians[mode] / medians[base]:.2f}x" if base in medians else "n/a"

    rows = [
        "| mode | runs | median (s) | min (s) | vs plain | vs pytest-timeout |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, samples in times.items():
        rows.append(
            f"| {mode} | {len(samples)} | {medians[mode]:.3f} | {min(samples):.3f} "
            f"| {ratio(mode, 'plain')} | {ratio(mode, 'pytest-timeout')} |"
        )
    return "\n".join(rows)


def heading(n_tests: int) -> str:
    """Context a stored result needs to be comparable: when, where, how big, and how it was run."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    pytest_version = importlib.metadata.version("pytest")
    command = shlex.join([sys.executable, *sys.argv])
    return (
        f"## {when}: Python {platform.python_version()}, pytest {pytest_version}, "
        f"nproc {nproc()}, {n_tests} tests\n\n"
        f"```\n{command}\n```"
    )


def pick_modes(spec: str | None) -> list[str]:
    """Resolve --modes; without it, run every mode whose plugin is installed."""
    if spec:
        modes = [m.strip() for m in spec.split(",") if m.strip()]
        unknown = [m for m in modes if m not in MODES]
        if unknown:
            raise SystemExit(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
        explicit = True
    else:
        modes, explicit = list(MODES), False
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
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per mode (5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first, to warm caches (1)")
    parser.add_argument("--modes", help=f"comma-separated subset of {','.join(MODES)} (default: all)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="append the results to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (suite, server log)")
    args = parser.parse_args(argv)
    if args.tests < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--tests and --repeats must be >= 1, --warmup >= 0")
    modes = pick_modes(args.modes)

    workdir = Path(tempfile.mkdtemp(prefix="mcpdebug-bench-"))
    try:
        times = benchmark(modes, args.tests, args.repeats, args.warmup, workdir)
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    table = render_table(times)
    print(table)
    if args.markdown:
        with args.markdown.open("a") as fh:
            fh.write(f"{heading(args.tests)}\n\n{table}\n\n")
        print(f"appended to {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
