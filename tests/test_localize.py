"""The dynamic localizer for real: a run recorded with coverage, `localize` (the tool and the CLI)
re-running its failing tests with small in-memory changes of the top suspects, the result stored
with the run and weighed by get_suspects and get_failure; the project's files never written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from test_tool_contract import checked

from helpers import recorded, run_inner
from mcpdebug.app import build_server
from mcpdebug.views.localize import GRACE
from pytest_mcpdebug.localize.mutations import changes
from pytest_mcpdebug.localize.patching import CannotPatch, patch

pytestmark = pytest.mark.anyio

PRICING = """
def line_price(price, qty):
    if qty > 10:  # the bug: bulk starts at 10
        return round(price * qty * 0.9, 2)
    return price * qty


def label(qty):
    return "bulk" if qty >= 10 else "single"
"""

TESTS = """
from pricing import label, line_price


def test_single():
    assert line_price(2, 3) == 6


def test_bulk():
    assert line_price(1, 20) == 18


def test_bulk_at_ten():
    assert line_price(1, 10) == 9


def test_label():
    assert label(10) == "bulk" and label(2) == "single"
"""

BUG = ("pricing.py", 2)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_each_change_is_one_line_that_differs() -> None:
    for line in [
        "    if qty > 10:",
        "    return a and not b",
        "        x = y[0] + 1",
        "    while n is not None:",
    ]:
        found = changes(line)
        assert found and all(c.text != line and "\n" not in c.text for c in found)
    texts = [c.text for c in changes("    if qty > 10:")]
    assert "    if qty >= 10:" in texts and "    if not (qty > 10):" in texts
    assert not any("not (" in c.text for c in changes("    while n is not None:"))  # no endless loops


def test_a_change_runs_in_memory_and_is_undone(tmp_path: Path) -> None:
    path = tmp_path / "pricing.py"
    path.write_text(textwrap.dedent(PRICING).lstrip())
    module = types.ModuleType("pricing_probe")
    source = path.read_text()
    exec(compile(source, str(path), "exec"), module.__dict__)
    assert module.line_price(1, 10) == 10
    undo = patch(str(path), source, 2, "    if qty >= 10:  # changed")
    assert module.line_price(1, 10) == 9.0
    undo()
    assert module.line_price(1, 10) == 10
    assert path.read_text() == source  # never written
    with pytest.raises(CannotPatch, match="not inside a function"):
        patch(str(path), source + "\nLIMIT = 3\n", len(source.splitlines()) + 2, "LIMIT = 4")


def record(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(pricing=PRICING, test_pricing=TESTS)
    run_inner(pytester, "--mcp-debug-coverage").assert_outcomes(failed=1, passed=3)
    return pytester.path / ".mcpdebug"


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The reply's structuredContent, validated against the tool's outputSchema (as the contract test)."""
    schema = {t.name: t.output_schema for t in (await client.list_tools()).tools}[tool]
    return checked(await client.call_tool(tool, arguments), schema)


async def test_localize_names_the_line_whose_change_makes_the_failing_test_pass(
    pytester: pytest.Pytester,
) -> None:
    directory = record(pytester)
    before = (pytester.path / "pricing.py").read_text()
    store = recorded(directory)
    async with Client(build_server(store)) as client:
        failure = (await client.call_tool("get_failure", {})).content[0].text
        assert "Not localized yet: localize(" in failure
        with anyio.fail_after(120):
            reply = await call(client, "localize", budget=20)
        assert (pytester.path / "pricing.py").read_text() == before  # the project's files untouched
        fixed = [row for row in reply["lines"] if row["fixed"]]
        assert fixed and (fixed[0]["file"], fixed[0]["line"]) == BUG, reply["text"]
        assert fixed[0]["change"] == "'>' -> '>='" and fixed[0]["broke"] == 0
        assert "pricing.py:2 ('>' -> '>='): 1/1 failing pass" in reply["text"]
        ranked = await call(client, "get_suspects", top=3)
        first = ranked["suspects"][0]
        assert (first["file"], first["line"]) == BUG and first["rank"] == "1"
        assert "made 1/1 failing tests pass" in first["why"]
        failure = (await client.call_tool("get_failure", {})).content[0].text
        assert "Localized (" in failure and "changing pricing.py:2 ('>' -> '>=') made 1/1" in failure
    store.close()


def test_the_command_localizes_and_stores_the_result(pytester: pytest.Pytester) -> None:
    directory = record(pytester)
    command = [sys.executable, "-m", "mcpdebug.cli", "localize", "--budget", "20", "--dir", str(directory)]
    done = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Lines whose change turned failing tests green" in done.stdout
    assert "pricing.py:2 ('>' -> '>=')" in done.stdout
    store = recorded(directory)
    result = store.localization(store.run_ids(1)[0])
    assert result is not None and any(line.fixed for line in result.lines)
    store.close()


def test_a_store_outside_the_project_localizes_the_same_tests(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The plan lives in the store; a store elsewhere must not move pytest's rootdir (node ids)."""
    directory = tmp_path_factory.mktemp("elsewhere") / "store"
    pytester.makepyfile(pricing=PRICING, test_pricing=TESTS)
    run_inner(pytester, "--mcp-debug-coverage", f"--mcp-debug-dir={directory}").assert_outcomes(
        failed=1, passed=3
    )
    command = [sys.executable, "-m", "mcpdebug.cli", "localize", "--budget", "20", "--dir", str(directory)]
    done = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "none of the failing tests was collected" not in done.stdout
    assert "pricing.py:2 ('>' -> '>=')" in done.stdout, done.stdout


SLOW = """
import time


def total(prices):
    time.sleep(0.3)
    result = 0
    count = 0
    for price in prices:
        count = count + 1
        if price > 0:
            result = result + price * 2  # the bug: no doubling
    return result
"""

SLOW_TESTS = """
from slow import total


def test_total():
    assert total([1, 2, 3]) == 6


def test_empty():
    assert total([]) == 0
"""


def test_the_budget_holds_the_whole_call(pytester: pytest.Pytester) -> None:
    """Ranking, the process's start-up and its changes all count: a budget too small for every line
    stops it in time, and says so."""
    pytester.makepyfile(slow=SLOW, test_slow=SLOW_TESTS)
    run_inner(pytester, "--mcp-debug-coverage").assert_outcomes(failed=1, passed=1)
    directory = pytester.path / ".mcpdebug"
    budget = 3.0
    command = [
        sys.executable,
        "-m",
        "mcpdebug.cli",
        "localize",
        "--budget",
        str(budget),
        "--dir",
        str(directory),
    ]
    done = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    store = recorded(directory)
    result = store.localization(store.run_ids(1)[0])
    store.close()
    assert result is not None and result.elapsed <= budget + GRACE + 1.0, result
    assert not result.complete and "stopped before every planned line" in done.stdout


def test_localize_without_coverage_says_how_to_get_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(pricing=PRICING, test_pricing=TESTS)
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=1, passed=3)
    command = [sys.executable, "-m", "mcpdebug.cli", "localize", "--dir", str(pytester.path / ".mcpdebug")]
    done = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "recorded without per-test coverage" in done.stderr
    assert "--mcp-debug-coverage" in done.stderr
