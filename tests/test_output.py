"""Stored output as a user meets it: a real inner `pytest --mcp-debug`, a real `mcpdebug serve`, and
what an agent's MCP client (or the `mcpdebug` CLI) shows about what the tests printed and logged.

Most read-only checks share one recorded run (`rec`): the `noisy` and `output` suites recorded once
for the module, plus a smaller run before it for multi-session queries.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import anyio
import pytest
from mcp import Client
from mcp.types import TextResourceContents

from conftest import MCPDEBUG, RunningServer, SuiteCopier, start_server
from helpers import FAST, UNTIL_RECORDED, both_forms, http_client, recorded, run_inner, start_inner, wait_for
from mcpdebug.app import build_server
from mcpdebug.store import Store
from pytest_mcpdebug.limits import KB


def numbered(reply: str) -> list[str]:
    """The numbered lines of a get_output reply (its header and footer left out)."""
    return [line for line in reply.splitlines() if line[:1].isdigit()]


def output_text(*args: Any, **kwargs: Any) -> str:
    """get_output's text (the reply an agent reads; its typed fields are tested in test_tool_contract)."""
    from mcpdebug.views import output as output_view

    return output_view.get_output(*args, **kwargs).text


MAX_REPLY = 30_000
MANY = "test_noisy.py::test_many_stdout_lines"
INTERLEAVED = "test_streams.py::test_interleaved"
HUGE = "test_volume.py::test_huge_output"
LIVE = "test_live.py::test_prints_then_waits"
BATCH_1 = [
    "batch 1 printed at ",
    "batch 1 written to fd 1",
    "batch 1 echoed by a subprocess",
    "[stderr] batch 1 on stderr",
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


# Helpers ---------------------------------------------------------------------------------------------


def text(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


async def call(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert not result.is_error, text(result)
    both_forms(result)  # both forms carry the whole reply
    return text(result)


async def error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, text(result)
    assert "Traceback" not in text(result)
    return text(result)


async def resource(client: Client, uri: str) -> str:
    (contents,) = (await client.read_resource(uri)).contents
    assert isinstance(contents, TextResourceContents)
    return contents.text


def body(reply: str) -> list[str]:
    """The output lines of a get_output reply, without its header and footer."""
    return reply.split("\n\n")[1].splitlines()


def on_disk(reply: str) -> Path:
    """The file a reply names as holding the whole output."""
    match = re.search(r"^\[On disk: (.+)\]$", reply, re.MULTILINE)
    assert match, reply
    return Path(match[1])


def run_id_of(output: str) -> str:
    match = re.search(r"^mcpdebug: run (\S+) (?:streamed|saved)", output, re.MULTILINE)
    assert match, output
    return match[1]


async def poll_output(
    client: Client, wanted: list[str], timeout: float = 60, **args: Any
) -> tuple[str, float]:
    """get_output until its reply contains every ``wanted`` text; the reply and when it was seen."""
    reply = ""
    try:
        with anyio.fail_after(timeout):
            while True:
                result = await client.call_tool("get_output", args)
                reply = text(result)
                if not result.is_error and all(w in reply for w in wanted):
                    return reply, time.time()
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(
            f"{wanted} not in get_output({args}) within {timeout} s; last reply:\n{reply}"
        ) from None


class LineReader:
    """Collects a process's output lines as they arrive, with the time each arrived."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[tuple[float, str]] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self._queue.put((time.time(), raw.decode().rstrip("\n")))

    async def wait_for(self, needle: str, timeout: float = 60) -> tuple[str, float]:
        with anyio.move_on_after(timeout):
            while True:
                try:
                    arrived, line = self._queue.get_nowait()
                except queue.Empty:
                    await anyio.sleep(0.02)
                    continue
                self.lines.append(line)
                if needle in line:
                    return line, arrived
        raise AssertionError(f"{needle!r} not printed within {timeout} s; got:\n" + "\n".join(self.lines))


@dataclass
class Recorded:
    dir: Path
    run_id: str
    """The `noisy` and `output` suites, the newest run."""
    small_run_id: str
    """One test of `noisy` (20 stderr lines), recorded just before."""


def _inner_env() -> dict[str, str]:
    """What `pytester` gives inner runs: none of the developer's MCPDEBUG* or PYTEST_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}


def _inner(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, *args],
        cwd=path,
        env=_inner_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    path = tmp_path_factory.mktemp("recorded")
    SuiteCopier(path)("noisy")
    SuiteCopier(path)("output")
    small = _inner(path, "--mcp-debug", "test_noisy.py::test_stderr_output")
    assert small.returncode == 0, small.stdout + small.stderr
    main = _inner(path, "--mcp-debug")
    assert main.returncode == 1, main.stdout + main.stderr  # test_noisy.py::test_prints_then_fails
    return Recorded(path / ".mcpdebug", run_id_of(main.stdout), run_id_of(small.stdout))


@pytest.fixture(scope="module")
def store(rec: Recorded) -> Iterator[Store]:
    taken_in = recorded(rec.dir)  # recorded with no server: the spool is taken in, as `mcpdebug serve` does
    yield taken_in
    taken_in.close()


def mcpdebug(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPDEBUG, *args], cwd=cwd, env=_inner_env(), capture_output=True, text=True, timeout=60
    )


# Reading and searching a recorded test's output --------------------------------------------------------


@pytest.mark.anyio
async def test_last_lines_and_the_nth_match_of_a_noisy_test(rec: Recorded, store: Store) -> None:
    async with Client(build_server(store)) as client:
        last = await call(client, "get_output", test=MANY, start=-5, end=-1)
        assert last.startswith(f"Lines 496-500 of 500 ({MANY}; run {rec.run_id};")
        assert body(last) == [f"{n}: line {n} of 500" for n in range(496, 501)]
        assert "[495 lines omitted]" in last
        assert (
            f'[Earlier lines: get_output(run_id="{rec.run_id}", test="{MANY}", start=296, end=495)]' in last
        )

        second = await call(
            client,
            "search_output",
            pattern=r"line 4\d\d of",
            test="test_many_stdout_lines",  # a unique part of the node id is enough
            occurrence=2,
            context=2,
            max_results=1,
        )
        lines = second.splitlines()
        assert lines[0] == f'Search: "line 4\\d\\d of" found 100 occurrences in {MANY} (run {rec.run_id})'
        assert lines[1] == "Showing occurrence 2 of 100 at line 401:"
        assert lines[3:8] == [
            "399: line 399 of 500",
            "400: line 400 of 500",
            ">>> 401: line 401 of 500 <<<",
            "402: line 402 of 500",
            "403: line 403 of 500",
        ]
        assert "Use occurrence=3 for next match: search_output(" in second

        # without max_results, the hits from the second on (up to 20), each with its context
        several = await call(client, "search_output", pattern=r"line 4\d\d of", test=MANY, occurrence=2)
        assert "Showing occurrences 2-21 of 100:" in several
        assert ">>> 401: line 401 of 500 <<<" in several and ">>> 420: line 420 of 500 <<<" in several
        assert ">>> 400:" not in several and "Use occurrence=22 for next match" in several


@pytest.mark.anyio
async def test_errors_say_what_is_valid_and_the_server_carries_on(rec: Recorded, store: Store) -> None:
    async with Client(build_server(store)) as client:
        bad_regex = await error(client, "search_output", pattern="([", test=MANY)
        assert "Invalid regular expression '(['" in bad_regex
        assert "escape special characters with a backslash" in bad_regex

        out_of_range = await error(client, "get_output", test=MANY, start=495, end=510)
        assert "Invalid line range: start=495, end=510 is outside lines 1-500." in out_of_range
        assert "This output has 500 lines." in out_of_range and "start=-50, end=-1" in out_of_range
        zero = await error(client, "get_output", test=MANY, start=0, end=3)
        assert "line numbers start at 1" in zero
        backwards = await error(client, "get_output", test=MANY, start=10, end=5)
        assert "start must be <= end" in backwards

        unknown_run = await error(client, "get_output", run_id="no-such-run", test=MANY)
        assert (
            f"Unknown run 'no-such-run'. Recorded runs, newest first: {rec.run_id}, {rec.small_run_id}."
            in unknown_run
        )

        unknown_test = await error(client, "get_output", test="no_such_test")
        assert f"No test matching 'no_such_test' in run {rec.run_id}" in unknown_test
        assert "test_noisy.py::test_prints_then_fails" in unknown_test  # the failed test is suggested
        assert f'list_tests(run_id="{rec.run_id}")' in unknown_test
        ambiguous = await error(client, "get_output", test="test_stream")
        assert f"'test_stream' matches several tests of run {rec.run_id} (3); give one of:" in ambiguous
        assert INTERLEAVED in ambiguous

        beyond = await error(client, "search_output", pattern="of 500", test=MANY, occurrence=501)
        assert "Invalid occurrence number: 501. 'of 500' has 500 occurrences" in beyond
        assert "use occurrence=1 to 500" in beyond

        nothing = await call(client, "search_output", pattern="zebra", test=MANY)  # an answer, not an error
        assert nothing.startswith(f"No lines match 'zebra' in {MANY}")
        assert "ignore_case=True" in nothing and "get_output(" in nothing

        bad_stream = await error(client, "get_output", test=MANY, stream="stdin")
        assert bad_stream.startswith(
            'get_output: argument stream must be one of "combined", "stdout", "stderr", "log", "warnings", '
            "not 'stdin'."
        )

        # the server is unaffected
        assert body(await call(client, "get_output", test=MANY, start=-1, end=-1)) == ["500: line 500 of 500"]


@pytest.mark.anyio
async def test_streams_are_tagged_in_execution_order_and_filter(store: Store) -> None:
    async with Client(build_server(store)) as client:
        combined = await call(client, "get_output", test=INTERLEAVED)
        lines = body(combined)
        numbers = [int(line.split(": ", 1)[0]) for line in lines]
        texts = [line.split(": ", 1)[1] for line in lines]
        assert numbers == [1, 2, 3, 4, 5, 6]
        # a log record is read after what was printed before it, so prints and records keep their order
        assert [t for t in texts if not t.startswith("[warnings]")] == [
            "step 1: on stdout",
            "[log] WARNING app.orders: order 42 is late",
            "[stderr] step 2: on stderr",
            "[log] ERROR app.orders: order 43 failed",
            "step 3: on stdout after the warning",
        ]
        (warning,) = [t for t in texts if t.startswith("[warnings]")]
        assert re.fullmatch(
            r"\[warnings\] DeprecationWarning: the old API is deprecated \(.*test_streams\.py:\d+\)", warning
        )

        stdout = await call(client, "get_output", test=INTERLEAVED, stream="stdout")
        assert "Lines 1-2 of 2 (" in stdout and "; stdout)" in stdout
        assert body(stdout) == ["1: step 1: on stdout", "2: step 3: on stdout after the warning"]
        log = await call(client, "get_output", test=INTERLEAVED, stream="log")
        assert body(log) == [
            "1: WARNING app.orders: order 42 is late",
            "2: ERROR app.orders: order 43 failed",
        ]
        stderr = await call(client, "get_output", test=INTERLEAVED, stream="stderr")
        assert body(stderr) == ["1: step 2: on stderr"]
        warnings = await call(client, "get_output", test=INTERLEAVED, stream="warnings")
        assert body(warnings) == ["1: " + warning.removeprefix("[warnings] ")]

        whole = await call(client, "get_output", test="test_uses_workspace")
        assert body(whole) == [
            "1: setup: creating the workspace",
            "2: call: using the workspace",
            "3: teardown: removing the workspace",
        ]
        setup = await call(client, "get_output", test="test_uses_workspace", phase="setup")
        assert "setup phase only" in setup
        assert body(setup) == ["1: setup: creating the workspace"]
        teardown = await call(client, "get_output", test="test_uses_workspace", phase="teardown")
        assert "line numbers are the whole output's" in teardown
        assert body(teardown) == ["3: teardown: removing the workspace"]


@pytest.mark.anyio
async def test_a_warning_is_in_execution_order_relative_to_prints(store: Store) -> None:
    async with Client(build_server(store)) as client:
        texts = [line.split(": ", 1)[1] for line in body(await call(client, "get_output", test=INTERLEAVED))]
    warning = next(i for i, t in enumerate(texts) if t.startswith("[warnings]"))
    assert warning < texts.index("step 3: on stdout after the warning")


@pytest.mark.anyio
async def test_output_outside_tests_belongs_to_the_run(rec: Recorded, store: Store) -> None:
    async with Client(build_server(store)) as client:
        outside = await call(client, "get_output")
        assert outside.startswith("Lines 1-2 of 2 (output outside tests (collection, session fixtures")
        assert body(outside) == ["1: collecting test_streams.py", "2: session fixture: starting the service"]
        # not in the output of the first test that used the session fixture
        assert "session fixture" not in await call(client, "get_output", test=INTERLEAVED)
        assert await resource(client, f"mcpdebug://runs/{rec.run_id}/output") == outside
        found = await call(client, "search_output", pattern="session fixture")
        assert "Occurrence 1 at line 2 of output outside tests" in found


@pytest.mark.anyio
async def test_a_very_long_line_is_stored_cut_at_64kb(store: Store) -> None:
    async with Client(build_server(store)) as client:
        reply = await call(client, "get_output", test="test_long_line")
        lines = body(reply)
        assert lines[0] == "1: before the long line" and lines[2] == "3: after the long line"
        # the reply shows the start of the line and says where the rest is
        assert lines[1].startswith("2: " + "x" * 4000 + " [... +")
        # ... and how much of it the file holds: the line was cut at max_line_length when recorded
        assert lines[1].endswith(
            "characters; the file holds its first 65,536 bytes (34,464 more were dropped when it was "
            "recorded: max_line_length)]"
        )
        assert len(reply) < 6000
    stored = on_disk(reply).read_text().splitlines()
    assert stored[0] == "before the long line" and stored[2] == "after the long line"
    assert stored[1] == "x" * 65536 + " [... mcpdebug: line cut at 65536 bytes; 34464 more bytes dropped]"


@pytest.mark.anyio
async def test_max_line_length_option(pytester: pytest.Pytester, suite: SuiteCopier) -> None:
    suite("output")
    result = run_inner(pytester, "--mcp-debug", "--mcp-debug-max-line-length", "2KB", "-k", "long_line")
    assert result.ret == 0
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        reply = await call(client, "get_output", test="test_long_line", start=2, end=2)
    cut = "x" * 2048 + " [... mcpdebug: line cut at 2048 bytes; 97952 more bytes dropped]"
    assert body(reply) == ["2: " + cut]
    assert on_disk(reply).read_text().splitlines()[1] == cut

    bad = run_inner(pytester, "--mcp-debug", "--mcp-debug-max-line-length", "12XB")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--mcp-debug-max-line-length: '12XB' is not a size*"])


# Resources and multi-session logs ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resources(rec: Recorded, store: Store) -> None:
    rid = rec.run_id
    node = quote(MANY, safe="")
    async with Client(build_server(store)) as client:
        listing = json.loads(await resource(client, "mcpdebug://logs/list"))
        assert [r["run_id"] for r in listing["runs"]] == [rid, rec.small_run_id]
        outputs = {o["test"]: o for o in listing["runs"][0]["outputs"]}
        assert outputs[MANY]["totalLines"] == 500
        assert outputs[MANY]["uri"] == f"mcpdebug://runs/{rid}/tests/{node}/output"
        assert outputs[None]["totalLines"] == 2  # the run's output outside tests
        assert listing["totalCount"] == len(listing["runs"][0]["outputs"]) + 1

        recent = json.loads(await resource(client, "mcpdebug://logs/recent?n=1"))
        assert [r["run_id"] for r in recent["runs"]] == [rid]

        whole = await resource(client, outputs[MANY]["uri"])
        assert body(whole)[-1] == "500: line 500 of 500" and "Showing last 200 of 500 lines" in whole

        head = await resource(client, f"mcpdebug://runs/{rid}/tests/{node}/range?start=1&end=3")
        assert body(head) == ["1: line 1 of 500", "2: line 2 of 500", "3: line 3 of 500"]
        assert "[Later lines: get_output(" in head

        pattern = quote(r"line 4\d\d of", safe="")
        found = await resource(client, f"mcpdebug://runs/{rid}/tests/{node}/search?q={pattern}&occurrence=2")
        assert "found 100 occurrences" in found and "Showing occurrence 2 of 100 at line 401:" in found
        assert ">>> 401: line 401 of 500 <<<" in found


@pytest.mark.anyio
async def test_get_logs_merges_sessions_and_names_the_missing(rec: Recorded, store: Store) -> None:
    async with Client(build_server(store)) as client:
        reply = await call(
            client, "get_logs", labels=[rec.run_id, rec.small_run_id, "ghost-session"], lines=5
        )
    meta, _, lines = reply.partition("\n\n")
    meta_lines = meta.splitlines()
    assert meta_lines[:4] == [
        "total_results: 10",
        "truncated: false",
        f'sessions_queried: ["{rec.run_id}", "{rec.small_run_id}"]',
        'sessions_not_found: ["ghost-session"]',
    ]
    assert re.fullmatch(r"time_range: oldest \S+, newest \S+", meta_lines[4])
    assert meta_lines[5] == f"known sessions (newest first): {rec.run_id}, {rec.small_run_id}"
    # the older session's lines first, and within a session the order they were written in
    shown = lines.splitlines()
    assert [line.split("| ", 1)[1] for line in shown[:5]] == [f"stderr line {n} of 20" for n in range(16, 21)]
    assert all(
        f"[{rec.small_run_id}] test_noisy.py::test_stderr_output stderr| " in line for line in shown[:5]
    )
    assert [line.split("| ", 1)[1][:9] for line in shown[5:]] == [f"row {n:05d}" for n in range(4996, 5001)]
    assert all(f"[{rec.run_id}] test_volume.py::test_head_and_tail stdout| " in line for line in shown[5:])


# Bounded replies -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_replies_never_exceed_30000_characters(rec: Recorded, store: Store) -> None:
    async with Client(build_server(store)) as client:
        replies = {
            "tail": await call(client, "get_output", test=HUGE),
            "range": await call(client, "get_output", test=HUGE, start=1, end=20_000),
            "stdout": await call(client, "get_output", test=HUGE, stream="stdout", start=1, end=-1),
            "search": await call(
                client, "search_output", pattern="huge", test=HUGE, context=50, max_results=1000
            ),
            "search run": await call(client, "search_output", pattern="y+$", max_results=1000),
            "logs": await call(client, "get_logs", labels=[rec.run_id], lines=10_000, max_results=10_000),
            "test": await call(client, "get_test", test=HUGE, tail_lines=2000),
            "resource": await resource(client, f"mcpdebug://runs/{rec.run_id}/tests/{quote(HUGE)}/output"),
            "list": await resource(client, "mcpdebug://logs/list"),
        }
    for name, reply in replies.items():
        assert len(reply) <= MAX_REPLY, (name, len(reply))
    # each says what it left out and how to get it
    assert body(replies["tail"])[-1].startswith("20000: huge 20000 ")
    assert "of 20000 lines (reply size limit)]" in replies["tail"]
    assert body(replies["range"])[0].startswith("1: huge 00001 ")
    assert "[Later lines: get_output(" in replies["range"]
    assert "(reply size limit)" in replies["stdout"]
    assert "found 20000 occurrences" in replies["search"] and "Use occurrence=" in replies["search"]
    assert "Use occurrence=" in replies["search run"]
    assert "truncated: true (reply size limit" in replies["logs"]
    # get_test's "last tail_lines lines", cut to fit, keeps the last ones
    assert "--- captured output" in replies["test"] and "Showing last " in replies["test"]
    assert body(replies["test"].split("--- captured output", 1)[1])[-1].startswith("20000: huge 20000 ")


# Live output with a running server ----------------------------------------------------------------------


def _stop(*processes: subprocess.Popen[bytes] | None) -> None:
    for process in processes:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.anyio
async def test_output_is_readable_and_tailed_while_the_test_runs(
    pytester: pytest.Pytester, suite: SuiteCopier, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite("live")
    monkeypatch.setenv("LIVE_WAIT", "60")  # waits until released (below), at most a minute
    inner = start_inner(pytester, "--mcp-debug")
    tail = None
    try:
        # the agent's client talks to the real server over streamable HTTP
        async with http_client(server.mcp_url, server.mcp_token) as client:
            # How soon a printed line is readable is measured by benchmarks/latencies.py: here, that it
            # is while the test runs (it waits until released)
            await poll_output(client, BATCH_1, test=LIVE)
            assert inner.poll() is None, "the output was seen only after the run ended"
            stdout = body(await call(client, "get_output", test=LIVE, stream="stdout"))
            assert [line.split(": ", 1)[0] for line in stdout] == ["1", "2", "3"]
            assert stdout[0].startswith("1: batch 1 printed at ")
            assert stdout[1:] == ["2: batch 1 written to fd 1", "3: batch 1 echoed by a subprocess"]

            tail = subprocess.Popen(
                [MCPDEBUG, "tail"], cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            assert tail.stdout is not None
            lines = LineReader(tail.stdout)
            await lines.wait_for(f"==> {LIVE} <==")
            await lines.wait_for("batch 1 echoed by a subprocess")  # what was already there comes first

            (pytester.path / "release-1").touch()
            line, _ = await lines.wait_for("batch 2 printed at")
            assert re.fullmatch(r"\d: batch 2 printed at \d+\.\d+", line)
            assert inner.poll() is None, "tail printed the line only after the run ended"
            await poll_output(client, ["batch 2 printed at"], test=LIVE)
            assert inner.poll() is None

            (pytester.path / "release-2").touch()
            ended, _ = await lines.wait_for("ended:")
            assert re.fullmatch(r"\(run \S+ ended: finished, exit status 0.*\)", ended)
            assert tail.wait(60) == 0
        out = inner.communicate(timeout=60)[0].decode()
        assert inner.returncode == 0, out
        assert f"streamed to {server.url}" in out
    finally:
        _stop(inner, tail)


@pytest.mark.anyio
async def test_a_killed_test_keeps_what_it_wrote(
    pytester: pytest.Pytester, suite: SuiteCopier, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite("live")
    monkeypatch.setenv("LIVE_WAIT", "60")  # never released: the test hangs until killed
    inner = start_inner(pytester, "--mcp-debug")
    try:
        async with http_client(server.mcp_url, server.mcp_token) as client:
            await poll_output(client, BATCH_1, test=LIVE)
            inner.send_signal(signal.SIGKILL)
            inner.wait(10)

            reply = await call(client, "get_output", test=LIVE)
            assert [line.split(": ", 1)[1] for line in body(reply)][1:] == BATCH_1[1:]
            assert body(reply)[0].startswith("1: batch 1 printed at ")
            summary = await call(client, "get_run_summary")
            assert "crashed (its process died without finishing the run)" in summary
            assert "Was running when it ended (1):" in summary and f"- {LIVE} (worker main" in summary
        assert "batch 1 echoed by a subprocess" in on_disk(reply).read_text()
    finally:
        _stop(inner)


async def follow_spooled_run(path: Path) -> subprocess.Popen[bytes]:
    """`mcpdebug tail` as a user starts it: once the run is on disk (its spool file is there)."""
    with anyio.fail_after(60):
        while not any((path / ".mcpdebug" / "spool").glob("*.jsonl")):
            await anyio.sleep(0.05)
    return subprocess.Popen(
        [MCPDEBUG, "tail", "--interval", "0.1"], cwd=path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.mark.anyio
async def test_without_a_server_a_running_test_is_followed_live_from_the_spool(
    pytester: pytest.Pytester, suite: SuiteCopier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No server: the sender thread sleeps while tests are quick and is woken by the helper process
    once the test is a tick old (`recording.ticker`); `mcpdebug tail` shows its lines while it runs."""
    suite("live")
    monkeypatch.setenv("LIVE_WAIT", "60")
    inner = start_inner(pytester, "--mcp-debug")
    tail = None
    try:
        tail = await follow_spooled_run(pytester.path)
        assert tail.stdout is not None
        lines = LineReader(tail.stdout)
        await lines.wait_for("batch 1 printed at")  # read within a tick, spooled at once, tail's look
        assert inner.poll() is None, "the lines were followed only after the run ended"
        await lines.wait_for("batch 1 echoed by a subprocess")

        (pytester.path / "release-1").touch()
        await lines.wait_for("batch 2 printed at")
        assert inner.poll() is None
        (pytester.path / "release-2").touch()
        await lines.wait_for("ended:")
        assert tail.wait(60) == 0
        out = inner.communicate(timeout=60)[0].decode()
        assert inner.returncode == 0, out
        assert "saved to .mcpdebug/spool/" in out
    finally:
        _stop(inner, tail)


@pytest.mark.anyio
async def test_without_a_server_a_killed_test_keeps_what_it_wrote(
    pytester: pytest.Pytester, suite: SuiteCopier, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite("live")
    monkeypatch.setenv("LIVE_WAIT", "60")  # never released: the test hangs until killed
    inner = start_inner(pytester, "--mcp-debug")
    tail = None
    try:
        tail = await follow_spooled_run(pytester.path)
        assert tail.stdout is not None
        await LineReader(tail.stdout).wait_for("batch 1 on stderr")
        inner.send_signal(signal.SIGKILL)
        inner.wait(10)
        logs = mcpdebug(pytester.path, "logs", "latest", LIVE)
        assert logs.returncode == 0, logs.stdout + logs.stderr
        for expected in BATCH_1:
            assert expected.removeprefix("[stderr] ") in logs.stdout, logs.stdout
        show = mcpdebug(pytester.path, "show")
        assert "crashed" in show.stdout, show.stdout
    finally:
        _stop(inner, tail)


# Limits of the store ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_head_and_tail_are_kept_over_max_test_output(
    pytester: pytest.Pytester, suite: SuiteCopier
) -> None:
    suite("output")
    directory = pytester.path / ".mcpdebug"
    server = start_server(directory, "--max-test-output", "64KB")
    try:
        result = run_inner(pytester, "--mcp-debug", "test_volume.py::test_head_and_tail")
        assert result.ret == 0
        assert f"streamed to {server.url}" in result.stdout.str()

        def row(n: int) -> str:
            """Line ``n`` as the test printed it."""
            return f"row {n:05d} ".ljust(99, ".")

        async with http_client(server.mcp_url, server.mcp_token) as client:
            last = await call(client, "get_output", test="test_head_and_tail", start=-3, end=-1)
            assert body(last) == [f"{n}: {row(n)}" for n in (4998, 4999, 5000)]
            assert "lines in the middle dropped: over max_test_output" in last
            stored = on_disk(last).read_text().splitlines()
            (marker_line,) = [line for line in stored if line.startswith("[mcpdebug:")]
            marker = re.fullmatch(
                r"\[mcpdebug: (\d+) lines \(.+\) after line (\d+) were dropped here: the test wrote "
                r"488\.3 KB, over max_test_output=64\.0 KB; its first and last halves are kept\. .*\]",
                marker_line,
            )
            assert marker, marker_line
            dropped, head = int(marker[1]), int(marker[2])
            kept_tail = range(head + dropped + 1, 5001)
            # the file: the head, the marker, the tail, every line as the test wrote it
            assert stored == [row(n) for n in range(1, head + 1)] + [marker[0]] + [row(n) for n in kept_tail]
            assert 300 <= head <= 327 and 200 <= len(kept_tail) <= 327  # about 32 KB each, at most
            assert on_disk(last).stat().st_size < 80 * KB

            gap = await call(
                client, "get_output", test="test_head_and_tail", start=head - 1, end=head + dropped + 2
            )
            assert body(gap) == [
                f"{head - 1}: {row(head - 1)}",
                f"{head}: {row(head)}",
                f"[... {dropped} lines ({head + 1}-{head + dropped}) not stored: the test wrote more than "
                "max_test_output; its first and last parts are kept ...]",
                f"{head + dropped + 1}: {row(head + dropped + 1)}",
                f"{head + dropped + 2}: {row(head + dropped + 2)}",
            ]
            found = await call(
                client, "search_output", pattern=row(4990), test="test_head_and_tail", context=0
            )
            assert f">>> 4990: {row(4990)} <<<" in found
    finally:
        server.stop()


def test_retention_keeps_the_newest_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.mcpdebug]\nmax_runs = 2\n")
    pytester.makepyfile(test_one="def test_prints():\n    print('hello from a recorded run')\n")
    directory = pytester.path / ".mcpdebug"
    server = start_server(directory)
    try:
        ids = [run_id_of(run_inner(pytester, "--mcp-debug").stdout.str()) for _ in range(3)]
        store = Store(directory)
        wait_for(lambda: [r["run_id"] for r in store.runs()] == [ids[2], ids[1]])
        assert not (directory / "output" / ids[0]).exists()
        assert (directory / "output" / ids[1]).is_dir() and (directory / "output" / ids[2]).is_dir()
        assert "max_runs=2" in server.log.read_text()

        async def ask() -> tuple[str, str]:
            async with http_client(server.mcp_url, server.mcp_token) as client:
                gone = await error(client, "get_output", run_id=ids[0], test="test_prints")
                kept = await call(client, "get_output", run_id=ids[1], test="test_prints")
            return gone, kept

        gone, kept = anyio.run(ask)
        assert f"Unknown run '{ids[0]}'. Recorded runs, newest first: {ids[2]}, {ids[1]}." in gone
        assert body(kept) == ["1: hello from a recorded run"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("value", "problem"),
    [('"many"', "'many' is not a whole number"), ("0", "0 is out of range; max_runs must be between 1 and")],
)
def test_a_bad_limit_in_pyproject_stops_serve(pytester: pytest.Pytester, value: str, problem: str) -> None:
    pyproject = pytester.makepyprojecttoml(f"[tool.mcpdebug]\nmax_runs = {value}\n")
    directory = pytester.path / ".mcpdebug"
    done = subprocess.run(
        [MCPDEBUG, "serve", "--dir", str(directory)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"mcpdebug serve: {pyproject} [tool.mcpdebug] max_runs: {problem}"), line
    assert not (directory / "server.json").exists()


# The CLI and xdist ---------------------------------------------------------------------------------------


def test_cli_logs(rec: Recorded) -> None:
    cwd = rec.dir.parent
    last = mcpdebug(cwd, "logs", "latest", "test_many_stdout_lines", "--range", "-3:")
    assert last.returncode == 0, last.stderr
    assert body(last.stdout) == ["498: line 498 of 500", "499: line 499 of 500", "500: line 500 of 500"]

    grep = mcpdebug(cwd, "logs", "latest", MANY, "--grep", r"line 25\d of", "-C", "1", "--max-results", "1")
    assert grep.returncode == 0, grep.stderr
    assert "found 10 occurrences" in grep.stdout
    assert "249: line 249 of 500\n>>> 250: line 250 of 500 <<<\n251: line 251 of 500" in grep.stdout
    assert "248:" not in grep.stdout and "252:" not in grep.stdout

    outside = mcpdebug(cwd, "logs", rec.run_id)  # no test: the run's own output
    assert body(outside.stdout) == [
        "1: collecting test_streams.py",
        "2: session fixture: starting the service",
    ]

    bad = mcpdebug(cwd, "logs", "latest", MANY, "--range", "600:700")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "mcpdebug: Invalid line range: start=600, end=700 is outside lines 1-500." in bad.stderr


@pytest.mark.anyio
async def test_xdist_output_is_attributed_to_each_test(pytester: pytest.Pytester, suite: SuiteCopier) -> None:
    suite("xdist")
    result = run_inner(pytester, "--mcp-debug", "-n", "2")
    assert result.ret == 1
    store = recorded(pytester.path / ".mcpdebug")
    async with Client(build_server(store)) as client:
        found = await call(client, "search_output", pattern=r"on worker gw\d", context=0)
    assert "found 6 occurrences in all output of run" in found
    hits = re.findall(
        r"^Occurrence \d+ at line 1 of (\S+):\n>>> 1: (.+) on worker (gw\d) <<<$", found, re.MULTILINE
    )
    assert dict((nodeid, what) for nodeid, what, _ in hits) == {
        "test_xdist_alpha.py::test_alpha_sleep_short": "alpha short sleep",
        "test_xdist_alpha.py::test_alpha_sleep_long": "alpha long sleep",
        "test_xdist_alpha.py::test_alpha_health_check_fails": "health check ran",
        "test_xdist_beta.py::test_beta_sleep_short": "beta short sleep",
        "test_xdist_beta.py::test_beta_sleep_long": "beta long sleep",
        "test_xdist_beta.py::test_beta_sort_fails": "sort check ran",
    }
    run_id = store.runs()[0]["run_id"]
    for nodeid, _, worker in hits:
        test = store.test(run_id, nodeid)
        assert test is not None and test["worker"] == worker  # printed on the worker that ran it
    assert {worker for _, _, worker in hits} == {"gw0", "gw1"}


def test_session_fixture_teardown_output_is_the_runs_not_the_last_tests(pytester: pytest.Pytester) -> None:
    """pytest runs session teardown in the last test's teardown phase; its output is the run's."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def db():
            print("db: up")
            yield "db"
            print("db: down")

        @pytest.fixture
        def fn():
            yield
            print("fn: down")
        """
    )
    pytester.makepyfile(
        test_s="""
        def test_one(db, fn):
            print("one")

        def test_two(db, fn):
            print("two")
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(passed=2)
    store = recorded(pytester.path / ".mcpdebug")
    try:
        from mcpdebug.views import lookup

        run = lookup.run(store, "latest")
        assert output_text(store, run).splitlines()[2:4] == ["1: db: up", "2: db: down"]
        last = output_text(store, run, "test_two").splitlines()
        assert last[2:4] == ["1: two", "2: fn: down"] and "db: down" not in "\n".join(last)
    finally:
        store.close()


@pytest.mark.parametrize("capture", ["sys", "tee-sys"])
def test_sys_capture_is_recorded_too(pytester: pytest.Pytester, capture: str) -> None:
    """--capture=sys keeps output in memory, not in a file: it is read from pytest's buffer."""
    pytester.makepyfile(
        test_sys="""
        import sys

        def test_prints():
            for i in range(3000):
                print(f"row {i}")
            print("done", file=sys.stderr)
        """
    )
    run_inner(pytester, "--mcp-debug", f"--capture={capture}").assert_outcomes(passed=1)
    store = recorded(pytester.path / ".mcpdebug")
    try:
        from mcpdebug.views import lookup

        run = lookup.run(store, "latest")
        tail = output_text(store, run, "test_prints", start=-2, end=-1).splitlines()
        assert tail[2:4] == ["3000: row 2999", "3001: [stderr] done"]
    finally:
        store.close()


def test_output_emptied_by_another_reader_is_said_at_the_end(pytester: pytest.Pytester) -> None:
    """Something other than pytest's own read empties its capture file after the tail read part of
    it: the summary says so (what was written between the tail's read and the emptying is lost, and
    nothing can tell how much), and what was read before and written after is recorded."""
    pytester.makepyfile(
        test_taken=UNTIL_RECORDED
        + textwrap.dedent(
            """
        import sys, time

        def test_taken(request):
            print("x" * 99, flush=True)
            until_recorded("x" * 99)  # a tick old (or more, on a loaded machine): the tail has read it
            capman = request.config.pluginmanager.getplugin("capturemanager")
            print("unread", flush=True)
            capman._global_capturing.out.snap()  # another reader empties pytest's file
            print("after", flush=True)
        """
        )
    )
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["mcpdebug: warning: pytest's capture was emptied by another reader once (e.g. --pdb): output*"]
    )
    store = recorded(pytester.path / ".mcpdebug")
    try:
        from mcpdebug.views import lookup

        text = output_text(store, lookup.run(store, "latest"), "test_taken")
        assert "x" * 99 in text and "after" in text
    finally:
        store.close()


def test_quiet_tests_between_others_leave_each_its_own_lines(pytester: pytest.Pytester) -> None:
    """A quiet test keeps no unit of its own (the running test's unit is reused until it has lines):
    a test after it numbers its lines from 1, and a record logged by a test that prints nothing is
    filed under that test, not the next."""
    pytester.makepyfile(
        test_quiet="""
        import logging

        def test_quiet():
            pass

        def test_logs():
            logging.getLogger("app").warning("logged only")

        def test_quiet_again():
            pass

        def test_prints():
            print("printed")
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(passed=4)
    store = recorded(pytester.path / ".mcpdebug")
    try:
        from mcpdebug.views import lookup

        run = lookup.run(store, "latest")
        assert numbered(output_text(store, run, "test_logs")) == ["1: [log] WARNING app: logged only"]
        assert numbered(output_text(store, run, "test_prints")) == ["1: printed"]
        for quiet in ("test_quiet.py::test_quiet", "test_quiet.py::test_quiet_again"):
            reply = output_text(store, run, quiet)
            assert reply.startswith(f"No output stored for {quiet} in run")
            assert "test_logs: 1 lines" in reply and "test_prints: 1 lines" in reply
    finally:
        store.close()


def test_a_tail_stopped_during_a_phase_still_ends_it_as_pytest_would(pytester: pytest.Pytester) -> None:
    """The tail does pytest's capture of each phase: stopped in the middle of one, it still suspends
    pytest's capture and reads its files at the phase's end, so the report keeps the phase's output
    and what runs after is pytest's capture as usual."""
    pytester.makepyfile(
        test_stop="""
        import sys

        def test_stops_the_tail(request):
            print("before the stop")
            request.config.pluginmanager.get_plugin("mcpdebug-output").stop()
            print("after the stop")
            assert 0

        def test_after():
            print("the next test's")
            assert 0
        """
    )
    result = run_inner(pytester, "--mcp-debug", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "before the stop\nafter the stop" in out  # the first test's call section, whole
    assert "the next test's" in out
    assert out.count("Captured stdout call") == 2
