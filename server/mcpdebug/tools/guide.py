"""Guided workflows: the prompts investigate_failure, diagnose_hang and triage_run, and argument
completion (``completion/complete``) for every prompt and resource template.

A prompt is a short message naming the tools to call in order, with the ids of the latest matching
run filled in, so an agent starts with real calls rather than guesses. Completion offers run ids
(also found by their label) and node ids (from any part of them, as agents type them).
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import quote

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)
from pydantic import Field

from mcpdebug.store import Store
from mcpdebug.tools.context import ToolContext
from mcpdebug.views import lookup
from mcpdebug.views.calls import call

MAX_VALUES: Final = 100
"""Most values one completion answers (the protocol's limit)."""

PromptRun = Annotated[
    str | None,
    Field(description='A run id from list_sessions, or "latest". Default: the newest run that matches.'),
]
PromptTest = Annotated[
    str | None,
    Field(description="A test's node id, or a unique part of it. Default: the run's first that matches."),
]


class Guide:
    def __init__(self, store: Store) -> None:
        self.store = store

    # Prompts --------------------------------------------------------------------------------------

    def investigate_failure(self, run_id: PromptRun = None, test: PromptTest = None) -> str:
        """Find why a test failed: its snapshot, the code around it, its output, then a live check."""
        run, nodeid = self._pick(run_id, test, "failures")
        if run is None or nodeid is None:
            return self._nothing("failing test", run, test) + (
                f" Run the tests with {call('run_tests', args=['-x'], break_on_failure=True)} to get one."
            )
        rid = run["run_id"]
        failure = self.store.failures(rid, nodeid)
        top = next((f for f in failure[0]["snapshot"].frames if not f.library), None) if failure else None
        where = f" (raised at {top.file}:{top.line})" if top else ""
        source = call(
            "get_source_context",
            run_id=rid,
            test=nodeid,
            file=top.file if top else "...",
            line=top.line if top else 1,
            lines_context=15,
        )
        live = call("run_tests", args=[nodeid], break_on_failure=True)
        return "\n".join(
            [
                f"Investigate why {nodeid} failed in run {rid}{where}. Call, in order:",
                f"1. {call('get_failure', run_id=rid, test=nodeid)}: the exception, pytest's assertion "
                "details, each frame's source and locals, and the output tail.",
                f"2. {source}: more of the code where it was raised.",
                f"3. {call('search_output', run_id=rid, test=nodeid, pattern='...')} or "
                f"{call('get_output', run_id=rid, test=nodeid)} if what it printed or logged matters.",
                f"4. To test an idea on the live frames: {live}, then "
                "evaluate_expression(session_id=..., expression=...) and close_session.",
                "Then say what the cause is (the code, not the test, unless the test is wrong) and "
                "propose a fix.",
            ]
        )

    def diagnose_hang(self, run_id: PromptRun = None, test: PromptTest = None) -> str:
        """Find why a test hangs: the hung process's own report, the code where it loops or waits."""
        run, nodeid = self._pick(run_id, test, "hangs")
        if run is None or nodeid is None:
            tests = [test] if test else None
            return self._nothing("hang", run, test) + (
                f" Reproduce it with {call('detect_hang', tests=tests, timeout=10)}, or run the tests with "
                f"{call('run_tests', args=['--mcp-debug-timeout', '30'])}."
            )
        rid = run["run_id"]
        hang = self.store.hangs(rid, nodeid)
        report = hang[0]["report"] if hang else None
        where = f": {report.summary}" if report else ""
        source = call(
            "get_source_context",
            run_id=rid,
            test=nodeid,
            file=report.file if report and report.file else "...",
            line=report.line if report and report.line else 1,
            lines_context=20,
        )
        again = call("detect_hang", tests=[nodeid], timeout=10)
        return "\n".join(
            [
                f"Find why {nodeid} hung in run {rid}{where}. Call, in order:",
                f"1. {call('get_hang', run_id=rid, test=nodeid)}: busy loop or blocked, where, the "
                "locals there, every thread's stack and asyncio tasks.",
                f"2. {source}: the loop or the wait and what should end it.",
                f"3. {call('get_output', run_id=rid, test=nodeid)}: what it wrote before it stopped.",
                f"4. After a fix: {again} says whether it still hangs.",
                "Then say what it waits for or why the loop never ends, and propose a fix.",
            ]
        )

    def triage_run(self, run_id: PromptRun = None, test: PromptTest = None) -> str:
        """Sort out a run: what failed, hung or errored, grouped by cause, and what to look at first."""
        rid = self.store.resolve_run(run_id)
        run = self.store.run(rid) if rid else None
        if rid is None or run is None:
            return (
                self._nothing("run", None, None) + " Record one with `pytest --mcp-debug`, or call run_tests."
            )
        problems = self.store.problems(rid)
        hangs = self.store.hangs(rid)
        lines = [f"Triage run {rid} ({run['label'] or run['kind']}). Call, in order:"]
        lines.append(
            f"1. {call('get_run_summary', run_id=rid)}: counts, every failure's one-line message, hangs."
        )
        step = 2
        if test:
            lines.append(f"{step}. {call('get_test', run_id=rid, test=test)}: the test you asked about.")
            step += 1
        for p in problems[:5]:
            lines.append(f"{step}. {call('get_failure', run_id=rid, test=p['nodeid'])}")
            step += 1
        if len(problems) > 5:
            lines.append(
                f"   ({len(problems) - 5} more: {call('list_tests', run_id=rid, outcome='failed,error')})"
            )
        for h in hangs[:3]:
            lines.append(f"{step}. {call('get_hang', run_id=rid, test=h['nodeid'] or None)}")
            step += 1
        lines.append(
            "Group the failures by cause (one bug often fails many tests), say which to fix first, and why."
            if problems or hangs
            else "Nothing failed or hung in this run; say so, with its counts."
        )
        return "\n".join(lines)

    def _pick(
        self, run_id: str | None, test: str | None, kind: str
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The run (given, or the newest with a failure / hang of ``test``) and the test's node id."""
        if run_id:
            rid = self.store.resolve_run(run_id)
            candidates = [rid] if rid else []
        else:
            candidates = self.store.run_ids(50)
        for rid in candidates:
            run = self.store.run(rid)
            if run is None:
                continue
            rows = self.store.failures(rid) if kind == "failures" else self.store.hangs(rid)
            nodeids = [r["nodeid"] for r in rows if r["nodeid"]]
            if test:
                nodeids = [n for n in nodeids if n == test or test in n]
            if nodeids:
                return run, nodeids[0]
            if run_id:
                return run, None
        return None, None

    def _nothing(self, what: str, run: dict[str, Any] | None, test: str | None) -> str:
        where = f"run {run['run_id']}" if run else "the recorded runs"
        about = f" of {test}" if test else ""
        return (
            f"There is no {what}{about} in {where} ({', '.join(self.store.run_ids(5)) or 'none recorded'})."
        )

    # Completion -----------------------------------------------------------------------------------

    def complete(self, name: str, value: str, resolved: dict[str, str], in_uri: bool) -> Completion:
        if name == "run_id":
            values = self._runs(value)
        elif name in ("test", "nodeid"):
            values = self._tests(resolved.get("run_id"), value)
            if in_uri:
                values = [quote(v, safe="") for v in values]
        else:
            return Completion(values=[])
        return Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)

    def _runs(self, value: str) -> list[str]:
        lookup.refresh(self.store)
        runs = self.store.runs(200)
        found = ["latest"] if "latest".startswith(value) else []
        found += [r["run_id"] for r in runs if r["run_id"].startswith(value)]
        found += [
            r["run_id"] for r in runs if value and value not in r["run_id"] and value in (r["label"] or "")
        ]
        return list(dict.fromkeys(found))

    def _tests(self, run_id: str | None, value: str) -> list[str]:
        rid = self.store.resolve_run(run_id)
        if rid is None:
            return []
        failing = [
            t["nodeid"]
            for t in self.store.tests(rid, ("failed", "error"))
            if value.lower() in t["nodeid"].lower()
        ]
        return list(dict.fromkeys([*failing, *self.store.find_tests(rid, value, limit=MAX_VALUES + 1)]))


PROMPTS: Final = ("investigate_failure", "diagnose_hang", "triage_run")


def _in_thread(method: Any) -> Any:
    """The prompt function: ``method`` (SQLite reads) run in a worker thread, after pending spool."""

    async def prompt(run_id: PromptRun = None, test: PromptTest = None) -> str:
        def answer() -> str:
            lookup.refresh(method.__self__.store)
            return str(method(run_id, test))

        return await anyio.to_thread.run_sync(answer)

    return prompt


def register(server: MCPServer, context: ToolContext) -> None:
    guide = Guide(context.store)
    for name in PROMPTS:
        method = getattr(guide, name)
        server.prompt(name=name, description=method.__doc__)(_in_thread(method))

    @server.completion()  # type: ignore[untyped-decorator,no-untyped-call]
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        resolved = dict(context.arguments or {}) if context is not None else {}
        in_uri = isinstance(ref, ResourceTemplateReference)
        return await anyio.to_thread.run_sync(guide.complete, argument.name, argument.value, resolved, in_uri)
