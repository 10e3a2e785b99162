"""Diagnosis beyond the stack, for real: per-test coverage and suspects (serial and under xdist),
trace_test and get_history through a managed run, flaky history across commits of a real git
repository, history kept across retention, pytest-cov's measurement reused, and nothing of it loaded
when it is not asked for (the flaky history test checks that)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from helpers import FAST, Events, recorded, run_inner
from mcpdebug.app import build_server
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.limits import Limits
from pytest_mcpdebug.recording.code_version import code_version

pytestmark = pytest.mark.anyio
BUG = ("shop/pricing.py", 16)
"""The fixture's faulty line: `return subtotal - 10` in discount(), never on a failing stack."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A typed tool's structured reply (its ``text`` holds the whole report), asserting no error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def text_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    reply: str = result.content[0].text
    return reply


@pytest.fixture
async def served(pytester: pytest.Pytester) -> AsyncIterator[Client]:
    """A server as `mcpdebug serve` wires it (ingest on port 0, a runner), with an in-memory client."""
    store = Store(pytester.path / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    try:
        async with Client(build_server(store, sessions, runner)) as client:
            yield client
    finally:
        with anyio.fail_after(30):
            await runner.close()
            await ingest.close()
        store.close()


async def test_the_helper_that_returns_a_wrong_value_is_found(
    pytester: pytest.Pytester, suite, served
) -> None:
    suite("suspects")
    with anyio.fail_after(90):
        finished = await text_of(
            served, "run_tests", args=[*FAST, "--mcp-debug-coverage"], cwd=str(pytester.path)
        )
    assert "2 failed, 8 passed" in finished

    reply = await call(served, "get_suspects", top=8)
    top = [(s["file"], s["line"]) for s in reply["suspects"]]
    assert BUG in top[:3], reply["text"]
    first = reply["suspects"][0]
    assert (
        first["source"].startswith("return subtotal - 10") and first["failed"] == 2 and first["passed"] == 0
    )
    assert (reply["failing_tests"], reply["passing_tests"]) == (2, 8)
    assert "shop/pricing.py:16 in discount" in reply["text"]
    assert first["why"].startswith("ran in 2/2 failing, 0 passing tests (Ochiai 1.00)")
    # discount() is two calls down from the failing assert: the test calls Cart.total(), which calls it
    why = "why: ran in 2/2 failing, 0 passing tests (Ochiai 1.00); in discount(), called by Cart.total()"
    assert f"{why} (cart.py:21); a return" in reply["text"]
    # the condition that let the failing tests into the faulty line is next; the callers are on the way
    assert top[1] == ("shop/pricing.py", 15) and "decides a block only failing tests entered" in reply["text"]
    assert "called by test_cart.py:" in reply["text"]
    assert "tests/" not in reply["text"].split("Next:")[0]  # the project's code, not its tests

    functions = await call(served, "get_suspects", level="function", top=10)
    assert ("shop/pricing.py", 10) in [(s["file"], s["line"]) for s in functions["suspects"]]  # def discount

    failure = await text_of(served, "get_failure", test="test_ten_off")
    assert "Suspects (--mcp-debug-coverage" in failure and "shop/pricing.py:16 in discount" in failure

    with anyio.fail_after(90):
        traced = await call(served, "trace_test", test="test_ten_off")
    assert traced["outcome"] == "failed" and not traced["outcome_changed"]
    assert traced["failing_line"] == "tests/test_cart.py:50"
    chain = traced["text"]
    assert "total = 15, set at tests/test_cart.py:49" in chain
    assert "returned by discount() at shop/pricing.py:16: return subtotal - 10" in chain
    assert any(c["returned_by"] == "discount() at shop/pricing.py:16" for c in traced["changes"])

    total = await call(served, "get_history", test="test_ten_off", name="total")
    assert (
        "tests/test_cart.py:49 in test_ten_off: total: unset -> 15  (returned by Cart.total()"
        in total["text"]
    )
    assert "returned by discount() at shop/pricing.py:16" in total["text"]  # followed to the helper's line

    missing = await served.call_tool("get_history", {"test": "test_single_item"})
    assert missing.is_error and "trace_test(test=" in missing.content[0].text


async def test_suspects_of_a_run_without_coverage_say_how_to_get_them(
    pytester: pytest.Pytester, suite, served
) -> None:
    suite("suspects")
    with anyio.fail_after(90):
        await text_of(served, "run_tests", args=list(FAST), cwd=str(pytester.path))
    reply = await served.call_tool("get_suspects", {})
    assert not reply.is_error, reply.content[0].text  # an answer the agent acts on
    data = reply.structured_content
    assert isinstance(data, dict) and data["suspects"] == [] and data["failing_tests"] == 2
    assert "was recorded without per-test coverage, so there are no suspects to rank" in data["text"]
    assert data["next_call"].startswith('run_tests(args=["--mcp-debug-coverage", ')
    assert "`mcpdebug_coverage = true`" in data["text"] and "mcpdebug init --coverage" in data["text"]
    with anyio.fail_after(90):  # the call it names, as named, gives the suspects
        args = json.loads(data["next_call"].split("args=", 1)[1].split("]", 1)[0] + "]")
        await text_of(served, "run_tests", args=args, cwd=str(pytester.path))
    ranked = await call(served, "get_suspects")
    assert BUG in [(s["file"], s["line"]) for s in ranked["suspects"][:3]]


async def test_xdist_suspects_equal_the_serial_ones(pytester: pytest.Pytester, suite) -> None:
    suite("suspects")
    run_inner(pytester, "--mcp-debug-coverage")
    run_inner(pytester, "--mcp-debug-coverage", "-n", "2")
    store = recorded(pytester.path / ".mcpdebug")
    parallel, serial = store.run_ids(2)
    assert store.run(parallel)["workers"] == 2
    assert not (pytester.path / ".mcpdebug" / "coverage" / parallel).exists()  # the parts were combined
    async with Client(build_server(store)) as client:
        replies = [await call(client, "get_suspects", run_id=rid, top=50) for rid in (serial, parallel)]
    assert replies[0]["suspects"] and replies[0]["suspects"] == replies[1]["suspects"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


FLAKY = """
import sys
from pathlib import Path

from calc import add

COUNTER = Path(__file__).with_name("runs.count")


def test_sometimes():
    n = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(n))
    assert n != 2, "fails on the second run only"


def test_stable():
    assert add(2, 2) == 4


def test_nothing_of_coverage_or_tracing_is_loaded(request):
    manager = request.config.pluginmanager
    assert manager.get_plugin("mcpdebug-recorder") is not None
    assert manager.get_plugin("mcpdebug-coverage") is None and manager.get_plugin("mcpdebug-tracer") is None
    assert not [m for m in sys.modules if m.startswith(("pytest_mcpdebug.coverage", "pytest_mcpdebug.tracing"))]
    assert sys.gettrace() is None
"""


async def test_flaky_and_new_failures_across_commits(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flaky=FLAKY, calc="def add(a, b):\n    return a + b\n")
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "test_flaky.py", "calc.py")
    git(pytester.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    good = git(pytester.path, "rev-parse", "HEAD")
    for n in range(3):  # the same code three times: test_sometimes fails once
        run_inner(pytester, "--mcp-debug").assert_outcomes(
            passed=2 if n == 1 else 3, failed=1 if n == 1 else 0
        )
    (pytester.path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(pytester.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "break add")
    run_inner(pytester, "--mcp-debug")

    store = recorded(pytester.path / ".mcpdebug")
    latest, third, *_ = store.run_ids(5)
    async with Client(build_server(store)) as client:
        flaky = await call(client, "list_flaky", runs=50)
        assert [f["test"] for f in flaky["flaky"]] == ["test_flaky.py::test_sometimes"]
        entry = flaky["flaky"][0]
        assert (entry["passes"], entry["failures"], entry["runs"], entry["versioned"]) == (3, 1, 4, True)
        assert "fails on the second run only" in entry["last_failure"]
        assert entry["versions"] == [f"commit {good[:10]}"]

        summary = await text_of(client, "get_run_summary", run_id=latest)
        assert (
            f"history: new: first failure after 3 passes; passed at commit {good[:10]} (run {third})"
            in summary
        )
        history = await call(client, "get_test_history", test="test_stable")
        assert [e["outcome"] for e in history["entries"]] == ["failed", "passed", "passed", "passed"]
        assert history["entries"][1]["commit"] == good[:10] and history["verdict"] == "new"


def test_code_version_is_the_commit_and_a_digest_of_uncommitted_changes(tmp_path: Path) -> None:
    assert "not in a git repository" in code_version(tmp_path)[2]
    git(tmp_path, "init", "-q")
    assert code_version(tmp_path) == ("", "", "the git repository has no commit yet")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert code_version(tmp_path) == (head, "", "")
    (tmp_path / "untracked.py").write_text("ignored\n")
    assert code_version(tmp_path) == (head, "", "")  # only tracked files count
    (tmp_path / "a.py").write_text("x = 2\n")
    commit, changes, note = code_version(tmp_path)
    assert (commit, note) == (head, "") and len(changes) == 16
    (tmp_path / "a.py").write_text("x = 3\n")
    assert code_version(tmp_path)[1] not in ("", changes)


async def test_the_history_outlives_retention(tmp_path: Path) -> None:
    store = Store(tmp_path / ".mcpdebug", limits=Limits(max_runs=1))
    for n, outcome in enumerate(["passed", "failed", "passed"]):
        events = Events(f"run{n}", t0=Events("x").t0 + 100 * n)
        store.apply(
            [
                events.run_started(),
                events(protocol.CodeVersion, commit="c" * 40),
                *events.test("test_a.py::test_x", outcome, message="boom" if outcome == "failed" else ""),
                *events.run_finished(),
            ]
        )
    assert store.run_ids(10) == ["run2"]  # the older runs' output is gone...
    async with Client(build_server(store)) as client:
        history = await call(client, "get_test_history", test="test_x")
        assert [e["run_id"] for e in history["entries"]] == [
            "run2",
            "run1",
            "run0",
        ]  # ...their history is not
        flaky = await call(client, "list_flaky")
        assert (
            flaky["flaky"][0]["test"] == "test_a.py::test_x" and flaky["flaky"][0]["last_failure"] == "boom"
        )


def test_pytest_cov_measurement_is_reused(pytester: pytest.Pytester, suite) -> None:
    pytest.importorskip("pytest_cov")
    suite("suspects")
    result = run_inner(
        pytester, "--mcp-debug-coverage", "--cov=shop", "--cov-report=term", "-p", "pytest_cov"
    )
    result.stdout.fnmatch_lines(["*shop/pricing.py*", "*2 failed, 8 passed*"])  # pytest-cov's own report
    store = recorded(pytester.path / ".mcpdebug")
    (announced,) = store.coverage_files(store.run_ids(1)[0])
    assert announced["combined"] and "measured by pytest-cov" in announced["note"]
    assert announced["tests"] == 10

    from mcpdebug.views import lookup
    from mcpdebug.views.suspects import suspects

    reply = suspects(store, lookup.run(store, "latest"), 3)
    assert (reply.suspects[0].file, reply.suspects[0].line) == BUG
