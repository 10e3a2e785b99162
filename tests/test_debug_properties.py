"""Seed 001's properties 1, 2, 3, 4, 6, 9, 10, 17 and 19, with hypothesis, against real debugpy sessions.

Starting a debuggee costs 0.3-0.6 s, so the properties that need execution share long-lived ones: the
`rounds.py` script runs endless rounds and stops at a gate breakpoint between them, so one example
is one round (or a few steps) of a live process. Each MCP call costs 10-25 ms here, so examples are
8-30 (fewer where an example makes dozens of calls: watches are evaluated again by the test at every
step). Property 17 is about how a process ends, so each of its 6 examples starts (and ends) its own.
The MCP calls go through a server wired as `mcpdebug serve` wires it, on an event loop in a blocking
portal (hypothesis drives synchronous examples).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from debug_helpers import SCRIPTS, Debug, alive, debug_server, line_of, structured
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import wait_for

ROUNDS = SCRIPTS / "rounds.py"
LINES = len(ROUNDS.read_text().splitlines())
GATE, VISIT, NESTED = line_of(ROUNDS, "gate"), line_of(ROUNDS, "visit"), line_of(ROUNDS, "nested")
SHARED = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)


@dataclass
class Rig:
    """Synchronous calls into the server's event loop, and two rounds.py sessions paused at their gate."""

    portal: BlockingPortal
    debug: Debug
    a: str = ""
    b: str = ""

    def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.portal.call(functools.partial(self.debug.call, tool, **arguments))

    def error(self, tool: str, **arguments: Any) -> str:
        return self.portal.call(functools.partial(self.debug.error, tool, **arguments))

    def start(self) -> str:
        sid, stop = self.portal.call(
            functools.partial(
                self.debug.script, "rounds.py", breakpoints=[{"file": "rounds.py", "line": GATE}]
            )
        )
        assert stop["location"]["line"] == GATE, stop["text"]
        return sid

    def round(self, sid: str) -> list[dict[str, Any]]:
        """From the gate, run one round; the stops met before the gate again."""
        stops = []
        while True:
            stop = self("continue_execution", session_id=sid)
            assert stop["state"] == "paused", stop["text"]
            if stop["location"]["line"] == GATE:
                return stops
            stops.append(stop)

    def clear(self, sid: str) -> None:
        """Every breakpoint but the gate removed, every watch removed."""
        for bp in self("list_breakpoints", session_id=sid)["breakpoints"]:
            if bp["requestedLine"] != GATE:
                self("remove_breakpoint", session_id=sid, breakpoint_id=bp["breakpointId"])
        for watch in self("list_watches", session_id=sid)["watches"]:
            self("remove_watch", session_id=sid, watch_id=watch["watchId"])

    def back_to_gate(self, sid: str) -> None:
        self.clear(sid)
        stop = self("continue_execution", session_id=sid)
        assert stop["location"]["line"] == GATE, stop["text"]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    directory = tmp_path_factory.mktemp("debug-properties") / ".mcpdebug"
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(debug_server(directory, SCRIPTS)) as debug,
    ):
        rig = Rig(portal, debug)
        rig.a, rig.b = rig.start(), rig.start()
        yield rig


def locals_of(reply: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["value"] for v in reply.get("variables", reply.get("locals", []))}


# Properties 1, 3 and 4: breakpoints created, listed, removed and toggled --------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(1, LINES).filter(lambda line: line != GATE),  # the gate's breakpoint is the rig's
            st.sampled_from([None, "i > 3", "total == 0"]),
        ),
        st.tuples(st.just("remove"), st.integers(0, 20)),
        st.tuples(st.just("toggle"), st.integers(0, 20), st.booleans()),
    ),
    min_size=1,
    max_size=8,
)


@settings(SHARED, max_examples=30)
@given(ops=operations)
def test_breakpoints_listed_removed_and_toggled_as_set(rig: Rig, ops: list[tuple[Any, ...]]) -> None:
    """Property 1: a breakpoint set is listed with its file and line; property 3: a removed one is
    not listed; property 4: a toggled one keeps its id, file and line, with the new state."""
    sid = rig.a
    model: dict[str, dict[str, Any]] = {}  # id -> requested line, condition, enabled
    try:
        for op in ops:
            if op[0] == "add":
                _, line, condition = op
                reply = rig(
                    "set_breakpoint", session_id=sid, file=str(ROUNDS), line=line, condition=condition
                )
                model[reply["breakpointId"]] = {"line": line, "condition": condition, "enabled": True}
                assert reply["file"] == str(ROUNDS) and reply["requestedLine"] == line
            elif model:
                target = sorted(model)[op[1] % len(model)]
                if op[0] == "remove":
                    rig("remove_breakpoint", session_id=sid, breakpoint_id=target)
                    del model[target]
                else:
                    reply = rig("toggle_breakpoint", session_id=sid, breakpoint_id=target, enabled=op[2])
                    model[target]["enabled"] = op[2]
                    assert (reply["breakpointId"], reply["requestedLine"]) == (target, model[target]["line"])
                    assert reply["enabled"] is op[2] and (reply["verified"] is False or op[2])
            listed = {
                b["breakpointId"]: b
                for b in rig("list_breakpoints", session_id=sid)["breakpoints"]
                if b["requestedLine"] != GATE
            }
            assert set(listed) == set(model)
            for bp_id, want in model.items():
                got = listed[bp_id]
                assert (got["file"], got["requestedLine"]) == (str(ROUNDS), want["line"])
                assert (got.get("condition"), got["enabled"]) == (want["condition"], want["enabled"])
    finally:
        rig.clear(sid)


