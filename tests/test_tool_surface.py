"""What a client of `mcpdebug serve` lists first (the core set, at most 25,000 characters), and
listing more within a session: enable_tools, a call by name, notifications/tools/list_changed."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ToolListChangedNotification

from conftest import MCPDEBUG
from helpers import Events
from mcpdebug.app import build_server
from mcpdebug.store import Store
from mcpdebug.tools.catalog import GroupName
from mcpdebug.tools.context import ToolGroup
from mcpdebug.tools.groups import CHOICES, CORE, GROUPS, SelectionError, select

pytestmark = pytest.mark.anyio

MAX_DEFAULT_CHARS = 25_000
"""DESIGN.md, "MCP surface: principles": the default tools/list as a client receives it."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


async def until(check: Any, what: str) -> None:
    """Poll ``check`` until it holds: a notification crosses two processes' event loops."""
    try:
        with anyio.fail_after(10):
            while not check():
                await anyio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"no {what} within 10 s")


async def test_serve_lists_the_core_set_first_and_more_on_request(tmp_path: Path) -> None:
    changes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changes.append(message)

    params = StdioServerParameters(command=MCPDEBUG, args=["serve", "--dir", str(tmp_path / ".mcpdebug")])
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        init = await session.initialize()
        assert init.capabilities.tools is not None and init.capabilities.tools.list_changed is True
        assert "enable_tools(groups=[...])" in (init.instructions or "")
        listed = await session.list_tools()
        size = compact(listed.model_dump(by_alias=True, exclude_none=True, mode="json"))
        assert size <= MAX_DEFAULT_CHARS, size
        assert {t.name for t in listed.tools} == CORE | {"enable_tools"}
        assert size / len(listed.tools) < 2_500  # output schemas included; see test_output_schemas_...

        reply = await session.call_tool("enable_tools", {"groups": ["debug", "hangs"]})
        assert not reply.is_error and reply.structured_content is not None
        added = reply.structured_content["added"]
        assert set(added) == set(GROUPS["debug"].tools) | {"detect_hang"}
        assert "runs" in reply.structured_content["not_listed"]
        await until(lambda: len(changes) == 1, "tools/list_changed")
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == CORE | {"enable_tools", "detect_hang", *GROUPS["debug"].tools}

        again = await session.call_tool("enable_tools", {"groups": ["debug"]})
        assert again.structured_content is not None and again.structured_content["added"] == []
        assert "Nothing to add" in again.content[0].text  # type: ignore[union-attr]

        # a tool named in a reply but not listed yet answers, and its group is listed with it
        tests = await session.call_tool("list_tests", {})
        assert tests.is_error and "No runs recorded yet" in tests.content[0].text  # type: ignore[union-attr]
        await until(lambda: len(changes) == 2, "tools/list_changed after a call by name")
        names = {t.name for t in (await session.list_tools()).tools}
        assert set(GROUPS["runs"].tools) <= names
        unknown = await session.call_tool("no_such_tool", {})
        assert unknown.is_error and "No tool 'no_such_tool'" in unknown.content[0].text  # type: ignore[union-attr]
        assert len(changes) == 2


async def test_a_client_of_the_2026_protocol_hears_of_it_on_its_listen_stream(tmp_path: Path) -> None:
    async with Client(build_server(Store(tmp_path / ".mcpdebug"), groups=["core"])) as client:
        async with client.listen(tools_list_changed=True) as changes:
            reply = await client.call_tool("enable_tools", {"groups": ["processes"]})
            assert not reply.is_error
            with anyio.fail_after(10):
                event = await changes.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        names = {t.name for t in (await client.list_tools()).tools}
        assert set(GROUPS["processes"].tools) <= names


async def test_a_reply_naming_a_tool_not_listed_says_how_to_list_it(tmp_path: Path) -> None:
    store = Store(tmp_path / ".mcpdebug")
    events = Events("20261128-120000-a1b2c3")
    store.apply([events.run_started(), events.start(), *events.test("test_a.py::test_ok", "passed")])
    store.apply(events.run_finished(exit_status=0))
    async with Client(build_server(store, groups=["core"])) as client:
        summary = await client.call_tool("get_run_summary", {})
        hint = 'list_tests(run_id="20261128-120000-a1b2c3") (after enable_tools(groups=["runs"]))'
        assert summary.structured_content is not None and summary.structured_content["next_call"] == hint
        assert not (await client.call_tool("enable_tools", {"groups": ["runs"]})).is_error
        again = await client.call_tool("get_run_summary", {})
        assert again.structured_content is not None
        assert again.structured_content["next_call"] == 'list_tests(run_id="20261128-120000-a1b2c3")'


