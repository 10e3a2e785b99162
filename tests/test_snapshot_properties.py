"""Seed 001's correctness properties 7, 10, 14, 18, 20, 21 and 22, restated for stored failure snapshots.

Each property runs on real exceptions: generated values become the locals of a chain of generated
depth, the innermost frame raises, `snapshot.take` snapshots it as the plugin does, the server
stores it, and the tools' replies are checked. (Property 8, evaluating expressions, needs a test
held alive: it comes with live holds.)
"""

from __future__ import annotations

import contextlib
import json
import keyword
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Events
from mcpdebug.store import Store
from mcpdebug.views import failure as failure_view
from mcpdebug.views import frames as frames_view
from mcpdebug.views import lookup
from pytest_mcpdebug import protocol
from pytest_mcpdebug.failures.snapshot import take
from pytest_mcpdebug.values import CHILDREN, is_secret, render


def reply_json(reply: Any) -> dict[str, Any]:
    """A view's reply as its JSON text content reads (the view's own JSON before replies were typed)."""
    data: dict[str, Any] = json.loads(reply.render())
    return data


RUN = "20260101-000000-abcd01"
NODE = "test_props.py::test_it"

names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not is_secret(n) and not keyword.iskeyword(n) and not keyword.issoftkeyword(n)
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=300)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=8), st.dictionaries(st.text(max_size=5), inner, max_size=8)
    ),
    max_leaves=20,
)


class Thing:
    """An object whose attributes are generated."""

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.__dict__.update(attrs)


frames_locals = st.lists(st.dictionaries(names, values, max_size=6), min_size=1, max_size=4)
objects = st.dictionaries(names, values, min_size=1, max_size=CHILDREN)


def _raise_through(chain: list[dict[str, Any]]) -> BaseException:
    """Call len(chain) nested frames, frame i having chain[i] as locals; the innermost raises."""
    scope: dict[str, Any] = {}
    source = []
    for depth, local in enumerate(chain):
        lines = [f"def f{depth}(__values, __next):"]
        lines += [f"    {name} = __values[{name!r}]" for name in local]
        if depth == len(chain) - 1:
            lines.append(f"    raise ValueError('failed at depth {depth}')")
        else:
            lines.append("    __next()")
        source.append("\n".join(lines))
    path = os.path.join(tempfile.gettempdir(), "mcpdebug_snapshot_properties.py")
    text = "\n\n".join(source) + "\n"
    with open(path, "w") as f:
        f.write(text)
    exec(compile(text, path, "exec"), scope)

    def call(depth: int) -> None:
        scope[f"f{depth}"](chain[depth], lambda: call(depth + 1))

    try:
        call(0)
    except ValueError as exc:
        return exc
    raise AssertionError("no exception")


_STORE: dict[str, Any] = {}


def _stored(exc: BaseException) -> tuple[Store, dict[str, Any], contextlib.nullcontext[None]]:
    """The snapshot of ``exc`` stored as a new run of one store shared by the examples (fast)."""
    if "store" not in _STORE:
        _STORE["tmp"] = tempfile.TemporaryDirectory()
        _STORE["store"] = Store(Path(_STORE["tmp"].name))
        _STORE["n"] = 0
    store: Store = _STORE["store"]
    _STORE["n"] += 1
    run_id = f"{RUN[:-2]}{_STORE['n']:06d}"
    ev = Events(run_id)
    snapshot = take(exc, exc.__traceback__)
    store.apply(
        [
            ev.start(),
            ev.run_started(),
            ev(protocol.TestStarted, nodeid=NODE, worker="main"),
            ev(protocol.FailureSnapshot, nodeid=NODE, worker="main", when="call", snapshot=snapshot),
        ]
    )
    return store, lookup.run(store, run_id), contextlib.nullcontext()


def _user_frames(run_store: Store, run: dict[str, Any]) -> list[dict[str, Any]]:
    stack = reply_json(frames_view.get_stack_trace(run_store, run, NODE))
    return [f for f in stack["stackFrames"] if "mcpdebug_snapshot_properties" in f["file"]]


