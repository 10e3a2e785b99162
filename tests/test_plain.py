"""A quiet run's events, encoded without msgspec (`protocol.plain`), are the frames the server reads.

Properties: for any field values, `plain`'s JSON line of an event decodes to the same frame as the
frame's own encoding (`codec.encode`), and a quiet pass's short record to the same `TestFinished` as
`QuickPass`'s (which `plain.msgspec_quick_line` writes byte for byte); every field `plain` may write is one of its frame's (msgspec would drop a stranger
without a word); and a quiet recorded run never imports msgspec, while one with a failure does.
"""

from __future__ import annotations

import json
import math
from typing import Any, Union, get_args, get_origin

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import recorded, run_inner
from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import frames, plain

FRAME_OF = {cls.__struct_config__.tag: cls for cls in frames.Event.__args__}  # type: ignore[attr-defined]

texts = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)), max_size=30
)  # JSON has no lone surrogates
ints = st.integers(-(2**63), 2**63 - 1)
floats = st.floats(allow_nan=True, allow_infinity=True)
phases = st.lists(st.tuples(st.sampled_from(["setup", "call", "teardown"]), floats, floats), max_size=3)
finite_phases = st.lists(
    st.tuples(
        st.sampled_from(["setup", "call", "teardown"]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    max_size=3,
)  # a frame's own encoding writes a NaN in a phase as null, which it cannot read back (plain writes 0)


def values_for(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of a frame field's type, as the reporter passes them."""
    if get_origin(annotation) is not None and get_origin(annotation).__name__ == "Annotated":
        return values_for(get_args(annotation)[0])
    if get_origin(annotation) in (Union, type(int | None)):
        return st.one_of([values_for(arg) for arg in get_args(annotation)])
    if annotation is type(None):
        return st.none()
    if annotation is str:
        return texts
    if annotation is int:
        return ints
    if annotation is float:
        return floats
    if get_origin(annotation) is list and get_args(annotation)[0] is frames.PassedPhase:
        return finite_phases
    if get_origin(annotation) is list:
        return st.lists(values_for(get_args(annotation)[0]), max_size=3)
    if get_origin(annotation) is dict:
        return st.dictionaries(texts, values_for(get_args(annotation)[1]), max_size=3)
    raise AssertionError(f"no strategy for {annotation!r}")


@st.composite
def plain_events(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tag = draw(st.sampled_from(sorted(plain.FIELDS)))
    hints = msgspec.structs.fields(FRAME_OF[tag])
    types = {f.name: f.type for f in hints}
    names = draw(st.lists(st.sampled_from(plain.FIELDS[tag]), unique=True))
    required = [f.name for f in hints if f.required and f.name in plain.FIELDS[tag]]
    fields = {name: draw(values_for(types[name])) for name in dict.fromkeys([*required, *names])}
    return tag, fields


def test_every_field_plain_writes_is_its_frames() -> None:
    for tag, names in plain.FIELDS.items():
        own = {f.name for f in msgspec.structs.fields(FRAME_OF[tag])}
        assert set(names) <= own, f"{tag}: {set(names) - own} are not fields of {FRAME_OF[tag].__name__}"
        assert own - set(names) <= {"run_id", "process", "seq", "ts"}, f"{tag} leaves out a field"


@settings(max_examples=300)
@given(event=plain_events(), seq=st.integers(0, 2**63 - 1), ts=floats)
def test_a_plain_line_decodes_to_the_frame_the_frame_encodes_to(
    event: tuple[str, dict[str, Any]], seq: int, ts: float
) -> None:
    tag, fields = event
    line = plain.event_line(tag, "run-1", "main-1", seq, ts, dict(fields))
    ours = protocol.decode_client_frame(line)
    frame = FRAME_OF[tag](run_id="run-1", process="main-1", seq=seq, ts=ts, **fields)
    assert ours == protocol.decode_client_frame(protocol.encode(frame))
    assert json.loads(line)["type"] == tag and b"\n" not in line


@settings(max_examples=300)
@given(
    seq=st.integers(0, 2**63 - 1),
    ts=st.floats(allow_nan=False, allow_infinity=False),
    nodeid=texts,
    worker=texts,
    file=texts,
    line=st.none() | st.integers(0, 2**62),
    attempt=st.integers(1, 100),
    passed=phases,
)
def test_a_plain_short_record_is_the_quiet_pass_msgspec_writes(
    seq: int,
    ts: float,
    nodeid: str,
    worker: str,
    file: str,
    line: int | None,
    attempt: int,
    passed: list[tuple[str, float, float]],
) -> None:
    args = ("run-1", "main-1", seq, ts, nodeid, worker, file, line, attempt, passed)
    ours = plain.quick_line(args)
    reference = protocol.encode_quick(protocol.QuickPass(*args))
    assert protocol.decode_spooled_line(ours) == protocol.decode_spooled_line(reference)
    assert plain.msgspec_quick_line()(args) == reference  # what a long run switches to: the same bytes
    assert json.loads(ours)[2:4] == [seq, ts]


@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf])
def test_a_clock_gone_wrong_still_gives_events_the_server_reads(ts: float) -> None:
    # msgspec's encoder is handed `time.time`'s ts, always finite: only a phase's clock can go wrong
    for quick_line, now in ((plain.quick_line, ts), (plain.msgspec_quick_line(), 5.0)):
        record = quick_line(("run-1", "main-1", 1, now, "t.py::t", "main", "t.py", 0, 1, [("call", ts, ts)]))
        event = protocol.decode_spooled_line(record)
        assert event.ts == (now if math.isfinite(now) else 0.0)  # type: ignore[union-attr]
        assert event.passed_phases == [frames.PassedPhase("call", 0.0, 0.0)]  # type: ignore[union-attr]
    fields = {"nodeid": "t.py::t", "worker": "main", "outcome": "passed", "duration": ts}
    line = plain.event_line(
        "test_finished", "run-1", "main-1", 2, ts, {**fields, "passed_phases": [("call", ts, ts)]}
    )
    finished = protocol.decode_client_frame(line)
    assert finished.ts == 0.0 and finished.duration == 0.0  # type: ignore[union-attr]
    assert finished.passed_phases == [frames.PassedPhase("call", 0.0, 0.0)]  # type: ignore[union-attr]


def test_bad_text_is_replaced_not_raised() -> None:
    """A name that was not UTF-8 (a lone surrogate from the file system's encoding) does not stop its
    test from being recorded."""
    fields = {"nodeid": "test_caf\udce9.py::test_a", "worker": "main"}
    frame = protocol.decode_client_frame(plain.event_line("test_started", "run-1", "main-1", 1, 0.0, fields))
    assert frame.nodeid == "test_caf?.py::test_a"  # type: ignore[union-attr]
    assert protocol.decode_spooled_line(
        plain.quick_line(("r", "p", 1, 1.0, "t\udce9", "main", "f", 0, 1, []))
    )


PROBE = """
import sys
import threading

seen = {"thread": "-", "ticked": False}

class WhoImports:
    def find_spec(self, name, path=None, target=None):
        if name == "msgspec" and seen["thread"] == "-":
            seen["thread"] = threading.current_thread().name
        return None

def pytest_configure(config):
    seen["config"] = config
    sys.meta_path.insert(0, WhoImports())
    from pytest_mcpdebug.recording.reporter import Reporter

    soon = Reporter.use_msgspec_soon

    def use_msgspec_soon(self):  # the sender thread's first interval is over: the run is not short
        seen["ticked"] = True
        soon(self)

    Reporter.use_msgspec_soon = use_msgspec_soon

def pytest_runtest_logfinish(nodeid, location):
    reporter = seen["config"].pluginmanager.get_plugin("mcpdebug-reporter")
    seen["encoder"] = reporter.quick_line.__qualname__  # after each test: the last test's

def pytest_unconfigure(config):
    with open("loaded.txt", "w") as out:
        out.write(f"{'msgspec' in sys.modules} {seen['encoder']} {seen['thread']} {seen['ticked']}")
"""
MSGSPEC = "Encoder.encode"


@pytest.mark.parametrize(
    ("tests", "loaded", "counts"),
    [
        (
            "import pytest\ndef test_a(): pass\ndef test_b(): pass\n@pytest.mark.skip\ndef test_c(): pass",
            ["False", "quick_line", "-"],
            {"passed": 2, "skipped": 1},
        ),
        (
            "def test_a(): pass\ndef test_b(): assert 1 == 2",
            ["True", "quick_line", "MainThread"],
            {"passed": 1, "failed": 1},
        ),
        (
            "import time\ndef test_a(): pass\ndef test_b(): time.sleep(0.5)\ndef test_c(): pass",
            ["True", MSGSPEC, "MainThread"],
            {"passed": 3},
        ),
    ],
    ids=["quiet", "failing", "a tick long"],
)
def test_only_a_run_that_needs_msgspec_loads_it(
    pytester: pytest.Pytester, tests: str, loaded: list[str], counts: dict[str, int]
) -> None:
    """A short quiet run never imports msgspec; a failure's snapshot does; a run a tick long loads it
    at its next quiet pass and encodes quiet passes with it from then on (repaid in a few hundred),
    always in the test thread (an import in the sender thread would hand the GIL to and fro). On a
    loaded machine a run meant to be short may last past the sender's first interval (the probe says
    whether it did): then it is a run a tick long, whose only promise is the thread."""
    pytester.makeconftest(PROBE)
    pytester.makepyfile(test_plain_run=tests)
    result = run_inner(pytester, "--mcp-debug")
    *shown, ticked = (pytester.path / "loaded.txt").read_text().split()
    if ticked == "True" and loaded[1] == "quick_line":  # short only when the machine is not loaded
        assert shown[2] == ("MainThread" if shown[0] == "True" else "-"), shown
    else:
        assert shown == loaded
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["status"] == "finished" and run["collected"] == tests.count("def test_")
    assert run["counts"] == counts
    assert store.test(
        run["run_id"], "test_plain_run.py::test_c" if "test_c" in tests else "test_plain_run.py::test_a"
    )
    assert "mcpdebug: warning" not in result.stdout.str()


def test_a_run_that_cannot_load_msgspec_records_its_quiet_passes_without_it(
    pytester: pytest.Pytester,
) -> None:
    """Where msgspec cannot be imported (here a finder refuses it), a run a tick long keeps the standard
    library's encoding of quiet passes: every test recorded, no error in the run."""
    pytester.makeconftest(
        PROBE.replace(
            "        return None",
            '        if name == "msgspec":\n            raise ImportError("no msgspec here")\n        return None',
        )
    )
    pytester.makepyfile(
        test_plain_run="import time\ndef test_a(): pass\ndef test_b(): time.sleep(0.5)\ndef test_c(): pass"
    )
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=3)
    assert (pytester.path / "loaded.txt").read_text().split() == ["False", "quick_line", "MainThread", "True"]
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["status"] == "finished" and run["counts"] == {"passed": 3}
    assert store.test(run["run_id"], "test_plain_run.py::test_c")
    assert "mcpdebug: warning" not in result.stdout.str()
