"""Node ids as people type them: non-ASCII parameters escaped as pytest prints them, or as typed."""

from __future__ import annotations

import subprocess
import unicodedata

import pytest
from _pytest.compat import ascii_escaped
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from conftest import MCPDEBUG
from helpers import recorded, run_inner
from mcpdebug.app import build_server
from mcpdebug.views.lookup import spellings

ODD = """
import pytest

@pytest.mark.parametrize("word", ["ü ñ", "plain", "C:\\\\new"])
def test_odd(word):
    assert word == "plain"

@pytest.mark.parametrize("n", [1], ids=["café"])
def test_named(n):
    assert n == 2

def test_ünïcode_name():
    assert False
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def cli(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPDEBUG, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_cli_finds_a_test_typed_with_or_without_pytests_escapes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_odd=ODD)
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=4, passed=1)
    stored = r"test_odd.py::test_odd[\xfc \xf1]"
    for typed in ("test_odd.py::test_odd[ü ñ]", stored, "test_odd[ü ñ]", "ü ñ"):
        found = cli(pytester.path, "failure", "latest", typed)
        assert found.returncode == 0, found.stderr
        assert found.stdout.startswith(f"FAILED {stored} (call) in run "), typed
        assert "AssertionError: assert 'ü ñ' == 'plain'" in found.stdout
    decomposed = unicodedata.normalize("NFD", "test_odd[ü ñ]")  # as some keyboards and file systems write it
    assert cli(pytester.path, "show", "latest", decomposed).stdout.startswith(f"{stored}: FAILED")
    backslash = cli(pytester.path, "show", "latest", r"test_odd[C:\new]")  # pytest shows C:\\new
    assert backslash.stdout.startswith(r"test_odd.py::test_odd[C:\\new]: FAILED"), backslash.stderr
    assert cli(pytester.path, "show", "latest", "test_named[café]").stdout.startswith(
        r"test_odd.py::test_named[caf\xe9]: FAILED"
    )
    assert cli(pytester.path, "show", "latest", "test_ünïcode_name").stdout.startswith(
        "test_odd.py::test_ünïcode_name: FAILED"  # names are never escaped
    )
    missing = cli(pytester.path, "failure", "latest", "test_odd[ö]")
    assert missing.returncode != 0 and "No test matching 'test_odd[ö]'" in missing.stderr


@pytest.mark.anyio
async def test_mcp_tools_take_both_forms_and_ids_pytest_left_unescaped(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_odd=ODD)
    run_inner(
        pytester,
        "--mcp-debug",
        "-o",
        "disable_test_id_escaping_and_forfeit_all_rights_to_community_support=true",
    ).assert_outcomes(failed=4, passed=1)
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        for typed in ("test_odd.py::test_odd[ü ñ]", r"test_odd.py::test_odd[\xfc \xf1]"):
            for tool in ("get_failure", "get_test"):
                reply = await client.call_tool(tool, {"test": typed})
                assert not reply.is_error, reply.content[0].text
                assert "test_odd.py::test_odd[ü ñ]" in reply.content[0].text


@given(st.text(max_size=12))
def test_pytests_escaped_form_is_among_the_spellings_of_the_typed_one_and_back(value: str) -> None:
    typed, shown = f"t.py::test[{value}]", f"t.py::test[{ascii_escaped(value)}]"
    assert shown in (typed, *spellings(typed))
    assert typed in (shown, *spellings(shown))
