"""What `chaos_ingest.py` and `chaos_server.py` share: a suite whose every output line is known, a
real `mcpdebug serve` that can be killed and restarted, its memory, and the check of what it stored.

The suite: N tests in files of 50, test i prints LINES lines ``t<i> l<j>`` and fails when
i % FAIL_EVERY == 0 (so the run has failure snapshots and exit status 1); ``CHAOS_SLEEP`` seconds
per test stretch the run, and with ``CHAOS_RELEASE`` set the last test waits for that file to exist
(so the run is still streaming while the chaos goes on).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from overhead import BenchmarkError, clean_env, log_tail  # noqa: E402

FAIL_EVERY = 25
PER_FILE = 50
SERVER_START_TIMEOUT = 30.0
TEST_FILE = """\
import os, pathlib, time
import pytest

SLEEP = float(os.environ.get("CHAOS_SLEEP", "0"))

@pytest.mark.parametrize("i", range({first}, {last}))
def test_t(i):
    for j in range({lines}):
        print(f"t{{i}} l{{j}}")
    if SLEEP:
        time.sleep(SLEEP)
    assert i % {fail_every}, f"test {{i}} fails on purpose"
"""
LAST_FILE = """\
import os, pathlib, time

def test_zz_last():
    release = os.environ.get("CHAOS_RELEASE")
    deadline = time.time() + 900
    while release and not pathlib.Path(release).exists() and time.time() < deadline:
        time.sleep(0.05)
    print("released")
