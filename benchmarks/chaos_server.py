"""The server SIGKILLed mid-run: is anything lost or stored twice, and does pytest's exit status change?

A generated suite (`chaos.py`: TESTS tests, every output line known, every 25th test failing) runs
with `pytest --mcp-debug -n 2` while its `mcpdebug serve` is SIGKILLed KILLS times, INTERVAL seconds
apart, and started again at once each time (a new process, new ports and tokens, the same store;
the test processes find it again through server.json and replay what they spooled meanwhile). The
last test waits until the last restart, so every kill lands mid-run.

Reported: where each kill landed (tests stored by then), events lost (seq 1..N of every process,
N from its `process_finished`), tests and output lines missing or stored twice, outcomes that
differ, and the exit status and summary line against the same suite run with the plugin off.
Figures are taken three times: from the store as the run ends; after one MCP call to the last
server (a tool takes in spool files written since its last look, as an agent's first question
does); and after the server has stopped and any spool left is ingested (as `mcpdebug show` does).

Usage: python benchmarks/chaos_server.py [--tests 500] [--kills 3] [--interval 2.5] [--lines 5]
                                         [--sleep 0.03] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chaos import (
    BenchmarkError,
    Server,
    call_tool,
    check_store,
    clean_env,
    environment,
    expected,
    generate,
    pytest_command,
)


def tests_stored(directory: Path) -> int:
    """Tests the store has finished, read without writing (the server may be running)."""
    try:
        db = sqlite3.connect(f"file:{directory / 'store.sqlite3'}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT count(*) FROM tests WHERE status != 'running'").fetchone()
            return int(row[0])
        finally:
            db.close()
    except sqlite3.Error:
        return -1


def summary_line(output: str) -> str:
    lines = [
        line
        for line in output.strip().splitlines()
        if " in " in line and ("passed" in line or "failed" in line)
    ]
    return lines[-1].strip("= ") if lines else ""


def counts_of(summary: str) -> str:
    """``20 failed, 481 passed in 9.81s`` without its duration."""
    return summary.rsplit(" in ", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=500, help="tests in the suite (default 500)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of the server (default 3)")
    parser.add_argument("--interval", type=float, default=2.5, help="seconds between kills (2.5)")
    parser.add_argument("--lines", type=int, default=5, help="output lines per test (default 5)")
    parser.add_argument("--sleep", type=float, default=0.03, help="seconds each test sleeps (0.03)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="chaos-server-"))
    project = tmp / "project"
    generate(project, args.tests, args.lines)
    want = expected(args.tests, args.lines)
    env = clean_env() | {"CHAOS_SLEEP": str(args.sleep)}

    print("baseline: the suite with the plugin off ...", file=sys.stderr)
    start = time.monotonic()
    plain = subprocess.run(
        pytest_command("-p", "no:mcpdebug", "-n", "2"), cwd=project, env=env, capture_output=True, text=True
    )
    plain_seconds = time.monotonic() - start

    release = tmp / "release"
    server = Server(project / ".mcpdebug", tmp / "serve.log").start()
    kills: list[dict[str, Any]] = []
    start = time.monotonic()
    run = subprocess.Popen(
        pytest_command("--mcp-debug", "-n", "2"),
        cwd=project,
        env=env | {"CHAOS_RELEASE": str(release)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while tests_stored(server.directory) < 1 and run.poll() is None:  # kill mid-tests, not at start-up
            time.sleep(0.05)
        for n in range(args.kills):
            time.sleep(args.interval if n else args.interval / 2)
            if run.poll() is not None:
                raise BenchmarkError(f"the run ended before kill {n + 1}: make --interval shorter")
            server.kill()
            stored = tests_stored(server.directory)
            killed_at = time.monotonic() - start
            server.start()
            kills.append(
                {
                    "at_seconds": round(killed_at, 2),
                    "tests_stored_then": stored,
                    "restart_seconds": round(time.monotonic() - start - killed_at, 2),
                }
            )
            print(f"kill {n + 1} at {killed_at:.1f} s ({stored} tests stored), restarted", file=sys.stderr)
        release.touch()
        output = run.communicate(timeout=900)[0]
        chaos_seconds = time.monotonic() - start
        time.sleep(1.0)  # the last server takes in the final batches
        raw = check_store(server.directory, want, ingest=False, read_only=True)
        call_tool(server, "get_run_summary", {"run_id": raw.run_id})  # what an agent's first call sees
        live = check_store(server.directory, want, ingest=False, read_only=True)
        crashes = server.crashes()
    finally:
        release.touch()
        if run.poll() is None:
            run.kill()
        server.stop()
    final = check_store(server.directory, want, ingest=True)

    def figures_of(check: Any) -> dict[str, Any]:
        return {
            "events_expected": check.events_expected,
            "events_lost": check.events_missing,
            "tests_missing": check.tests_missing,
            "tests_duplicated": check.tests_duplicated,
            "outcomes_wrong": check.outcomes_wrong,
            "lines_expected": check.lines_expected,
            "lines_lost": check.lines_missing,
            "lines_duplicated": check.lines_duplicated,
            "run_status": check.status,
            "problems": check.problems[:10],
        }

    plain_summary, chaos_summary = summary_line(plain.stdout), summary_line(output)
    figures = {
        "environment": environment(),
        "command": "python benchmarks/chaos_server.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "tests": len(want["outcomes"]),
        "kills": kills,
        "server_starts": server.starts,
        "server_log_crash_lines": crashes[:10],
        "stored_when_the_run_ended": figures_of(raw),
        "after_one_mcp_call": figures_of(live),
        "after_the_server_stopped": figures_of(final),
        "exit_status": {"plugin_off": plain.returncode, "with_kills": run.returncode},
        "summary": {"plugin_off": plain_summary, "with_kills": chaos_summary},
        "seconds": {"plugin_off": round(plain_seconds, 1), "with_kills": round(chaos_seconds, 1)},
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    same = run.returncode == plain.returncode and counts_of(chaos_summary) == counts_of(plain_summary)
    return 0 if live.complete and final.complete and same and not crashes else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchmarkError as exc:
        print(f"chaos_server: {exc}", file=sys.stderr)
        sys.exit(1)