# Property 2: a conditional breakpoint stops exactly where its condition is true -------------------

conditions = st.one_of(
    st.builds(
        lambda op, k: f"i {op} {k}", st.sampled_from(["<", "<=", "==", ">", ">=", "!="]), st.integers(-1, 12)
    ),
    st.builds(lambda m, r: f"i % {m} == {r}", st.integers(2, 5), st.integers(0, 1)),
    st.builds(lambda ks: f"i in {sorted(ks)!r}", st.sets(st.integers(0, 11), max_size=4)),
    st.builds(lambda k: f"total > {k}", st.integers(0, 140)),
)


@settings(SHARED, max_examples=20)
@given(condition=conditions, negate=st.booleans(), disabled=st.booleans())
def test_conditional_breakpoints_stop_only_where_true(
    rig: Rig, condition: str, negate: bool, disabled: bool
) -> None:
    """Property 2 (and 4's consequence: a disabled breakpoint never stops)."""
    expression = f"not ({condition})" if negate else condition
    sid = rig.a
    bp = rig("set_breakpoint", session_id=sid, file=str(ROUNDS), line=VISIT, condition=expression)
    if disabled:
        rig("toggle_breakpoint", session_id=sid, breakpoint_id=bp["breakpointId"], enabled=False)
    try:
        stops = rig.round(sid)
    finally:
        rig.clear(sid)
    expected = [] if disabled else [i for i in range(12) if eval(expression, {"i": i, "total": i * (i - 1)})]
    assert [int(locals_of(s)["i"]) for s in stops] == expected
    assert all(s["location"]["line"] == VISIT and s["reason"] == "breakpoint" for s in stops)


# Property 6: steps go where their semantics say ----------------------------------------------------


@settings(SHARED, max_examples=15)
@given(steps=st.lists(st.sampled_from(["step_over", "step_into", "step_out"]), min_size=1, max_size=6))
def test_steps_move_to_reachable_places(rig: Rig, steps: list[str]) -> None:
    sid = rig.a
    rig("set_breakpoint", session_id=sid, file=str(ROUNDS), line=VISIT, condition="i == 4")
    stop = rig("continue_execution", session_id=sid)
    rig.clear(sid)
    try:
        before = rig("get_stack_trace", session_id=sid)["stackFrames"]
        for step in steps:
            if step == "step_out" and len(before) == 1:
                step = "step_over"  # out of the module is out of the program: it never returns
            stop = rig(step, session_id=sid)
            assert stop["state"] == "paused", stop["text"]
            after = rig("get_stack_trace", session_id=sid)["stackFrames"]
            where = stop["location"]
            assert where["file"] == str(ROUNDS) and where["lineContent"].strip()
            assert (where["function"], where["line"]) == (after[0]["name"], after[0]["line"])
            if step == "step_into":  # one level deeper at most, into a callee of the line it was on
                assert len(after) <= len(before) + 1
                if len(after) == len(before) + 1:
                    assert after[1]["name"] == before[0]["name"]
            elif step == "step_over":  # never deeper
                assert len(after) <= len(before)
            else:  # back in a caller
                assert len(after) < len(before)
                assert after[0]["name"] in [f["name"] for f in before[1:]]
            before = after
    finally:
        rig.back_to_gate(sid)


# Property 9: watches report every change, old -> new, and nothing else -----------------------------

WATCHED = ["i", "total", "doubled", "i * 2 + total", "gate", "missing_name"]


@settings(SHARED, max_examples=8)
@given(
    expressions=st.sets(st.sampled_from(WATCHED), min_size=1, max_size=3),
    steps=st.lists(st.sampled_from(["step_over", "step_into"]), min_size=1, max_size=4),
)
def test_watches_report_changes_old_to_new(rig: Rig, expressions: set[str], steps: list[str]) -> None:
    sid = rig.a
    rig("set_breakpoint", session_id=sid, file=str(ROUNDS), line=VISIT, condition="i == 2")
    rig("continue_execution", session_id=sid)
    rig.clear(sid)

    def now() -> dict[str, str]:
        values = {}
        for expression in sorted(expressions):
            result = rig.portal.call(
                functools.partial(
                    rig.debug.client.call_tool,
                    "evaluate_expression",
                    {"session_id": sid, "expression": expression},
                )
            )
            values[expression] = "<error>" if result.is_error else structured(result)["result"]
        return values

    try:
        for expression in expressions:
            rig("add_watch", session_id=sid, expression=expression)
        previous = now()
        for step in steps:
            stop = rig(step, session_id=sid)
            current = now()
            reported = {c["expression"]: (c["old"], c["new"]) for c in stop["watchesChanged"]}
            changed = {e for e in expressions if previous[e] != current[e]}
            assert set(reported) == changed, (previous, current, stop["watchesChanged"])
            for expression, (old, new) in reported.items():
                if not old.startswith("<error") and not new.startswith("<error"):
                    assert (old, new) == (previous[expression], current[expression])
            previous = current
    finally:
        rig.back_to_gate(sid)


