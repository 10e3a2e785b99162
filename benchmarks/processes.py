"""Measure process sessions (issue 13): `mcpdebug run` throughput, line latency, and a sustained load.

1. Throughput: a Python command printing N lines of 100 bytes (default 1,000,000, ~100 MB) alone
   (stdout to /dev/null) and under `mcpdebug run` (its copy to /dev/null), streaming to a running
   `mcpdebug serve --http --port 0 --max-test-output 1GB`, interleaved round-robin after a warm-up
   round. Wall time includes the runner waiting for the server to confirm the last lines. CPU
   seconds of the measured processes (and the server's share) are reported beside: on a shared
   2-core machine they move less than wall time. Every run is checked to have stored all N lines.
2. Latency: a `mcpdebug run` session printing a line with its own timestamp every 0.25 s; an MCP
   client over streamable HTTP calls `get_logs(labels=[label], lines=1)` in a loop; a line's latency
   is from its timestamp to the first reply showing it.
3. Load: three `mcpdebug run` sessions, each printing RATE lines per second (default 10,000) for
   SECONDS (default 60); the server's VmRSS is sampled every 0.5 s and its VmHWM read at the end;
   then each session must have stored exactly RATE x SECONDS lines, in order.

Usage: python benchmarks/processes.py [--lines 1000000] [--repeats 5] [--seconds 60] [--rate 10000]
       [--only throughput,latency,load] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Run as `python benchmarks/processes.py`: the script's folder is on sys.path, so these resolve.
from output import RssSampler, proc_status
from overhead import BenchmarkError, bytecode_env, clean_env, log_tail, nproc, stop_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))

PRINTER = """
import sys
pad = "abcdefghij" * 8
for i in range(int(sys.argv[1])):
    print(f"line {i:07d} payload {pad}")
"""  # 100 bytes a line with its newline

LOGGER = """
import logging, sys
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=FORMAT)
log = logging.getLogger("app.requests")
for i in range(int(sys.argv[1])):
    log.info("GET /items/%d answered 200 in %.1f ms", i, (i % 97) / 3)
"""  # a service logging each request: about 90 bytes a line

TICKER = """
import sys, time
for i in range(int(sys.argv[1])):
    print(f"tick {i} at {time.time():.6f}", flush=True)
    time.sleep(0.25)
"""

PACED = """
import sys, time
rate, seconds, tag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
total = int(rate * seconds)
start, n = time.monotonic(), 0
while n < total:
    due = min(total, int((time.monotonic() - start) * rate) + 1)
    while n < due:
        print(f"{tag} {n:08d} a log line of a service under load, some padding here")
        n += 1
    sys.stdout.flush()
    time.sleep(0.005)
"""


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    info: dict[str, object]
    directory: Path
    mcp_url: str

    @property
    def pid(self) -> int:
        pid = self.info.get("pid")
        return pid if isinstance(pid, int) else self.proc.pid


@contextlib.contextmanager
def running_server(directory: Path, env: dict[str, str]) -> Iterator[Server]:
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory.parent / "serve.log"
    cmd = [MCPDEBUG, "serve", "--http", "--port", "0", "--dir", str(directory), "--max-test-output", "1GB"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    info: dict[str, object] = {}
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise BenchmarkError(f"server exited with {proc.returncode}:\n{log_tail(log_path)}")
            with contextlib.suppress(OSError, ValueError):
                info = json.loads((directory / "server.json").read_text())
            found = re.search(r"(http://\S+/mcp)\b", log_path.read_text(errors="replace"))
            if info and found:
                break
            if time.monotonic() > deadline:
                raise BenchmarkError(f"server not up after 20 s:\n{log_tail(log_path)}")
            time.sleep(0.05)
        yield Server(proc, info, directory, found[1])
    finally:
        stop_server(proc, info)


def stored_lines(directory: Path, run_id: str) -> list[bytes]:
    from mcpdebug.store import Store

    store = Store(directory)
    try:
        row = store.db.execute("SELECT id FROM outputs WHERE run_id=? AND unit=''", (run_id,)).fetchone()
        return [] if row is None else store.outputs.path(run_id, row[0]).read_bytes().splitlines()
    finally:
        store.close()


def session_ids(directory: Path) -> dict[str, str]:
    """label -> run id of the process sessions in the store."""
    from mcpdebug.store import Store

    store = Store(directory)
    try:
        return {s["label"]: s["run_id"] for s in store.process_sessions()}
    finally:
        store.close()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# 1. Throughput -------------------------------------------------------------------------------------------


WORKLOADS = {"print": PRINTER, "print-unbuffered": PRINTER, "logging": LOGGER}
"""``print-unbuffered`` runs with PYTHONUNBUFFERED=1 (as Docker images and this sandbox set it: a write
per line and per newline); the others without it, as a developer's shell runs them."""
MODES = ("alone", "pipe", "run")
"""alone: stdout to /dev/null; pipe: ``| cat > /dev/null`` (what any reader of its output costs);
run: under `mcpdebug run`, its copy of the output to /dev/null."""


