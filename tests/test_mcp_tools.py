"""The MCP tools and resources, through a real MCP client: in memory for speed, stdio end to end."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import MCPDEBUG
from helpers import both_forms, recorded, run_inner
from mcpdebug.app import build_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def recorded_dir(pytester: pytest.Pytester, suite) -> Path:
    """The `failing` suite and the `noisy` one, recorded without a server (spool only)."""
    suite("failing")
    run_inner(pytester, "--mcp-debug", "--continue-on-collection-errors")
    return pytester.path / ".mcpdebug"


def text(result) -> str:
    assert len(result.content) == 1
    return result.content[0].text


@pytest.mark.anyio
async def test_tools_over_a_recorded_run(recorded_dir: Path) -> None:
    async with Client(build_server(recorded(recorded_dir))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"list_sessions", "get_run_summary", "list_tests", "get_test"} <= set(tools)
        assert tools["get_test"].annotations.read_only_hint is True

        sessions = await client.call_tool("list_sessions", {})
        run_id = recorded(recorded_dir).runs()[0]["run_id"]
        assert run_id in text(sessions) and "finished, exit status 1 (tests failed)" in text(sessions)
        # the text and the structured form carry the same reply
        assert sessions.structured_content["sessions"][0]["run_id"] == run_id
        both_forms(sessions)

        summary = text(await client.call_tool("get_run_summary", {}))
        for line in [
            "- FAILED test_mixed.py::test_output_then_fail (call): assert (1 + 1) == 3",
            "- ERROR test_fixture_error.py::test_query_users (setup): RuntimeError: database unavailable",
            "- ERROR test_teardown_error.py::test_workspace_has_config (teardown): ValueError: cleanup failed",
            "- ERROR test_collection_error.py: ModuleNotFoundError: No module named 'not_a_real_module_xyz'",
        ]:
            assert line in summary
        assert "- FAILED test_assertion.py::test_order_total (call): AssertionError: assert" in summary
        assert f"Run {run_id} (pytest): finished, exit status 1" in summary

        failed = text(await client.call_tool("list_tests", {"outcome": "failed,error"}))
        assert "4 of 7 tests with outcome failed,error" in failed
        assert "test_pass" not in failed

        detail = text(await client.call_tool("get_test", {"test": "test_output_then_fail"}))
        assert "test_mixed.py::test_output_then_fail: FAILED" in detail
        nodeid = "test_mixed.py::test_output_then_fail"
        assert (
            "--- captured output (stdout, stderr, log, warnings) ---\n"
            f"Lines 1-4 of 4 ({nodeid}; run {run_id}; stdout, stderr, log and warnings interleaved):\n\n"
            "1: step 1: loading config\n2: step 2: connecting\n3: step 3: computing\n"
            "4: [stderr] warning: using fallback arithmetic\n"
        ) in detail
        assert (
            f"[Access full output: mcpdebug://runs/{run_id}/tests/test_mixed.py%3A%3Atest_output_then_fail/output]"
            in detail
        )
        assert "E       assert (1 + 1) == 3" in detail

        runs = (await client.read_resource("mcpdebug://runs")).contents[0].text
        assert run_id in runs
        one = (await client.read_resource(f"mcpdebug://runs/{run_id}")).contents[0].text
        assert one == summary


@pytest.mark.anyio
async def test_errors_say_what_exists(recorded_dir: Path) -> None:
    store = recorded(recorded_dir)
    run_id = store.runs()[0]["run_id"]
    async with Client(build_server(store)) as client:
        bad_run = await client.call_tool("get_run_summary", {"run_id": "nope"})
        assert bad_run.is_error and f"Unknown run 'nope'. Recorded runs, newest first: {run_id}" in text(
            bad_run
        )
        bad_test = await client.call_tool("get_test", {"test": "no_such_test"})
        assert bad_test.is_error
        assert "No test matching 'no_such_test'" in text(bad_test)
        assert "test_fixture_error.py::test_query_users" in text(bad_test)  # failed tests are suggested
        ambiguous = await client.call_tool("get_test", {"test": "test_"})
        assert ambiguous.is_error and "matches several tests" in text(ambiguous)
        bad_outcome = await client.call_tool("list_tests", {"outcome": "broken"})
        assert bad_outcome.is_error and "use one or more of passed, failed" in text(bad_outcome)
        # the server is unaffected
        assert not (await client.call_tool("list_sessions", {})).is_error


@pytest.mark.anyio
async def test_empty_store(tmp_path: Path) -> None:
    async with Client(build_server(recorded(tmp_path / ".mcpdebug"))) as client:
        assert "No sessions recorded yet" in text(await client.call_tool("list_sessions", {}))
        empty = await client.call_tool("get_run_summary", {})
        assert empty.is_error and "No runs recorded yet" in text(empty)


def test_long_output_is_bounded(pytester: pytest.Pytester, suite) -> None:
    suite("noisy")
    run_inner(pytester, "--mcp-debug")
    store = recorded(pytester.path / ".mcpdebug")

    async def main() -> str:
        async with Client(build_server(store)) as client:
            return text(
                await client.call_tool("get_test", {"test": "test_many_stdout_lines", "tail_lines": 5})
            )

    detail = anyio.run(main)
    run_id = store.runs()[0]["run_id"]
    nodeid = "test_noisy.py::test_many_stdout_lines"
    assert f"Lines 496-500 of 500 ({nodeid}; run {run_id};" in detail
    assert "\n496: line 496 of 500\n" in detail and "\n500: line 500 of 500\n" in detail
    assert "line 495 of 500" not in detail
    assert "[Output truncated: Showing last 5 of 500 lines]\n[495 lines omitted]" in detail
    assert f'[Earlier lines: get_output(run_id="{run_id}", test="{nodeid}", start=296, end=495)]' in detail


def test_acceptance_over_stdio(pytester: pytest.Pytester, suite) -> None:
    """Recorded with no server; then `mcpdebug serve` started by the SDK's stdio client in that folder."""
    suite("failing")
    result = run_inner(pytester, "--mcp-debug", "--continue-on-collection-errors")
    assert result.ret == 1

    async def main() -> tuple[str, str]:
        params = StdioServerParameters(command=MCPDEBUG, args=["serve"], cwd=str(pytester.path))
        async with Client(params) as client:
            summary = text(await client.call_tool("get_run_summary", {"run_id": "latest"}))
            detail = text(
                await client.call_tool("get_test", {"test": "test_mixed.py::test_output_then_fail"})
            )
            return summary, detail

    summary, detail = anyio.run(main)
    assert "FAILED test_assertion.py::test_order_total (call): AssertionError" in summary
    assert (
        "ERROR test_fixture_error.py::test_query_users (setup): RuntimeError: database unavailable" in summary
    )
    assert "step 3: computing" in detail
    assert not (pytester.path / ".mcpdebug" / "server.json").exists()  # removed on clean exit
    assert not list((pytester.path / ".mcpdebug" / "spool").iterdir())  # ingested at start


def test_server_json_is_private(server) -> None:
    info = server.directory / "server.json"
    assert info.stat().st_mode & 0o777 == 0o600
    assert json.loads(info.read_text())["pid"] == server.process.pid