@settings(max_examples=100, deadline=None)
@given(attrs=objects)
def test_property_7_object_inspection_is_complete(attrs: dict[str, Any]) -> None:
    """Property 7: inspecting an object returns every one of its attributes with its current value."""
    exc = _raise_through([{"obj": Thing(attrs)}])
    store, run, tmp = _stored(exc)
    with tmp:
        frame = _user_frames(store, run)[0]
        local = reply_json(frames_view.get_local_variables(store, run, NODE, frame["id"]))["variables"]
        [obj] = [v for v in local if v["name"] == "obj"]
        children = reply_json(frames_view.get_variables(store, run, NODE, obj["variablesReference"]))
        got = {v["name"]: v["value"] for v in children["variables"]}
        assert got == {k: render(v) for k, v in attrs.items()}


@settings(max_examples=100, deadline=None)
@given(chain=frames_locals)
def test_property_10_each_frame_shows_its_own_locals(chain: list[dict[str, Any]]) -> None:
    """Property 10: switching to frame k shows frame k's variables, not another frame's."""
    exc = _raise_through(chain)
    store, run, tmp = _stored(exc)
    with tmp:
        frames = _user_frames(store, run)
        assert len(frames) == len(chain)
        for frame, expected in zip(frames, reversed(chain), strict=True):  # innermost first
            got = reply_json(frames_view.get_local_variables(store, run, NODE, frame["id"]))["variables"]
            assert {v["name"]: v["value"] for v in got} == {k: render(v) for k, v in expected.items()}


@settings(max_examples=100, deadline=None)
@given(chain=frames_locals)
def test_property_14_a_failure_has_message_stack_and_values(chain: list[dict[str, Any]]) -> None:
    """Property 14: a failure comes with its message, complete stack and the values at the failure point."""
    exc = _raise_through(chain)
    store, run, tmp = _stored(exc)
    with tmp:
        reply = failure_view.get_failure(store, run, NODE).text
        assert f"ValueError: failed at depth {len(chain) - 1}" in reply
        for depth in range(len(chain)):
            assert f"in f{depth}()" in reply
        for name, value in chain[-1].items():
            assert f"{name} ({type(value).__name__}) = {render(value)}"[:200] in reply


@settings(max_examples=100, deadline=None)
@given(frame_id=st.integers(), reference=st.integers(min_value=-(2**62), max_value=2**62))
def test_property_18_invalid_operations_are_clear_errors(frame_id: int, reference: int) -> None:
    """Property 18: an invalid frame or reference is a clear error, and the server keeps answering."""
    exc = _raise_through([{"a": [1, 2, 3]}])
    store, run, tmp = _stored(exc)
    with tmp:
        stack = reply_json(frames_view.get_stack_trace(store, run, NODE, include_library=True))
        if not 0 <= frame_id < stack["count"]:
            with pytest.raises(lookup.NotFound, match="this failure has frames 0-"):
                frames_view.get_scopes(store, run, NODE, frame_id)
        snap = store.failures(run["run_id"])[0]["snapshot"]
        if reference < frames_view.LOCALS_BASE and str(reference) not in snap.children:
            with pytest.raises(lookup.NotFound, match=f"No variablesReference {reference}"):
                frames_view.get_variables(store, run, NODE, reference)
        assert reply_json(frames_view.get_stack_trace(store, run, NODE))["success"] is True


@settings(max_examples=100, deadline=None)
@given(chain=frames_locals)
def test_properties_20_21_22_replies_are_structured_typed_and_absolute(chain: list[dict[str, Any]]) -> None:
    """Property 20: every reply has a status and results; 21: every value carries its type;
    22: every frame's file is an absolute path."""
    exc = _raise_through(chain)
    store, run, tmp = _stored(exc)
    with tmp:
        stack = reply_json(frames_view.get_stack_trace(store, run, NODE, include_library=True))
        assert stack["success"] is True and stack["count"] == len(stack["stackFrames"])
        assert all(os.path.isabs(f["file"]) for f in stack["stackFrames"])
        pending = []
        for frame in stack["stackFrames"]:
            scopes = reply_json(frames_view.get_scopes(store, run, NODE, frame["id"]))
            assert scopes["success"] is True
            pending += [s["variablesReference"] for s in scopes["scopes"] if s["variablesReference"]]
        seen = 0
        while pending and seen < 200:
            reply = reply_json(frames_view.get_variables(store, run, NODE, pending.pop()))
            assert reply["success"] is True
            for v in reply["variables"]:
                assert v["type"] and isinstance(v["value"], str)
                if v["variablesReference"]:
                    pending.append(v["variablesReference"])
            seen += 1
