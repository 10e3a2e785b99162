"""Helpers for tests: inner pytest runs with the plugin, and events built by hand for the store."""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

# Inner runs see only the plugins a test asks for. Hypothesis's pytest plugin alone costs ~1 s of
# start-up per inner run; of the dev extra's plugins, pytest-randomly reorders the tests (whose order
# tests assert), pytest-asyncio warns at start-up without its ini option, and pytest-rerunfailures starts
# a socket server thread (seen in every hang report) whenever xdist is installed. test_coexistence.py
# loads each of them explicitly.
EXTRA_PLUGINS = ("hypothesispytest", "randomly", "asyncio", "rerunfailures")
FAST = ("-p", "no:cacheprovider", *(arg for name in EXTRA_PLUGINS for arg in ("-p", f"no:{name}")))


INNER_DEADLINE = 300.0
"""How long an inner run may take before the test fails: most take seconds, but two copies of this
suite on a loaded 2-core machine run many times slower."""


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*FAST, *args, timeout=INNER_DEADLINE)


LAUNCHERS = ("script", "module")
"""How people start pytest, where it could matter (hangs, signals, forks): the ``pytest`` console script
(the bottom frame is the script's ``<module>`` in the environment's ``bin/``), or ``python -m pytest``
(runpy's frames). `run_launched` also takes "main": a script of the project calling ``pytest.main()``
(as an IDE's runner does)."""
PYTEST_SCRIPT = Path(sys.executable).with_name("pytest")


def run_launched(
    pytester: pytest.Pytester, launcher: str, *args: str, timeout: float = INNER_DEADLINE
) -> pytest.RunResult:
    """An inner run started as ``launcher`` says (`LAUNCHERS`), in its own process."""
    if launcher == "module":
        return pytester.runpytest_subprocess(*FAST, *args, timeout=timeout)
    basetemp = pytester.path / f"basetemp-{time.monotonic_ns()}"
    if launcher == "main":
        script = pytester.path / "run_pytest.py"
        script.write_text("import sys\n\nimport pytest\n\nsys.exit(pytest.main(sys.argv[1:]))\n")
        return pytester.run(
            sys.executable, str(script), f"--basetemp={basetemp}", *FAST, *args, timeout=timeout
        )
    return pytester.run(str(PYTEST_SCRIPT), f"--basetemp={basetemp}", *FAST, *args, timeout=timeout)


def recorded(directory: Path) -> Store:
    """The store of ``directory`` with any spool taken in, as the CLI or server would."""
    store = Store(directory)
    ingest_spool(store)
    return store


@contextlib.asynccontextmanager
async def http_client(
    url: str, token: str | None, verify: ssl.SSLContext | bool = True
) -> AsyncIterator[Client]:
    """The SDK's streamable HTTP client, sending the bearer token `mcpdebug serve --http` requires."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30, read=300)  # the SDK's own defaults for MCP
    async with (
        httpx2.AsyncClient(headers=headers, verify=verify, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    """``predicate()``'s first true value, polled until ``timeout``: a generous deadline, since what a
    test waits for may take many times longer on a loaded machine (the wait ends as soon as it holds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def start_inner(pytester: pytest.Pytester, *args: str) -> subprocess.Popen[bytes]:
    """An inner pytest in the background (for watching it live), its output in one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *FAST, *args],
        cwd=pytester.path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


UNTIL_RECORDED = """
def until_recorded(text, seconds=120):
    # Until the recorder has read `text` of this test's output (it is in the run's spool): what a
    # test waits for before something that must come after, however slow a loaded machine is.
    import pathlib, time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path in pathlib.Path(".mcpdebug", "spool").glob("*.jsonl"):
            if text in path.read_text(errors="replace"):
                return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} was not recorded within {seconds} s")
