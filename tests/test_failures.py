"""Failure snapshots: taken in the test process while the frames are alive, read through get_failure."""

from __future__ import annotations

import pytest
from mcp import Client

from helpers import recorded, run_inner
from mcpdebug.app import build_server
from pytest_mcpdebug.values import ITEMS, STRING_CHARS, render


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result) -> str:
    assert len(result.content) == 1
    return result.content[0].text


@pytest.mark.anyio
async def test_a_failing_assertion_shows_its_line_locals_and_compared_values(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_cart="""
        class Order:
            def __init__(self, items):
                self.items = items
                self.customer = "ada@example.com"

        def total(order):
            return sum(order.items) + 1

        def test_total():
            order = Order([1, 2, 3])
            api_token = "s3cr3t-value"
            expected = 6
            actual = total(order)
            assert actual == expected
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=1)
    path = pytester.path / "test_cart.py"
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        reply = text(await client.call_tool("get_failure", {}))
    assert reply.startswith("FAILED test_cart.py::test_total (call) in run ")
    assert "AssertionError: assert 7 == 6" in reply
    assert f"Raised at {path}:14 in test_total()" in reply
    assert f"#0 {path}:14 in test_total()" in reply
    assert "  > 14 |     assert actual == expected" in reply
    for line in (
        "order (test_cart.Order) = <test_cart.Order object at",
        "expected (int) = 6",
        "actual (int) = 7",
        "api_token (str) = <redacted>",
    ):
        assert line in reply
    assert "s3cr3t-value" not in reply.split("locals:")[1]  # (the source line shows the literal itself)
    assert "@py_assert" not in reply  # pytest's rewriting temporaries are not the test's locals


@pytest.mark.anyio
async def test_errors_in_fixtures_and_chains_and_notes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_more="""
        import pytest

        def connect(dsn):
            raise RuntimeError("database unavailable")

        @pytest.fixture
        def db():
            return connect("postgresql://localhost/app")

        def test_query(db):
            pass

        def test_chain():
            try:
                {}["missing"]
            except KeyError as exc:
                raise ValueError("config broken") from exc

        def test_notes():
            err = AssertionError("property failed")
            err.add_note("Falsifying example: test_notes(x=0)")
            raise err
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=2, errors=1)
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:
        setup = text(await client.call_tool("get_failure", {"test": "test_query"}))
        chain = text(await client.call_tool("get_failure", {"test": "test_chain"}))
        notes = text(await client.call_tool("get_failure", {"test": "test_notes"}))
        first = text(await client.call_tool("get_failure", {}))
        passing = await client.call_tool("get_failure", {"test": "nope"})
    assert setup.startswith("ERROR test_more.py::test_query (setup)")
    assert "RuntimeError: database unavailable" in setup
    assert "in connect()" in setup and "dsn (str) = 'postgresql://localhost/app'" in setup
    assert "in db()" in setup and "_pytest" not in setup.split("Other failures")[0]
    assert "ValueError: config broken" in chain and "The above was caused by: KeyError: 'missing'" in chain
    assert "Falsifying example: test_notes(x=0)" in notes
    assert "Other failures in this run (2):" in first
    assert passing.is_error and "No test matching 'nope'" in text(passing)


def test_values_follow_seed_000s_truncation_rules() -> None:
    assert render("x" * 500) == repr("x" * STRING_CHARS) + "... (truncated)"
    assert render(list(range(12))) == f"[0, 1, 2, 3, 4, ... +{12 - ITEMS} more]"
    assert render({"a": 1}) == "{'a': 1}"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert render(Broken()) == "<Broken object; repr() failed: RuntimeError>"