async def test_read_only_keeps_its_rules_when_groups_are_enabled(tmp_path: Path) -> None:
    server = build_server(Store(tmp_path / ".mcpdebug"), groups=["core"], read_only=True)
    async with Client(server, mode="legacy") as client:
        first = {t.name: t for t in (await client.list_tools()).tools}
        assert set(first) == {"list_sessions", "get_run_summary", "get_failure", "get_hang", "get_output"} | {
            "search_output",
            "get_suspects",
            "enable_tools",
        }
        core = await client.call_tool("enable_tools", {"groups": ["core"]})
        assert core.structured_content is not None and core.structured_content["added"] == []
        assert set(core.structured_content["withheld"]) == {
            "run_tests",
            "evaluate_expression",
            "continue_execution",
        }
        reply = await client.call_tool("enable_tools", {"groups": ["all"]})
        assert not reply.is_error and reply.structured_content is not None
        withheld = set(reply.structured_content["withheld"])
        assert {"detect_hang", "start_process", "step_over", "trace_test", "close_session"} <= withheld
        assert "Not offered (read-only server)" in reply.content[0].text  # type: ignore[union-attr]
        tools = (await client.list_tools()).tools
        assert all(t.annotations and t.annotations.read_only_hint for t in tools)
        assert {"list_tests", "get_stack_trace", "get_logs", "list_breakpoints", "get_history"} <= {
            t.name for t in tools
        }
        for name in ("run_tests", "detect_hang", "start_process"):
            refused = await client.call_tool(name, {})
            assert refused.is_error and "this server is read-only" in refused.content[0].text  # type: ignore[union-attr]


def test_groups_name_every_tool_once_and_the_core_set_is_theirs() -> None:
    seen: list[str] = []
    for name, about in GROUPS.items():
        cls: type[ToolGroup] = getattr(importlib.import_module(about.module), about.cls)
        assert cls.group == name
        defined = [n for n in vars(cls) if getattr(getattr(cls, n), "__mcp_tool__", None) is not None]
        assert tuple(defined) == about.tools, name
        seen += defined
    assert len(seen) == len(set(seen)) == 46
    assert set(CORE) <= set(seen)
    assert get_args(GroupName) == CHOICES

    assert select(["core"]) == {
        "runs": {"list_sessions", "get_run_summary"},
        "failures": {"get_failure"},
        "hangs": {"get_hang"},
        "live": {"run_tests", "evaluate_expression", "continue_execution"},
        "output": {"get_output", "search_output"},
        "diagnosis": {"get_suspects"},
    }
    assert select(["core", "runs"])["runs"] is None and select(["runs", "core"])["runs"] is None
    assert select(["debug", "all"]) == dict.fromkeys(GROUPS)
    with pytest.raises(SelectionError, match="unknown tool group 'nope'; the groups are runs, failures"):
        select(["runs", "nope"])


async def test_output_schemas_are_bare_and_the_inputs_described(tmp_path: Path) -> None:
    def words(schema: Any, path: str = "") -> list[str]:
        if isinstance(schema, list):
            return [w for i, s in enumerate(schema) for w in words(s, f"{path}[{i}]")]
        if not isinstance(schema, dict):
            return []
        found = [f"{path}.{k}" for k in ("description", "default") if k in schema]
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                found += [w for name, sub in value.items() for w in words(sub, f"{path}.{name}")]
            elif isinstance(value, dict | list):
                found += words(value, f"{path}.{key}")
        return found

    async with Client(build_server(Store(tmp_path / ".mcpdebug"), groups=["all"])) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == 47  # 44 before issue 44, enable_tools, get_environment, localize
    for tool in tools:
        assert tool.output_schema is not None and words(tool.output_schema) == [], tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert len(prop.get("description", "")) > 20, (tool.name, name)
    by_name = {t.name: t for t in tools}
    assert by_name["list_sessions"].output_schema["$defs"]["SessionRow"]["required"]
