"""Hostile tool calls, generated from a server's own ``tools/list``: one thing wrong in each call.

Shared by `test_bad_arguments.py` (a few hundred calls in the suite) and
`benchmarks/mcp_surface.py` (thousands, for the figures in RESULTS.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from helpers import Events
from mcpdebug.store import Store

NODE = "test_app.py::test_total"
VALID: dict[str, Any] = {  # a value every required argument may take while another one is hostile
    "run_id": "latest",
    "test": NODE,
    "session_id": "20261122-011523-424242-main-1",
    "frame_id": 0,
    "variables_reference": 1_000_000,
    "file": "test_app.py",
    "line": 1,
    "pattern": "step",
    "labels": ["latest"],
    "expression": "1 + 1",
    "id": "latest",
    "label": "no-such-service",
    "command": "/no/such/program --serve",  # start_process fails to start it, whatever else is wrong
    "action": "restart",
    "input": "hello\n",
    "breakpoint_id": "bp1",
    "watch_id": "w1",
    "script_path": "no_such_script.py",
    "filters": ["uncaught"],
    "enabled": True,
    "groups": ["debug"],
}
CODE = {"command", "expression", "args", "tests", "env", "input"}
"""Free-form arguments of the tools that run code: only wrong types are sent (a well-typed value
would run it)."""
CLEAN = re.compile(
    r"must be|is required|has no argument|Unknown (run|outcome)|No test matching|No session|No live session|"
    r"No frame|No variablesReference|outside|not a directory|Invalid|is empty|past the end|"
    r"is not (a time|valid|a file path|an executable)|has lines|no failure|catastrophically|did not fail|matches several|"
    r"does not ingest (runs|live sessions)|No debug session|No value trace|No recorded run has|No process session|not a process session|process session"
)
"""What an error says about what is valid (checked on every reply)."""
HUGE = (10**30, -(10**30), 2**63, -(2**63))
STRINGS = st.sampled_from(
    ["", "x" * 50_000, "../../../../etc/passwd", "\x00", "no-such-thing-xyz", "latest; rm -rf /", "ü\u202e"]
)
WRONG_TYPES = st.sampled_from([[1, 2], {"a": 1}, 3.5, "not-a-number", [["nested"]]])


def hostile(name: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of argument ``name`` that must be refused, by its type and what it names."""
    declared = schema.get("type")
    kinds = set(declared) if isinstance(declared, list) else {declared}
    kinds |= {s.get("type") for s in schema.get("anyOf", [])}
    wrong = WRONG_TYPES.filter(lambda v: not (isinstance(v, str) and "string" in kinds))
    wrong = wrong.filter(lambda v: not (isinstance(v, float) and "number" in kinds))
    wrong = wrong.filter(lambda v: not (isinstance(v, list) and "array" in kinds))
    if name in CODE:
        return wrong
    if "integer" in kinds or "number" in kinds:
        low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum")
        bad = [*(v for v in HUGE if high is not None and v > high)]
        bad += [v for v in HUGE if low is not None and v < low]
        if low is None:  # start / end: only the huge ones are out of every output's range
            bad += list(HUGE)
        return st.one_of(wrong, st.sampled_from(sorted(set(bad))))
    if "boolean" in kinds:
        return st.one_of(wrong, st.sampled_from(["maybe", "", 2]))
    if name == "name":  # a free-form label: only its type and length are checked
        return st.one_of(wrong, st.sampled_from(["", "x" * 50_000]))
    if name in ("pattern",):
        return st.sampled_from(["", "x" * 5_000, "(unclosed", "[z-a]"])
    if name == "cwd":
        return st.sampled_from(["", "x" * 50_000, "../../../../no/such/dir", "\x00"])
    if name in ("since", "until"):
        return st.sampled_from(["", "yesterday-ish", "x" * 50_000, "\x00"])
    if "array" in kinds:  # labels
        return st.one_of(
            st.just([]), st.lists(STRINGS.filter(lambda s: s != "latest"), min_size=1, max_size=3)
        )
    if schema.get("enum") or any(s.get("enum") for s in schema.get("anyOf", [])):
        return st.one_of(wrong, STRINGS)
    return st.one_of(wrong, STRINGS)


def calls(tools: list[Any]) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """One tool call with exactly one thing wrong: a hostile value, a missing required argument, or
    an argument the tool does not have."""

    @st.composite
    def call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
        tool = draw(st.sampled_from(tools))
        props: dict[str, Any] = tool.input_schema.get("properties", {})
        required = list(tool.input_schema.get("required", []))
        args = {name: VALID[name] for name in required}
        choices = ["unknown", *(["missing"] if required else []), *props]
        what = draw(st.sampled_from(choices))
        if what == "unknown":
            args["no_such_argument"] = 1
        elif what == "missing":
            del args[draw(st.sampled_from(required))]
        else:
            args[what] = draw(hostile(what, props[what]))
        return tool.name, args

    return call()


def target_store(folder: Path) -> Store:
    """A recorded run to aim at: one failing test that printed (lines a catastrophic regex chokes
    on among them), one that passed."""
    (folder / "test_app.py").write_text("def test_total():\n    assert 1 == 2\n")
    store = Store(folder / ".mcpdebug")
    events = Events("20261124-000000-abcdef")
    batch: list[Any] = [events.run_started(), events.start()]
    lines = ["step 1", "a" * 40 + "b"] * 3
    batch += events.test(NODE, "failed", [("call", "stdout", lines)], message="assert 1 == 2")
    batch += events.test("test_app.py::test_ok", "passed")
    batch += events.run_finished(exit_status=1)
    store.apply(batch)
    return store