def test_huge_locals_keep_the_snapshot_bounded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_big="""
        def test_big():
            blob = "y" * 5_000_000
            rows = [{"id": i, "payload": "z" * 1000} for i in range(100_000)]
            assert len(rows) == 0
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=1)
    store = recorded(pytester.path / ".mcpdebug")
    [failure] = store.failures(store.runs()[0]["run_id"])
    size = len(store.db.execute("SELECT snapshot FROM failures").fetchone()[0])
    assert size < 200_000
    names = {v.name: v for v in failure["snapshot"].frames[0].locals}
    assert names["blob"].value.endswith("... (truncated)")
    assert names["rows"].value.endswith("... +99995 more]") and names["rows"].ref


@pytest.mark.anyio
async def test_stack_scopes_variables_and_source_of_a_stored_failure(pytester: pytest.Pytester) -> None:
    import json

    pytester.makepyfile(
        test_inv="""
        class Item:
            def __init__(self, sku, qty):
                self.sku = sku
                self.qty = qty

        def reserve(stock, item):
            if stock[item.sku] < item.qty:
                raise LookupError(f"not enough {item.sku}")

        def test_reserve():
            stock = {"apple": 1, "pear": 5}
            wanted = Item("apple", 3)
            reserve(stock, wanted)
        """
    )
    run_inner(pytester, "--mcp-debug").assert_outcomes(failed=1)
    path = str(pytester.path / "test_inv.py")
    async with Client(build_server(recorded(pytester.path / ".mcpdebug"))) as client:

        async def call(name: str, **args):
            result = await client.call_tool(name, args)
            return json.loads(text(result)) if not result.is_error else text(result)

        stack = await call("get_stack_trace")
        assert [(f["id"], f["name"], f["file"], f["line"]) for f in stack["stackFrames"]] == [
            (0, "reserve", path, 8),
            (1, "test_reserve", path, 13),
        ]
        scopes = await call("get_scopes", frame_id=1)
        ref = scopes["scopes"][0]["variablesReference"]
        local = {v["name"]: v for v in (await call("get_variables", variables_reference=ref))["variables"]}
        assert (
            local["stock"]["value"] == "{'apple': 1, 'pear': 5}" and local["stock"]["variablesReference"] > 0
        )
        wanted = await call("get_variables", variables_reference=local["wanted"]["variablesReference"])
        assert {(v["name"], v["value"]) for v in wanted["variables"]} == {("sku", "'apple'"), ("qty", "3")}
        default = await call("get_local_variables")
        assert default["frame"]["name"] == "test_reserve" and default["count"] == 2
        inner = await call("get_local_variables", frame_id=0)
        assert {v["name"] for v in inner["variables"]} == {"stock", "item"}
        source = await call("get_source_context", file="test_inv.py", line=8, lines_context=1)
        assert source["lineContent"] == '        raise LookupError(f"not enough {item.sku}")'
        assert [s["line"] for s in source["surrounding"]] == [7, 8, 9]
        refused = await call("get_source_context", file="/etc/passwd", line=1)
        assert "outside the run's rootdir" in refused
        missing = await call("get_scopes", frame_id=9)
        assert "this failure has frames 0-1" in missing
        bad_ref = await call("get_variables", variables_reference=777)
        assert "No variablesReference 777" in bad_ref


def test_secrets_inside_containers_and_object_reprs_are_redacted() -> None:
    from dataclasses import dataclass

    @dataclass
    class Settings:
        user: str
        password: str
        port: int = 5432

    assert render(Settings("ada", "hunter2")).endswith("Settings(user='ada', password=<redacted>, port=5432)")
    assert render({"user": "ada", "db_password": "hunter2"}) == "{'user': 'ada', 'db_password': <redacted>}"
    try:
        config = {"api_key": "k-123", "host": "db"}
        raise RuntimeError(f"boom with {len(config)} settings")
    except RuntimeError as exc:
        from pytest_mcpdebug.failures.snapshot import take

        snap = take(exc, exc.__traceback__)
    [local] = [v for v in snap.frames[0].locals if v.name == "config"]
    assert "k-123" not in local.value
    assert "k-123" not in repr(snap.children) and "'db'" in repr(snap.children)
