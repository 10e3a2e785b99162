"""What an agent sees, through the SDK's client: every tool described, typed and validated, prompts
with real ids, argument completion, and errors it can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from conftest import MCPDEBUG, SuiteCopier
from helpers import FAST, recorded
from mcpdebug.app import GROUPS, build_server
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from mcpdebug.tools.debug import DebugTools

pytestmark = pytest.mark.anyio

UNITTEST_AND_OBJECTS = """
import unittest


class Account:
    __slots__ = ("owner", "balance")

    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    @property
    def risky(self):
        raise RuntimeError("a property must never be evaluated by a snapshot")


class Totals(unittest.TestCase):
    def test_sum(self):
        account = Account("ada", 10)
        self.assertEqual(sum([1, 2]), 4)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def recorded_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `failing` suite and a unittest one, recorded once for the module (spool only)."""
    project = SuiteCopier(tmp_path_factory.mktemp("contract"))("failing")
    (project / "test_unittest_objects.py").write_text(UNITTEST_AND_OBJECTS)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *FAST,
            "--mcp-debug",
            "--mcp-debug-coverage",
            "--continue-on-collection-errors",
        ],
        cwd=project,
        capture_output=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))},
    )
    return project / ".mcpdebug"


def checked(result: Any, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The reply's structuredContent, validated against the tool's outputSchema; for a report, its
    ``text`` is the text content (both forms carry the same reply)."""
    assert not result.is_error, result.content[0].text
    assert schema is not None and result.structured_content is not None
    jsonschema.validate(result.structured_content, schema)
    data: dict[str, Any] = result.structured_content
    assert len(json.dumps(data, ensure_ascii=False)) <= 30_000  # what Claude Code shows the model
    text = result.content[0].text
    if "text" in data:
        assert data["text"] == text
    return data