"""


def generate(project: Path, tests: int, lines: int) -> None:
    """The suite described above; the last test (``test_zz_last.py``) counts as one more passed test."""
    project.mkdir(parents=True, exist_ok=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    for first in range(0, tests, PER_FILE):
        last = min(first + PER_FILE, tests)
        body = TEST_FILE.format(first=first, last=last, lines=lines, fail_every=FAIL_EVERY)
        (project / f"test_chaos_{first // PER_FILE:03d}.py").write_text(body)
    (project / "test_zz_last.py").write_text(LAST_FILE)


def expected(tests: int, lines: int) -> dict[str, Any]:
    """What a complete recording of the suite holds: outcomes and every output line per test."""
    outcomes: dict[str, str] = {}
    output: dict[str, list[str]] = {}
    for i in range(tests):
        nodeid = f"test_chaos_{i // PER_FILE:03d}.py::test_t[{i}]"
        outcomes[nodeid] = "passed" if i % FAIL_EVERY else "failed"
        output[nodeid] = [f"t{i} l{j}" for j in range(lines)]
    outcomes["test_zz_last.py::test_zz_last"] = "passed"
    output["test_zz_last.py::test_zz_last"] = ["released"]
    return {"outcomes": outcomes, "output": output, "exit_status": 1 if tests else 0}


def pytest_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *extra]


# The server --------------------------------------------------------------------------------------


@dataclass
class Server:
    """`mcpdebug serve --http --port 0 --dir DIR` as a subprocess; `kill` and `start` again at will."""

    directory: Path
    log: Path
    extra: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    starts: int = 0

    def start(self) -> Server:
        exe = Path(sys.executable).parent / "mcpdebug"
        if not exe.exists():
            raise BenchmarkError(f"{exe} not found: install the project (pip install -e .) first")
        self.directory.mkdir(parents=True, exist_ok=True)
        cmd = [str(exe), "serve", "--http", "--port", "0", "--dir", str(self.directory), *self.extra]
        with self.log.open("ab") as log:
            log.write(f"\n=== start {self.starts + 1}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=clean_env()
            )
        self.starts += 1
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise BenchmarkError(f"server exited with {self.proc.returncode}:\n{log_tail(self.log)}")
            with contextlib.suppress(OSError, ValueError):
                data = json.loads((self.directory / "server.json").read_text())
                if data.get("pid") == self.proc.pid:
                    self.info = data
                    return self
            if time.monotonic() > deadline:
                raise BenchmarkError(
                    f"server not up after {SERVER_START_TIMEOUT:.0f} s:\n{log_tail(self.log)}"
                )
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean-up, server.json left behind naming a dead pid."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def crashes(self) -> list[str]:
        """Lines of the log that show a bug: a traceback, or a connection ended by an internal error."""
        text = self.log.read_text(errors="replace")
        return [
            line
            for line in text.splitlines()
            if line.startswith("Traceback") or "error on the connection" in line or " ERROR " in line
        ]


def call_tool(server: Server, tool: str, arguments: dict[str, Any]) -> str:
    """One MCP tool call to the running server over streamable HTTP, with its bearer token.

    Tools take in spool files written since the last look, as an agent's first question would.
    """
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def ask() -> str:
        headers = {"Authorization": f"Bearer {server.info['mcp_token']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
            Client(streamable_http_client(server.info["mcp_url"], http_client=http)) as client,
        ):
            result = await client.call_tool(tool, arguments)
            return "\n".join(getattr(block, "text", "") for block in result.content)

    return anyio.run(ask)


def rss_kb(pid: int) -> int:
    """VmRSS of a process in kB (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


class RssWatch:
    """Samples a process's RSS every ``interval`` s in a thread: its peak, and marks taken on demand."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval = pid, interval
        self.first = rss_kb(pid)
        self.peak = self.first
        self.marks: list[tuple[str, int]] = [("start", self.first)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def mark(self, label: str) -> int:
        value = rss_kb(self.pid)
        self.peak = max(self.peak, value)
        self.marks.append((label, value))
        return value

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_kb(self.pid))


# What was stored -----------------------------------------------------------------------------------


@dataclass
class Check:
    """A stored run against what the suite makes: every figure here is 0 for a complete recording."""

    run_id: str
    tests_missing: int = 0
    tests_duplicated: int = 0
    outcomes_wrong: int = 0
    lines_expected: int = 0
    lines_missing: int = 0
    lines_duplicated: int = 0
    events_expected: int = 0
    events_missing: int = 0
    status: str = ""
    exit_status: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (
            self.tests_missing
            or self.tests_duplicated
            or self.outcomes_wrong
            or self.lines_missing
            or self.lines_duplicated
            or self.events_missing
        )


def check_store(
    directory: Path, want: dict[str, Any], *, ingest: bool = True, read_only: bool = False
) -> Check:
    """The newest run in the store of ``directory`` against ``want`` (see `expected`).

    With ``ingest``, spool files not yet taken in are ingested first, as `mcpdebug show` would
    (call it with the server stopped: the store has one writer). ``read_only`` reads a store a
    running server writes, without taking any write lock.
    """
    from hostile_peers import stored_lines

    from mcpdebug.ingest.spool import ingest_spool
    from mcpdebug.store import Store

    store: Any = _ReadOnlyStore(directory) if read_only else Store(directory, create=False)
    try:
        if ingest:
            ingest_spool(store)
        runs = [
            r
            for r in store.db.execute("SELECT run_id, status, exit_status FROM runs ORDER BY started DESC")
            if not r["run_id"].startswith("fuzz-")
        ]
        if not runs:
            raise BenchmarkError(f"no run recorded in {directory}")
        run = runs[0]
        check = Check(run["run_id"], status=run["status"], exit_status=run["exit_status"])
        rows = store.db.execute(
            "SELECT nodeid, status FROM tests WHERE run_id=?", (run["run_id"],)
        ).fetchall()
        seen = Counter(r["nodeid"] for r in rows)
        status = {r["nodeid"]: r["status"] for r in rows}
        for nodeid, outcome in want["outcomes"].items():
            if nodeid not in seen:
                check.tests_missing += 1
                check.problems.append(f"{nodeid}: not stored")
            elif status[nodeid] != outcome:
                check.outcomes_wrong += 1
                check.problems.append(f"{nodeid}: {status[nodeid]}, expected {outcome}")
        check.tests_duplicated = sum(n - 1 for n in seen.values())
        for nodeid, lines in want["output"].items():
            stored = stored_lines(store, run["run_id"], nodeid)
            check.lines_expected += len(lines)
            have = Counter(stored)
            missing = sum((Counter(lines) - have).values())
            extra = sum((have - Counter(lines)).values())
            check.lines_missing += missing
            check.lines_duplicated += extra
            if missing or extra:
                check.problems.append(f"{nodeid}: {missing} line(s) missing, {extra} extra")
        check.events_expected, check.events_missing = _events(store, run["run_id"], check.problems)
        return check
    finally:
        store.close()


class _ReadOnlyStore:
    """What `check_store` reads (``db``, ``outputs``), on a connection that cannot write."""

    def __init__(self, directory: Path) -> None:
        import sqlite3

        from mcpdebug.store.output_files import Outputs
        from pytest_mcpdebug.limits import Limits

        self.dir = directory
        self.db = sqlite3.connect(f"file:{directory / 'store.sqlite3'}?mode=ro", uri=True, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.outputs = Outputs(directory, Limits())

    def close(self) -> None:
        self.db.close()


def _events(store: Any, run_id: str, problems: list[str]) -> tuple[int, int]:
    """Are all of each process's events stored? Its last, `process_finished`, has seq N = how many it
    sent (its `events` field), so seq 1..N must all be there; a process without it lost its end."""
    expected = missing = 0
    processes = store.db.execute(
        "SELECT process, finished FROM processes WHERE run_id=?", (run_id,)
    ).fetchall()
    for row in processes:
        seqs = {
            r[0]
            for r in store.db.execute(
                "SELECT seq FROM events WHERE run_id=? AND process=?", (run_id, row["process"])
            )
        }
        sent = max(seqs, default=0)
        expected += sent
        gone = sent - len(seqs)
        if row["finished"] is None:
            gone += 1
            problems.append(f"{row['process']}: its process_finished is not stored")
        missing += gone
        if gone:
            problems.append(f"{row['process']}: {gone} of {sent} events missing")
    return expected, missing


def environment() -> str:
    """One line about the machine, for the results."""
    import platform

    return (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
        f"{platform.system()} {platform.release()}"
    )
