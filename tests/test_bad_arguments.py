"""Hostile arguments for every tool, taken from the server's own ``tools/list``: each reply is a clean
error that names what is valid, and the server keeps answering. A regex that backtracks
catastrophically is stopped (within 2 s: `benchmarks/mcp_surface.py` measures it), and other calls
are answered meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from hostile import CLEAN, NODE, calls, target_store
from mcpdebug.app import build_server
from mcpdebug.store import Store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BlockingPortal, Client, Store]]:
    """A recorded run (one failing test that printed, one that passed) served to an in-memory client
    that lives across hypothesis's examples."""
    store = target_store(tmp_path_factory.mktemp("hostile"))
    with start_blocking_portal("asyncio") as portal:
        client = portal.wrap_async_context_manager(Client(build_server(store)))
        with client as entered:
            yield portal, entered, store
    store.close()


@pytest.fixture(scope="module")
def tools(served: tuple[BlockingPortal, Client, Store]) -> list[Any]:
    """The server's own tools/list: every tool it lists gets hostile calls."""
    portal, client, _ = served
    return Listed(portal.call(client.list_tools).tools)


class Listed(list):  # type: ignore[type-arg]
    """The tools, with a short repr in hypothesis's report of a failing example."""

    def __repr__(self) -> str:
        return f"<{len(self)} tools>"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_tool_refuses_hostile_arguments_cleanly(
    served: tuple[BlockingPortal, Client, Store], tools: list[Any], data: st.DataObject
) -> None:
    portal, client, _ = served
    name, args = data.draw(calls(tools), label="call")
    result = portal.call(client.call_tool, name, args)
    text = result.content[0].text
    assert result.is_error, (name, args, text[:300])
    assert len(text) <= 2000 and "Traceback" not in text and "pydantic" not in text, text[:500]
    assert text != f"Error executing tool {name}", "a crash of the tool"
    assert CLEAN.search(text), (name, args, text)
    assert portal.call(client.call_tool, "list_sessions", {}).is_error is False  # still answering


def test_every_tool_was_tried(tools: list[Any]) -> None:
    """The strategy covers every listed tool (a new tool gets hostile calls without a change here).

    Derandomized: the same draws every run, so a tool the draws miss fails every run, not one in
    fifty (random draws missed ``get_stack_trace`` once in 300)."""
    seen: set[str] = set()

    @settings(max_examples=25 * len(tools), deadline=None, database=None, derandomize=True)
    @given(call=calls(tools))
    def collect(call: tuple[str, dict[str, Any]]) -> None:
        seen.add(call[0])

    collect()
    assert seen == {t.name for t in tools}


def test_a_catastrophic_regex_is_stopped_and_other_calls_go_on(
    served: tuple[BlockingPortal, Client, Store],
) -> None:
    portal, client, _ = served
    answered: list[float] = []

    async def meanwhile() -> None:
        async with anyio.create_task_group() as tasks:
            search: dict[str, Any] = {}

            async def catastrophic() -> None:
                began = time.monotonic()
                search["result"] = await client.call_tool(
                    "search_output", {"pattern": "(a|aa)+$", "test": NODE}
                )
                search["seconds"] = time.monotonic() - began

            tasks.start_soon(catastrophic)
            await anyio.sleep(0)
            while "result" not in search:
                began = time.monotonic()
                reply = await client.call_tool("get_run_summary", {})
                assert not reply.is_error
                answered.append(time.monotonic() - began)
                await anyio.sleep(0.05)
        result = search["result"]
        assert result.is_error and "backtracks catastrophically" in result.content[0].text
        # unstopped, this pattern on these lines would run for years; a loaded machine gets a minute
        assert search["seconds"] < 60, search["seconds"]

    portal.call(meanwhile)
    assert answered, "no other call was answered while the search ran"