async def test_every_tool_is_described_typed_and_its_replies_validate(recorded_dir: Path) -> None:
    store = recorded(recorded_dir)
    run_id = store.runs()[0]["run_id"]
    async with Client(build_server(store)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for tool in tools.values():
            first = (tool.description or "").split("\n", 1)[0]
            assert first.endswith(".") and not first.startswith(" "), tool.name  # one line says what
            assert "\n    " not in tool.description, tool.name  # dedented
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert len(prop.get("description", "")) > 20, (tool.name, name)
            assert tool.output_schema is not None, tool.name
        assert len(tools["get_failure"].output_schema["properties"]) > 5

        schema = {name: tool.output_schema for name, tool in tools.items()}

        async def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
            return checked(await client.call_tool(tool_name, arguments), schema[tool_name])

        sessions = await call("list_sessions")
        assert sessions["sessions"][0]["run_id"] == run_id and sessions["held"] == []
        summary = await call("get_run_summary")
        assert summary["counts"] == {"failed": 3, "error": 2, "passed": 1, "skipped": 1, "xfailed": 1}
        assert {f["test"] for f in summary["failures"]} >= {"test_mixed.py::test_output_then_fail"}
        listed = await call("list_tests", outcome="failed", limit=2)
        assert listed["matching"] == 3 and len(listed["tests"]) == 2
        assert listed["next_call"] == f'list_tests(run_id="{run_id}", outcome="failed", offset=2)'
        detail = await call("get_test", test="test_output_then_fail")
        assert detail["outcome"] == "failed" and [p["phase"] for p in detail["phases"]] == [
            "setup",
            "call",
            "teardown",
        ]

        failure = await call("get_failure", test="test_sum")
        assert failure["kind"] == "failed" and failure["exception"] == "AssertionError: 3 != 4"
        assert failure["file"].endswith("test_unittest_objects.py") and failure["line"] == 20
        # replies that save a call: the unittest call with its arguments named, each library frame
        # named, an object's slots beside its [ref N] (its property never evaluated)
        assert "Assertion (unittest): assertEqual(first=3, second=4) at " in failure["text"]
        assert " in assertEqual() [library]" in failure["text"]
        assert "{owner='ada', balance=10}" in failure["text"]
        assert "a property must never be evaluated" not in failure["text"]

        stack = await call("get_stack_trace", test="test_sum")
        assert stack["stackFrames"][0]["name"] == "test_sum"
        frame_id = stack["stackFrames"][0]["id"]  # library frames (unittest's) hidden
        scopes = await call("get_scopes", frame_id=frame_id, test="test_sum")
        local_ref = scopes["scopes"][0]["variablesReference"]
        variables = await call("get_variables", variables_reference=local_ref, test="test_sum")
        assert {v["name"] for v in variables["variables"]} == {"self", "account"}
        local = await call("get_local_variables", test="test_output_then_fail")
        assert local["frame"]["name"] == "test_output_then_fail"
        source = await call("get_source_context", file="test_mixed.py", line=26, test="test_output_then_fail")
        assert source["lineContent"] == "    assert 1 + 1 == 3"

        no_hang = await call("get_hang")  # an empty answer is a normal reply
        assert no_hang["run_id"] == run_id and "test" not in no_hang and "has no hangs" in no_hang["text"]
        output = await call("get_output", test="test_output_then_fail")
        assert output["total"] == 4 and output["first"] == 1 and output["last"] == 4
        found = await call("search_output", pattern="step \\d")
        assert found["total"] == 3 and found["matches"][0]["text"] == "1: step 1: loading config"
        nothing = await call("search_output", pattern="no such line")
        assert nothing["total"] == 0 and nothing["matches"] == [] and "get_output(" in nothing["hint"]
        logs = await call("get_logs", labels=["latest"], pattern="step")
        assert (
            logs["total_results"] == 3 and logs["lines"][0]["test"] == "test_mixed.py::test_output_then_fail"
        )

        suspects = await call("get_suspects", top=3)
        assert suspects["run_id"] == run_id and len(suspects["suspects"]) <= 3
        history = await call("get_test_history", test="test_output_then_fail")
        assert "test_output_then_fail" in history["text"]
        assert "text" in await call("list_flaky")
        listed_all = await call("enable_tools", groups=["debug"])  # every group is listed here already
        assert (
            listed_all["added"] == [] and listed_all["not_listed"] == [] and "debug" in listed_all["groups"]
        )

        environment = await call("get_environment", name="PATH")
        assert environment["run_id"] == run_id and "PATH" in environment["variables"]
        assert len(environment["shards"]) == 1 and environment["differing"] == {}
        assert environment["shards"][0]["machine"]["cpus"] == str(os.cpu_count())  # what the machine gave it

        called = {
            "list_sessions",
            "get_run_summary",
            "get_environment",
            "list_tests",
            "get_test",
            "get_failure",
        }
        called |= {"get_suspects", "get_test_history", "list_flaky", "enable_tools"}
        called |= {"get_stack_trace", "get_scopes", "get_variables", "get_local_variables"}
        called |= {"get_source_context", "get_hang", "get_output", "search_output", "get_logs"}
        live = {"detect_hang", "evaluate_expression", "continue_execution", "close_session"}
        live |= {"run_tests", "wait_for_stop"}  # called on a live run in test_live_tools_replies_validate
        live |= {"start_process", "control_process", "send_stdin"}  # and on a live process there
        live |= {"trace_test", "get_history"}  # and on a live run's test
        live |= {"localize"}  # on a run recorded with coverage: tests/test_localize.py validates its reply
        assert called | live | DEBUG_TOOLS == set(tools)  # the debug tools: test_debug_tools_replies_validate


async def test_errors_are_one_line_an_agent_can_act_on(recorded_dir: Path) -> None:
    store = recorded(recorded_dir)
    run_id = store.runs()[0]["run_id"]
    async with Client(build_server(store)) as client:

        async def error(name: str, **arguments: Any) -> str:
            result = await client.call_tool(name, arguments)
            assert result.is_error and result.structured_content is None
            text: str = result.content[0].text
            assert len(text) <= 2000 and "pydantic" not in text and "http" not in text, text
            return text

        huge = await error("get_run_summary", run_id="x" * 50_000)
        assert huge.startswith("Unknown run 'xxxxxxxx") and "(49802 more characters)" in huge
        assert f"Recorded runs, newest first: {run_id}." in huge

        missing = await error("get_test")
        assert missing.startswith("get_test: argument test is required. test: A test's node id")
        assert missing.endswith('e.g. test="tests/test_cart.py::test_total".') and "\n" not in missing
        wrong = await error("list_tests", limit="many")
        assert wrong.startswith(
            "list_tests: argument limit must be a whole number (at least 1 and at most 1000), not 'many'."
        )
        assert await error("get_output", stream="stdin") == (
            'get_output: argument stream must be one of "combined", "stdout", "stderr", "log", '
            "\"warnings\", not 'stdin'. stream: combined: stdout, stderr, log records and warnings "
            'interleaved (non-stdout lines tagged); or one of them alone. Default: "combined". '
            'e.g. stream="stderr".'
        )
        unknown = await error("get_test", tset="x")
        assert unknown == "get_test has no argument 'tset'; its arguments: test, run_id, tail_lines."
        many = await error("get_test", test="test_")
        assert many.count("\n  ") == 8 and "matches several tests" in many


async def test_prompts_name_the_calls_with_real_ids_and_arguments_complete(recorded_dir: Path) -> None:
    store = recorded(recorded_dir)
    run_id = store.runs()[0]["run_id"]
    async with Client(build_server(store)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"investigate_failure", "diagnose_hang", "triage_run"}
        assert [a.name for a in prompts["investigate_failure"].arguments] == ["run_id", "test"]
        assert not any(a.required for p in prompts.values() for a in p.arguments)

        message = (await client.get_prompt("investigate_failure", {"test": "test_sum"})).messages[0]
        text = message.content.text
        assert text.startswith(
            f"Investigate why test_unittest_objects.py::Totals::test_sum failed in run {run_id}"
        )
        assert f'1. get_failure(run_id="{run_id}", test="test_unittest_objects.py::Totals::test_sum")' in text
        triage = (await client.get_prompt("triage_run", {})).messages[0].content.text
        assert f'1. get_run_summary(run_id="{run_id}")' in triage and "get_failure(" in triage
        hang = (await client.get_prompt("diagnose_hang", {})).messages[0].content.text
        assert hang.startswith("There is no hang in the recorded runs") and "detect_hang(" in hang

        runs = ResourceTemplateReference(uri="mcpdebug://runs/{run_id}")
        completed = await client.complete(runs, {"name": "run_id", "value": ""})
        assert completed.completion.values == ["latest", run_id]
        by_label = await client.complete(runs, {"name": "run_id", "value": "continue-on"})
        assert by_label.completion.values == [run_id]

        template = ResourceTemplateReference(uri="mcpdebug://runs/{run_id}/tests/{nodeid}/output")
        nodes = await client.complete(
            template, {"name": "nodeid", "value": "output_then"}, context_arguments={"run_id": run_id}
        )
        assert nodes.completion.values == ["test_mixed.py%3A%3Atest_output_then_fail"]
        prompt = PromptReference(name="investigate_failure")
        tests = await client.complete(prompt, {"name": "test", "value": "ORDER"})
        assert tests.completion.values == ["test_assertion.py::test_order_total"]


async def test_tool_groups_list_only_what_was_chosen(recorded_dir: Path, tmp_path: Path) -> None:
    store = recorded(recorded_dir)
    async with Client(build_server(store, groups=["hangs", "output"])) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert names == {"get_hang", "detect_hang", "get_output", "search_output", "get_logs", "enable_tools"}
    assert set(GROUPS) == {
        "runs",
        "failures",
        "hangs",
        "live",
        "output",
        "processes",
        "debug",
        "diagnosis",
        "localize",
    }
    bad = subprocess.run(
        [MCPDEBUG, "serve", "--dir", str(recorded_dir), "--tools", "runs,nope"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "mcpdebug serve: unknown tool group 'nope'; the groups are runs, failures, hangs, live, output, "
        "processes, debug, diagnosis, localize (or core, all)"
    )


def tools_list_sizes(tools: list[Any]) -> dict[str, int]:
    """What a client puts in the model's context per tool: name, description, input schema."""
    return {t.name: len(t.name) + len(t.description or "") + len(json.dumps(t.input_schema)) for t in tools}


async def test_tools_list_fits_its_budget(recorded_dir: Path) -> None:
    async with Client(build_server(recorded(recorded_dir))) as client:
        tools = (await client.list_tools()).tools
    sizes = tools_list_sizes(tools)
    assert sum(sizes.values()) / len(sizes) <= 1000, sizes


async def test_live_tools_replies_validate(pytester: pytest.Pytester) -> None:
    """The tools that run code or drive a held test, on a real run through the SDK client."""
    pytester.makepyfile(
        test_live="""
        def test_fails():
            basket = [1, 2, 3]
            assert sum(basket) == 7
        """
    )
    store = Store(pytester.path / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    processes = ProcessManager(store, sessions, url=url, token=ingest.token)
    try:
        async with Client(build_server(store, sessions, runner, processes)) as client:
            schema = {t.name: t.output_schema for t in (await client.list_tools()).tools}

            async def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
                with anyio.fail_after(60):
                    return checked(await client.call_tool(tool_name, arguments), schema[tool_name])

            args = [*FAST, "--mcp-debug-break-timeout", "60"]
            stopped = await call("run_tests", args=args, cwd=str(pytester.path), break_on_failure=True)
            assert stopped["state"] == "stopped" and stopped["test"] == "test_live.py::test_fails"
            session, run_id = stopped["session_id"], stopped["run_id"]
            value = await call("evaluate_expression", session_id=session, expression="sum(basket)")
            assert value["result"] == "6" and value["type"] == "int"
            stack = await call("get_stack_trace", session_id=session)
            frame = stack["stackFrames"][0]
            scopes = await call("get_scopes", session_id=session, frame_id=frame["id"])
            assert [s["name"] for s in scopes["scopes"]] == ["Locals", "Globals"]
            local = await call("get_local_variables", session_id=session)
            assert {v["name"]: v["value"] for v in local["variables"]}["basket"] == "[1, 2, 3]"
            ref = scopes["scopes"][0]["variablesReference"]
            assert (await call("get_variables", session_id=session, variables_reference=ref))["count"] >= 1
            source = await call(
                "get_source_context", session_id=session, file=frame["file"], line=frame["line"]
            )
            assert source["lineContent"].strip() == "assert sum(basket) == 7"
            continued = await call("continue_execution", session_id=session)
            assert continued["state"] == "running" and continued["run_id"] == run_id
            finished = await call("wait_for_stop", id=run_id, timeout=50)
            assert finished["state"] == "finished" and finished["exit_status"] == 1
            traced = await call("trace_test", test="test_live.py::test_fails", run_id=run_id, timeout=60)
            assert "basket" in traced["text"]
            assert (
                "basket"
                in (await call("get_history", test="test_live.py::test_fails", name="basket"))["text"]
            )
            closed = await call("close_session", session_id=run_id)
            assert closed["state"] == "closed" and "had already ended" in closed["text"]
            detected = await call(
                "detect_hang", command="python -c 'print(1)'", timeout=20, cwd=str(pytester.path)
            )
            assert detected["verdict"] == "COMPLETED" and detected["exit_status"] == 0
    finally:
        with anyio.fail_after(30):
            await runner.close()
            await ingest.close()
        store.close()


async def test_debug_tools_replies_validate(tmp_path: Path) -> None:
    """The debugpy tools (issue 12) on a real script, every reply validated against its outputSchema."""
    from debug_helpers import SCRIPTS, debug_server, line_of

    script = SCRIPTS / "rounds.py"
    async with debug_server(tmp_path / ".mcpdebug", SCRIPTS) as debug:
        tools = {t.name: t for t in (await debug.client.list_tools()).tools}
        schema = {name: tool.output_schema for name, tool in tools.items()}
        called: set[str] = set()

        async def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
            called.add(tool_name)
            with anyio.fail_after(60):
                return checked(await debug.client.call_tool(tool_name, arguments), schema[tool_name])

        sid = (await call("create_debug_session", name="rounds"))["sessionId"]
        bp = await call("set_breakpoint", session_id=sid, file=str(script), line=line_of(script, "visit"))
        await call("toggle_breakpoint", session_id=sid, breakpoint_id=bp["breakpointId"], enabled=False)
        await call("toggle_breakpoint", session_id=sid, breakpoint_id=bp["breakpointId"], enabled=True)
        await call("set_exception_breakpoints", session_id=sid, filters=["uncaught"])
        watch = await call("add_watch", session_id=sid, expression="i * 2")
        stop = await call("start_debugging", session_id=sid, script_path=str(script), args=["1"])
        assert stop["state"] == "paused" and stop["reason"] == "breakpoint"
        assert (await call("list_breakpoints", session_id=sid))["count"] == 1
        assert (await call("list_watches", session_id=sid))["watches"][0]["expression"] == "i * 2"
        assert (await call("step_over", session_id=sid))["state"] == "paused"
        await call("step_into", session_id=sid)
        await call("step_out", session_id=sid)
        await call("remove_watch", session_id=sid, watch_id=watch["watchId"])
        await call("remove_breakpoint", session_id=sid, breakpoint_id=bp["breakpointId"])
        resumed = await call("continue_execution", session_id=sid, wait=0.5)
        assert resumed["debug"]["sessionId"] == sid
        await call("pause_execution", session_id=sid)
        assert any(s["id"] == sid for s in (await call("list_debug_sessions"))["sessions"])
        assert (await call("close_debug_session", session_id=sid))["sessionId"] == sid
        assert called >= DEBUG_TOOLS


DEBUG_TOOLS = {name for name, value in vars(DebugTools).items() if hasattr(value, "__mcp_tool__")}