"""
"""Source for an inner test module (no server: what the sender thread reads goes to the spool)."""


NOW = float(int(time.time()) - 3600)
"""A recent start time for hand-built runs: the store evicts runs older than ``max_age`` (7 days)."""


class Events:
    """The events of one test process, numbered as the plugin numbers them.

    ``seq`` counts per process; output lines count per unit (a test, or "" for output outside
    tests) both in the unit's combined output (``first``) and within each stream
    (``stream_first``). Timestamps come from ``clock`` (shared by the processes of a run), or
    advance ``step`` seconds per event from ``t0``.
    """

    def __init__(
        self,
        run_id: str,
        process: str = "main-1",
        worker: str = "main",
        t0: float = NOW,
        step: float = 0.25,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.run_id, self.process, self.worker = run_id, process, worker
        self.t0, self.step, self.clock = t0, step, clock
        self.seq = 0
        self.ticks = 0
        self.numbers: dict[str, dict[str, int]] = {}  # unit -> stream ("" = combined) -> lines so far

    def now(self) -> float:
        return self.t0 + self.step * self.ticks

    def __call__(self, cls: type[Any], *, ts: float | None = None, **fields: Any) -> Any:
        """Any event of this process, with the next seq and timestamp."""
        self.seq += 1
        if ts is None and self.clock is not None:
            ts = self.clock()
        elif ts is None:
            ts = self.now()
            self.ticks += 1
        return cls(run_id=self.run_id, process=self.process, seq=self.seq, ts=ts, **fields)

    def output(
        self,
        nodeid: str,
        lines: str | Iterable[str],
        *,
        stream: str = "stdout",
        phase: str = "call",
        ts: float | None = None,
        times: list[float] | None = None,
    ) -> protocol.Output:
        """An `Output` event of ``lines`` (a list, or one text whose lines are split at newlines)."""
        texts = lines.split("\n") if isinstance(lines, str) else list(lines)
        numbers = self.numbers.setdefault(nodeid or f"@{self.worker}", {})
        first, stream_first = numbers.get("", 0) + 1, numbers.get(stream, 0) + 1
        numbers[""] = first + len(texts) - 1
        numbers[stream] = stream_first + len(texts) - 1
        event: protocol.Output = self(
            protocol.Output,
            ts=ts,
            nodeid=nodeid,
            worker=self.worker,
            phase=phase,
            stream=stream,
            first=first,
            stream_first=stream_first,
            count=len(texts),
            text="\n".join(texts),
            times=times,
        )
        return event

    def start(self, pid: int = 1, host: str = "localhost") -> protocol.ProcessStarted:
        event: protocol.ProcessStarted = self(protocol.ProcessStarted, worker=self.worker, pid=pid, host=host)
        return event

    def run_started(self, pid: int = 1, host: str = "localhost", label: str = "") -> protocol.RunStarted:
        event: protocol.RunStarted = self(
            protocol.RunStarted,
            args=["-q"],
            rootdir="/src",
            cwd="/src",
            python="3.12.3",
            pytest_version="8.3.4",
            plugin_version="0.1.0",
            host=host,
            pid=pid,
            label=label,
        )
        return event

    def run_finished(self, exit_status: int = 0) -> list[protocol.Event]:
        """run_finished and the process's goodbye."""
        done = self(protocol.RunFinished, exit_status=exit_status, duration=1.0)
        return [done, self(protocol.ProcessFinished, events=self.seq + 1)]

    def test(
        self,
        nodeid: str,
        outcome: str = "passed",
        output: Iterable[tuple[str, str, str | list[str]]] = (),
        message: str = "",
    ) -> list[protocol.Event]:
        """test_started; per phase its (phase, stream, lines) output then phase_finished; test_finished.

        The call phase fails with ``message`` when ``outcome`` is "failed".
        """
        events: list[protocol.Event] = [self(protocol.TestStarted, nodeid=nodeid, worker=self.worker)]
        written = list(output)
        for when in ("setup", "call", "teardown"):
            for phase, stream, lines in written:
                if phase == when:
                    events.append(self.output(nodeid, lines, stream=stream, phase=phase))
            failed = when == "call" and outcome == "failed"
            events.append(
                self(
                    protocol.PhaseFinished,
                    nodeid=nodeid,
                    worker=self.worker,
                    when=when,
                    outcome="failed" if failed else "passed",
                    duration=0.1,
                    message=message if failed else "",
                )
            )
        events.append(
            self(
                protocol.TestFinished,
                nodeid=nodeid,
                worker=self.worker,
                outcome=outcome,
                duration=0.3,
                message=message,
            )
        )
        return events


def both_forms(result: Any) -> str:
    """The text of a tool's reply, checking that its ``structuredContent`` carries the same reply
    (a report's ``text`` is the text content; a data reply's fields are what the text shows)."""
    assert len(result.content) == 1
    text: str = result.content[0].text
    data = result.structured_content
    assert isinstance(data, dict) and data, text
    if "text" in data:
        assert data["text"] == text
    assert len(json.dumps(data, ensure_ascii=False)) <= 30_000  # what Claude Code shows the model
    return text