def throughput(work: Path, env: dict[str, str], lines: int, repeats: int) -> str:
    times = {(w, m): [] for w in WORKLOADS for m in MODES}  # type: dict[tuple[str, str], list[float]]
    cpus = {(w, m): [] for w in WORKLOADS for m in MODES}  # type: dict[tuple[str, str], list[float]]
    server_cpu: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    with running_server(work / "tp" / ".mcpdebug", env) as server:
        for round_ in range(repeats + 1):  # round 0 warms caches and is not counted
            for workload, source in WORKLOADS.items():
                script = work / f"workload_{workload}.py"  # not logging.py: it would shadow logging
                script.write_text(source)
                run_env = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}
                if workload.endswith("-unbuffered"):
                    run_env["PYTHONUNBUFFERED"] = "1"
                for mode in MODES:
                    label = f"{workload}-{round_}"
                    command = [sys.executable, str(script), str(lines)]
                    if mode == "run":
                        command = [
                            MCPDEBUG,
                            "run",
                            "--dir",
                            str(server.directory),
                            "--label",
                            label,
                            "--",
                            *command,
                        ]
                    elif mode == "pipe":
                        command = ["sh", "-c", f"{shlex.join(command)} | cat > /dev/null"]
                    before, server_before, start = children_cpu(), proc_cpu(server.pid), time.perf_counter()
                    subprocess.run(
                        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=run_env, check=True
                    )
                    elapsed, cpu = time.perf_counter() - start, children_cpu() - before
                    if mode == "run":
                        check_stored(server.directory, label, lines)
                    if round_ == 0:
                        continue
                    times[workload, mode].append(elapsed)
                    cpus[workload, mode].append(cpu)
                    if mode == "run":
                        server_cpu[workload].append(proc_cpu(server.pid) - server_before)
                    print(
                        f"{workload} {mode:5} round {round_}: {elapsed:.2f} s, {cpu:.2f} s CPU",
                        file=sys.stderr,
                    )
    rows = [
        "| command | mode | median wall | all walls | CPU (median) | wall against alone |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for workload in WORKLOADS:
        alone = statistics.median(times[workload, "alone"])
        for mode in MODES:
            wall = statistics.median(times[workload, mode])
            cpu = f"{statistics.median(cpus[workload, mode]):.2f} s"
            if mode == "run":
                cpu += f" + server {statistics.median(server_cpu[workload]):.2f} s"
            ratio = f"{wall / alone:.2f}x" if mode != "alone" else ""
            rows.append(
                f"| {workload} | {MODE_NAMES[mode]} | {wall:.2f} s | "
                f"{', '.join(f'{t:.2f}' for t in times[workload, mode])} | {cpu} | "
                f"{'**' + ratio + '**' if mode == 'run' else ratio} |"
            )
    return (
        f"Throughput: {lines:,} lines, {repeats} interleaved rounds (target for `mcpdebug run`: at most 1.3x "
        "the command alone)\n\n" + "\n".join(rows)
    )


MODE_NAMES = {"alone": "alone (> /dev/null)", "pipe": "`\\| cat > /dev/null`", "run": "`mcpdebug run`"}


def check_stored(directory: Path, label: str, lines: int) -> None:
    stored = stored_lines(directory, session_ids(directory)[label])
    if len(stored) != lines:
        raise BenchmarkError(f"{label}: {len(stored)} of {lines} lines stored")


# 2. Latency ------------------------------------------------------------------------------------------------


def latency(work: Path, env: dict[str, str], ticks: int = 20) -> str:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    ticker = work / "ticker.py"
    ticker.write_text(TICKER)
    with running_server(work / "lat" / ".mcpdebug", env) as server:
        command = [sys.executable, str(ticker), str(ticks)]
        runner = subprocess.Popen(
            [MCPDEBUG, "run", "--dir", str(server.directory), "--quiet", "--label", "ticker", "--", *command],
            env=env,
        )
        seen: dict[int, float] = {}

        async def poll() -> None:
            headers = {"Authorization": f"Bearer {server.info.get('mcp_token', '')}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
                Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
            ):
                while runner.poll() is None or len(seen) < ticks:
                    result = await client.call_tool("get_logs", {"labels": ["ticker"], "lines": 1})
                    now = time.time()
                    for match in re.finditer(r"tick (\d+) at (\d+\.\d+)", result.content[0].text):
                        seen.setdefault(int(match[1]), now - float(match[2]))
                    if runner.poll() is not None and len(seen) < ticks and now > deadline:
                        break
                    await anyio.sleep(0.01)

        deadline = time.time() + ticks * 0.25 + 15
        anyio.run(poll)
        runner.wait(30)
    found = sorted(seen.values())
    if len(found) < ticks * 0.9:
        raise BenchmarkError(f"only {len(found)} of {ticks} ticks seen")
    p95 = found[min(len(found) - 1, round(0.95 * (len(found) - 1)))]
    return (
        f"Latency, printed to visible in `get_logs` over streamable HTTP ({len(found)} lines, polled every "
        f"10 ms): median **{statistics.median(found) * 1000:.0f} ms**, p95 {p95 * 1000:.0f} ms, max "
        f"{found[-1] * 1000:.0f} ms (target at most 200 ms)"
    )


# 3. Load -------------------------------------------------------------------------------------------------


def load(work: Path, env: dict[str, str], rate: int, seconds: float) -> str:
    paced = work / "paced.py"
    paced.write_text(PACED)
    expected = int(rate * seconds)
    with RssSampler(0.5) as sampler, running_server(work / "load" / ".mcpdebug", env) as server:
        with sampler.watch("server", server.pid):
            start = time.perf_counter()
            runners = [
                subprocess.Popen(
                    [
                        MCPDEBUG,
                        "run",
                        "--dir",
                        str(server.directory),
                        "--quiet",
                        "--label",
                        tag,
                        "--",
                        sys.executable,
                        str(paced),
                        str(rate),
                        str(seconds),
                        tag,
                    ],
                    env=env,
                )
                for tag in ("alpha", "beta", "gamma")
            ]
            codes = [r.wait(seconds * 4 + 60) for r in runners]
            elapsed = time.perf_counter() - start
        hwm = proc_status(server.pid).get("VmHWM", 0)
        ids = session_ids(server.directory)
        counts = {}
        for tag in ("alpha", "beta", "gamma"):
            stored = stored_lines(server.directory, ids[tag])
            wanted = [
                f"{tag} {n:08d} a log line of a service under load, some padding here".encode()
                for n in range(expected)
            ]
            counts[tag] = len(stored)
            if stored != wanted:
                raise BenchmarkError(f"{tag}: {len(stored)} lines stored, not exactly the {expected} printed")
        spooled = list((server.directory / "spool").glob("*.jsonl"))
    if any(codes):
        raise BenchmarkError(f"runners exited with {codes}")
    return (
        f"Load: 3 sessions x {rate:,} lines/s for {seconds:.0f} s ({3 * expected:,} lines) in "
        f"{elapsed:.1f} s: server RSS peak **{sampler.peak_kb['server'] / 1024:.0f} MB** sampled, VmHWM "
        f"{hwm / 1024:.0f} MB (target at most 200 MB); stored "
        f"{', '.join(f'{t} {n:,}' for t, n in counts.items())}: every line once, in order; "
        f"{len(spooled)} spool files left"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--only", default="throughput,latency,load")
    parser.add_argument("--markdown", type=Path, help="append the results to this file")
    args = parser.parse_args(argv)
    parts = []
    with tempfile.TemporaryDirectory(prefix="mcpdebug-processes-") as tmp:
        work = Path(tmp)
        env = bytecode_env(clean_env(), work / "pycache")
        only = set(args.only.split(","))
        if "throughput" in only:
            parts.append(throughput(work, env, args.lines, args.repeats))
        if "latency" in only:
            parts.append(latency(work, env))
        if "load" in only:
            parts.append(load(work, env, args.rate, args.seconds))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    heading = f"### {stamp}: Python {platform.python_version()}, nproc {nproc()}, load average {load_avg}"
    text = heading + "\n\n" + "\n\n".join(parts) + "\n"
    print(text)
    if args.markdown:
        with args.markdown.open("a") as fh:
            fh.write("\n" + textwrap.dedent(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