# Property 10: the frame asked for is the frame answered ------------------------------------------------


@settings(SHARED, max_examples=10)
@given(depth=st.integers(0, 3), data=st.data())
def test_frames_answer_for_themselves(rig: Rig, depth: int, data: st.DataObject) -> None:
    sid = rig.a
    rig("set_breakpoint", session_id=sid, file=str(ROUNDS), line=NESTED, condition=f"level == {depth}")
    stop = rig("continue_execution", session_id=sid)
    rig.clear(sid)
    try:
        assert stop["location"]["line"] == NESTED, stop["text"]
        frames = rig("get_stack_trace", session_id=sid)["stackFrames"]
        assert [f["name"] for f in frames[: depth + 1]] == ["nested"] * (depth + 1)
        for frame_id in data.draw(st.lists(st.integers(0, depth), min_size=1, max_size=3)):
            level = str(depth - frame_id)
            assert locals_of(rig("get_local_variables", session_id=sid, frame_id=frame_id))["level"] == level
            evaluated = rig("evaluate_expression", session_id=sid, expression="level", frame_id=frame_id)
            assert evaluated["result"] == level and evaluated["frame"]["id"] == frame_id
            scopes = rig("get_scopes", session_id=sid, frame_id=frame_id)["scopes"]
            ref = next(s["variablesReference"] for s in scopes if s["name"] == "Locals")
            assert locals_of(rig("get_variables", session_id=sid, variables_reference=ref))["level"] == level
    finally:
        rig.back_to_gate(sid)


# Property 17: however the debuggee ends, it is reported with its exit code and nothing is left -----

endings = st.sampled_from(
    [
        ("exit", 0, 0),
        ("exit", 3, 3),
        ("os_exit", 7, 7),
        ("signal", 9, -9),
        ("signal", 15, -15),
        ("raise", 1, 1),
    ]
)


@settings(SHARED, max_examples=6)
@given(ending=endings)
def test_an_ending_debuggee_is_reported_and_cleaned_up(rig: Rig, ending: tuple[str, int, int]) -> None:
    how, value, code = ending
    sid, reply = rig.portal.call(functools.partial(rig.debug.script, "ending.py", how, str(value)))
    if how == "raise":  # stopped where it raised, before unwinding; then it ends as uncaught
        assert reply["reason"] == "exception" and "RuntimeError: raised 1" in reply["exception"]
        reply = rig("continue_execution", session_id=sid)
    assert reply["state"] == "terminated" and reply["exitCode"] == code, reply["text"]
    assert f"ending by {how} {value}" in reply["text"]
    session = next(s for s in rig("list_debug_sessions")["sessions"] if s["id"] == sid)
    assert (session["state"], session["exitCode"]) == ("terminated", code)
    assert not alive(session["pid"])
    assert "has ended" in rig.error("step_over", session_id=sid)
    rig("close_debug_session", session_id=sid)


# Property 19: two sessions never affect each other --------------------------------------------------


@settings(SHARED, max_examples=10)
@given(i_a=st.integers(0, 11), i_b=st.integers(0, 11), same_line=st.booleans())
def test_sessions_are_isolated(rig: Rig, i_a: int, i_b: int, same_line: bool) -> None:
    line_b = VISIT if same_line else VISIT + 1
    rig("set_breakpoint", session_id=rig.a, file=str(ROUNDS), line=VISIT, condition=f"i == {i_a}")
    rig("set_breakpoint", session_id=rig.b, file=str(ROUNDS), line=line_b, condition=f"i == {i_b}")
    try:
        listed_a = rig("list_breakpoints", session_id=rig.a)["breakpoints"]
        assert {b.get("condition") for b in listed_a} == {None, f"i == {i_a}"}  # the gate's and its own
        stops_a, stops_b = rig.round(rig.a), rig.round(rig.b)
    finally:
        rig.clear(rig.a)
        rig.clear(rig.b)
    assert [(s["location"]["line"], locals_of(s)["i"]) for s in stops_a] == [(VISIT, str(i_a))]
    assert [(s["location"]["line"], locals_of(s)["i"]) for s in stops_b] == [(line_b, str(i_b))]


def test_rig_sessions_end_with_the_server(tmp_path: Path) -> None:
    """The shared debuggees are closed with their server (checked on a rig of its own)."""
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(debug_server(tmp_path / ".mcpdebug", SCRIPTS)) as debug,
    ):
        rig = Rig(portal, debug)
        rig.start()
        pid = rig("list_debug_sessions")["sessions"][0]["pid"]
        assert alive(pid)
    wait_for(lambda: not alive(pid))  # closed with the server, however long a loaded machine takes
