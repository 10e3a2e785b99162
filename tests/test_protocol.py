"""The wire protocol: every frame round-trips, and anything else is a `ProtocolError` with a reason."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import (
    Ack,
    CollectionError,
    CollectionFinished,
    Hello,
    Output,
    PhaseFinished,
    ProcessFinished,
    ProcessStarted,
    ProtocolError,
    RunFinished,
    RunStarted,
    TestFinished,
    TestStarted,
    Welcome,
)

EVENT_CLASSES = protocol.Event.__args__  # type: ignore[attr-defined]
CLIENT_CLASSES = (Hello, *EVENT_CLASSES)
SERVER_CLASSES = (Welcome, Ack, protocol.Request, protocol.Registered)
ALL_TAGS = sorted({c.__struct_config__.tag for c in (*CLIENT_CLASSES, *SERVER_CLASSES)})

# Strategies -----------------------------------------------------------------------------------------

texts = st.text(max_size=40)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
# Non-finite floats are excluded here on purpose: they do not survive JSON (see
# test_non_finite_floats_do_not_encode_to_a_frame_the_protocol_rejects).
floats = st.floats(allow_nan=False, allow_infinity=False)
run_ids = st.from_regex(protocol.RUN_ID_PATTERN, fullmatch=True)


def _event(cls: type, **fields: Any) -> st.SearchStrategy[Any]:
    return st.builds(cls, run_id=run_ids, process=texts, seq=ints, ts=floats, **fields)


EVENT_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    RunStarted: _event(
        RunStarted,
        args=st.lists(texts, max_size=5),
        rootdir=texts,
        cwd=texts,
        python=texts,
        pytest_version=texts,
        plugin_version=texts,
        host=texts,
        pid=ints,
        label=texts,
        workers=ints,
    ),
    ProcessStarted: _event(ProcessStarted, worker=texts, pid=ints, host=texts),
    CollectionFinished: _event(CollectionFinished, count=ints),
    CollectionError: _event(CollectionError, nodeid=texts, message=texts, longrepr=texts),
    TestStarted: _event(TestStarted, nodeid=texts, worker=texts, file=texts, line=st.none() | ints),
    PhaseFinished: _event(
        PhaseFinished,
        nodeid=texts,
        worker=texts,
        when=st.sampled_from(["setup", "call", "teardown"]) | texts,
        outcome=st.sampled_from(["passed", "failed", "skipped"]) | texts,
        duration=floats,
        message=texts,
        longrepr=texts,
        wasxfail=st.none() | texts,
    ),
    Output: _event(
        Output,
        nodeid=texts,
        worker=texts,
        phase=st.sampled_from(["setup", "call", "teardown", "collect", ""]) | texts,
        stream=st.sampled_from(protocol.STREAMS) | texts,
        first=ints,
        stream_first=ints,
        count=ints,
        text=st.text(max_size=200),
        times=st.none() | st.lists(floats, max_size=5),
    ),
    TestFinished: _event(
        TestFinished,
        nodeid=texts,
        worker=texts,
        outcome=texts,
        duration=floats,
        message=texts,
        passed_phases=st.lists(st.builds(protocol.PassedPhase, texts, floats, floats), max_size=3),
    ),
    protocol.FailureSnapshot: _event(
        protocol.FailureSnapshot,
        nodeid=texts,
        worker=texts,
        when=texts,
        snapshot=st.builds(
            protocol.Snapshot,
            exception=st.builds(protocol.SnapshotException, type=texts, message=texts, relation=texts),
            notes=st.lists(texts, max_size=2),
            assertion=texts,
            frames=st.lists(
                st.builds(
                    protocol.SnapshotFrame,
                    file=texts,
                    line=ints,
                    function=texts,
                    library=st.booleans(),
                    source=st.lists(st.tuples(ints, texts), max_size=3),
                    locals=st.lists(
                        st.builds(protocol.SnapshotVar, name=texts, type=texts, value=texts, ref=ints),
                        max_size=3,
                    ),
                ),
                max_size=3,
            ),
        ),
    ),
    protocol.Held: _event(
        protocol.Held, session=texts, nodeid=texts, worker=texts, when=texts, reason=texts, timeout=floats
    ),
    protocol.Resumed: _event(protocol.Resumed, session=texts, reason=texts),
    protocol.HangDetected: _event(
        protocol.HangDetected,
        nodeid=texts,
        worker=texts,
        when=texts,
        report=st.builds(
            protocol.HangReport,
            kind=texts,
            summary=texts,
            file=texts,
            line=ints,
            lines=st.lists(ints, max_size=4),
            cpu=st.none() | floats,
            elapsed=floats,
            threads=st.lists(
                st.builds(
                    protocol.HangThread,
                    name=texts,
                    ident=ints,
                    test=st.booleans(),
                    frames=st.lists(
                        st.builds(protocol.HangFrame, file=texts, line=ints, function=texts, code=texts),
                        max_size=3,
                    ),
                ),
                max_size=2,
            ),
            output=st.lists(texts, max_size=3),
        ),
    ),
    RunFinished: _event(
        RunFinished, exit_status=ints, duration=floats, counts=st.dictionaries(texts, ints, max_size=5)
    ),
    protocol.SessionStarted: _event(
        protocol.SessionStarted,
        mode=st.sampled_from(protocol.SESSION_MODES),
        label=texts,
        command=st.lists(texts, max_size=4),
        cwd=texts,
        source=texts,
        capabilities=st.lists(st.sampled_from(["process_control", "stdin"]), max_size=2),
        restart=st.sampled_from(["no", "on-failure", "always"]),
        host=texts,
        pid=ints,
        parent_run=texts,
        parent_worker=texts,
    ),
    protocol.ProcessStatus: _event(
        protocol.ProcessStatus,
        status=st.sampled_from(protocol.PROCESS_STATES),
        pid=st.none() | ints,
        exit_code=st.none() | ints,
        message=texts,
        ended=st.booleans(),
    ),
    ProcessFinished: _event(ProcessFinished, events=ints),
    protocol.CodeVersion: _event(protocol.CodeVersion, commit=texts, changes=texts, note=texts),
    protocol.CoverageRecorded: _event(
        protocol.CoverageRecorded,
        worker=texts,
        path=texts,
        tests=ints,
        files=ints,
        combined=st.booleans(),
        note=texts,
    ),
    protocol.Localization: _event(
        protocol.Localization,
        budget=floats,
        elapsed=floats,
        failing=st.lists(texts, max_size=3),
        still_failing=st.lists(texts, max_size=3),
        lines=st.lists(
            st.builds(
                protocol.LocalizedLine,
                file=texts,
                line=ints,
                tried=ints,
                mutant=texts,
                fixed=ints,
                failing=ints,
                broke=ints,
                passing=ints,
                note=texts,
            ),
            max_size=3,
        ),
        complete=st.booleans(),
        note=texts,
    ),
    protocol.ValueTrace: _event(
        protocol.ValueTrace,
        nodeid=texts,
        worker=texts,
        outcome=texts,
        trace=st.builds(
            protocol.Trace,
            backend=texts,
            files=st.lists(texts, max_size=3),
            functions=st.lists(texts, max_size=3),
            steps=st.lists(
                st.builds(
                    protocol.TraceStep,
                    index=ints,
                    kind=st.sampled_from(["call", "set", "return", "raise"]),
                    frame=ints,
                    file=ints,
                    line=ints,
                    function=ints,
                    name=texts,
                    value=texts,
                    caller=ints,
                    at=ints,
                ),
                max_size=4,
            ),
            lines=ints,
            head=ints,
            dropped=ints,
            watch=st.lists(texts, max_size=2),
            duration=floats,
            error=texts,
        ),
    ),
}
events = st.one_of(*EVENT_STRATEGIES.values())
hellos = st.builds(
    Hello, protocol=ints, run_id=run_ids, process=texts, worker=texts, pid=ints, spool=st.none() | texts
)
client_frames = st.one_of(hellos, events)
server_frames = st.one_of(
    st.builds(Welcome, protocol=ints, server_pid=ints, label=texts, spool_read=st.booleans()),
    st.builds(protocol.Registered, run_id=texts, label=texts),
    st.builds(Ack, seq=ints),
    st.builds(
        protocol.Request,
        id=ints,
        session=texts,
        command=st.sampled_from(protocol.REQUEST_COMMANDS + protocol.PROCESS_COMMANDS),
        arguments=st.dictionaries(texts, ints | texts | st.booleans(), max_size=3),
    ),
)

json_scalars = st.none() | st.booleans() | ints | floats | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=15,
)


def _valid_frame_dict(frame: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(protocol.encode(frame))
    return data


@st.composite
def json_objects_like_frames(draw: st.DrawFn) -> Any:
    """JSON close to real frames: a valid frame with a field dropped, replaced or added, or noise."""
    kind = draw(st.sampled_from(["drop", "replace", "add", "type", "noise"]))
    if kind == "noise":
        return draw(json_values)
    data = _valid_frame_dict(draw(st.one_of(client_frames, server_frames)))
    if kind == "drop":
        data.pop(draw(st.sampled_from(sorted(data))))
    elif kind == "replace":
        data[draw(st.sampled_from(sorted(data)))] = draw(json_values)
    elif kind == "add":
        data[draw(texts)] = draw(json_values)
    else:
        data["type"] = draw(st.sampled_from(ALL_TAGS) | texts | json_values)
    return data


# Round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__struct_config__.tag)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_event_type_round_trips_through_encode(cls: type, data: st.DataObject) -> None:
    event = data.draw(EVENT_STRATEGIES[cls])
    line = protocol.encode(event)
    assert b"\n" not in line  # one frame is one line, whatever its text fields hold
    assert json.loads(line)["type"] == cls.__struct_config__.tag
    decoded = protocol.decode_client_frame(line)
    assert type(decoded) is cls
    assert decoded == event
    # str input (a WebSocket text message) decodes the same as bytes
    assert protocol.decode_client_frame(line.decode()) == event


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(client_frames, max_size=12))
def test_frames_round_trip_through_encode_lines_and_split_lines(frames: list[Any]) -> None:
    body = protocol.encode_lines(frames)
    assert body.count(b"\n") == len(frames)
    assert body == b"".join(protocol.encode(f) + b"\n" for f in frames)
    lines = protocol.split_lines(body)
    assert [protocol.decode_client_frame(line) for line in lines] == frames
    # A str body (a WebSocket text message) splits into the same lines.
    assert protocol.split_lines(body.decode()) == lines


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(events, min_size=1, max_size=8), blanks=st.sampled_from([b"\n", b"  \n", b"\t\n"]))
def test_split_lines_skips_blank_lines(frames: list[Any], blanks: bytes) -> None:
    body = blanks + blanks.join(protocol.encode(f) for f in frames) + b"\n" + blanks
    assert [protocol.decode_client_frame(line) for line in protocol.split_lines(body)] == frames


@pytest.mark.parametrize("run_id", ["", ".", "..", "../store", "a/b", ".hidden", "x\n", "é", "r" * 65])
def test_a_run_id_that_is_not_a_plain_file_name_is_refused(run_id: str) -> None:
    """Run ids name the store's folders: `..` would have made eviction delete the whole .mcpdebug/."""
    line = json.dumps(
        {
            "type": "test_started",
            "run_id": run_id,
            "process": "p",
            "seq": 1,
            "ts": 0.0,
            "nodeid": "t",
            "worker": "main",
        }
    )
    with pytest.raises(
        protocol.ProtocolError, match=r"invalid frame: Expected `str` matching regex .* at `\$.run_id`"
    ):
        protocol.decode_client_frame(line)
    assert not protocol.is_run_id(run_id)
    assert protocol.is_run_id("20261121-224501-3fa2") and protocol.is_run_id("r.1_a-b")


def test_split_lines_keeps_an_unterminated_last_line() -> None:
    first, last = Ack(seq=1), Ack(seq=2)
    body = protocol.encode_lines([first]) + protocol.encode(last)
    assert [protocol.decode_server_frame(line) for line in protocol.split_lines(body)] == [first, last]


def test_encode_lines_of_nothing_is_empty() -> None:
    assert protocol.encode_lines([]) == b""
    assert protocol.split_lines(b"") == []
    assert protocol.split_lines("\n\n") == []


@settings(max_examples=100, deadline=None)
@given(hello=hellos)
def test_hello_round_trips(hello: Hello) -> None:
    decoded = protocol.decode_client_frame(protocol.encode(hello))
    assert isinstance(decoded, Hello)
    assert decoded == hello


@settings(max_examples=100, deadline=None)
@given(frame=server_frames)
def test_welcome_and_ack_round_trip(frame: Welcome | Ack) -> None:
    decoded = protocol.decode_server_frame(protocol.encode(frame))
    assert type(decoded) is type(frame)
    assert decoded == frame


def test_handshake_frames_on_the_wire() -> None:
    hello = Hello(protocol=protocol.PROTOCOL_VERSION, run_id="r1", process="main-12", worker="main", pid=12)
    assert json.loads(protocol.encode(hello)) == {
        "type": "hello",
        "protocol": protocol.PROTOCOL_VERSION,
        "run_id": "r1",
        "process": "main-12",
        "worker": "main",
        "pid": 12,
    }  # spool=None is a default, so it is omitted
    with_spool = msgspec.structs.replace(hello, spool="r1.main-12.jsonl")
    assert protocol.decode_client_frame(protocol.encode(with_spool)).spool == "r1.main-12.jsonl"  # type: ignore[union-attr]
    assert protocol.decode_server_frame(b'{"type":"welcome","protocol":1,"server_pid":99}') == Welcome(
        protocol=1, server_pid=99
    )
    assert protocol.decode_server_frame(b'{"type":"ack","seq":41}') == Ack(seq=41)


def test_process_session_frames_on_the_wire() -> None:
    """Seed 004's registration and status, as a runner sends them and an older client ignores."""
    registered = protocol.decode_server_frame(b'{"type":"registered","run_id":"r1","label":"backend-2"}')
    assert registered == protocol.Registered(run_id="r1", label="backend-2")
    welcome = protocol.decode_server_frame(
        b'{"type":"welcome","protocol":1,"server_pid":9,"label":"backend"}'
    )
    assert welcome == Welcome(protocol=1, server_pid=9, label="backend", spool_read=False)
    status = protocol.ProcessStatus(
        run_id="r1", process="run-7", seq=4, ts=1.0, status="crashed", exit_code=-11
    )
    assert json.loads(protocol.encode(status)) == {
        "type": "process_status",
        "run_id": "r1",
        "process": "run-7",
        "seq": 4,
        "ts": 1.0,
        "status": "crashed",
        "exit_code": -11,
    }


def test_optional_fields_take_their_defaults_when_absent() -> None:
    line = b'{"type":"run_finished","run_id":"r","process":"p","seq":3,"ts":1.5,"exit_status":1,"duration":2}'
    frame = protocol.decode_client_frame(line)
    assert frame == RunFinished(
        run_id="r", process="p", seq=3, ts=1.5, exit_status=1, duration=2.0, counts={}
    )
    assert isinstance(frame, RunFinished)
    assert isinstance(frame.duration, float)


def test_event_types_lists_every_event_tag() -> None:
    assert set(protocol.EVENT_TYPES) == {c.__struct_config__.tag for c in EVENT_CLASSES}
    assert len(protocol.EVENT_TYPES) == 20
    assert "output" in protocol.EVENT_TYPES
    assert "hello" not in protocol.EVENT_TYPES


def test_output_keeps_its_lines_and_per_line_times_on_one_frame_line() -> None:
    event = Output(
        run_id="r",
        process="main-1",
        seq=7,
        ts=12.5,
        nodeid="test_a.py::test_one",
        worker="main",
        phase="call",
        stream="log",
        first=3,
        stream_first=1,
        count=2,
        text="INFO first\nWARNING second",
        times=[12.25, 12.5],
    )
    line = protocol.encode(event)
    assert b"\n" not in line
    assert protocol.decode_client_frame(line) == event
    plain = protocol.decode_client_frame(protocol.encode(msgspec.structs.replace(event, times=None)))
    assert isinstance(plain, Output) and plain.times is None
    assert b'"times"' not in protocol.encode(plain)  # defaults stay off the wire


# Rejection -------------------------------------------------------------------------------------------


def _assert_decodes_or_protocol_error(decode: Any, payload: bytes | str, classes: tuple[type, ...]) -> None:
    try:
        frame = decode(payload)
    except ProtocolError as exc:
        assert str(exc).strip(), "a ProtocolError must say why"
        return
    assert isinstance(frame, classes)


@settings(max_examples=100, deadline=None)
@given(payload=st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_protocol_error(payload: bytes) -> None:
    _assert_decodes_or_protocol_error(protocol.decode_client_frame, payload, CLIENT_CLASSES)
    _assert_decodes_or_protocol_error(protocol.decode_server_frame, payload, SERVER_CLASSES)


@settings(max_examples=100, deadline=None)
@given(value=json_objects_like_frames())
def test_arbitrary_json_decodes_or_raises_protocol_error(value: Any) -> None:
    payload = json.dumps(value).encode()
    _assert_decodes_or_protocol_error(protocol.decode_client_frame, payload, CLIENT_CLASSES)
    _assert_decodes_or_protocol_error(protocol.decode_server_frame, payload, SERVER_CLASSES)


@settings(max_examples=100, deadline=None)
@given(frame=events, suffix=st.binary(min_size=1, max_size=3).filter(lambda b: b.strip() != b""))
def test_trailing_garbage_after_a_frame_is_rejected(frame: Any, suffix: bytes) -> None:
    with pytest.raises(ProtocolError, match=r"^(malformed|invalid) frame: "):
        protocol.decode_client_frame(protocol.encode(frame) + suffix)


VALID_STARTED = {
    "type": "test_started",
    "run_id": "r",
    "process": "main-1",
    "seq": 4,
    "ts": 10.0,
    "nodeid": "test_a.py::test_one",
    "worker": "main",
}


def _reject(value: Any) -> str:
    payload = value if isinstance(value, bytes) else json.dumps(value).encode()
    with pytest.raises(ProtocolError) as info:
        protocol.decode_client_frame(payload)
    return str(info.value)


def test_the_valid_baseline_decodes() -> None:
    assert protocol.decode_client_frame(json.dumps(VALID_STARTED)) == TestStarted(
        run_id="r", process="main-1", seq=4, ts=10.0, nodeid="test_a.py::test_one", worker="main"
    )


def test_unknown_type_is_rejected_naming_the_type() -> None:
    message = _reject({**VALID_STARTED, "type": "test_exploded"})
    assert message.startswith("invalid frame: ")
    assert "'test_exploded'" in message
    assert "$.type" in message


def test_missing_type_is_rejected() -> None:
    message = _reject({k: v for k, v in VALID_STARTED.items() if k != "type"})
    assert message.startswith("invalid frame: ")
    assert "missing required field `type`" in message


@pytest.mark.parametrize("field", ["run_id", "process", "seq", "ts", "nodeid", "worker"])
def test_missing_required_field_is_rejected_naming_the_field(field: str) -> None:
    message = _reject({k: v for k, v in VALID_STARTED.items() if k != field})
    assert message.startswith("invalid frame: ")
    assert f"missing required field `{field}`" in message


@pytest.mark.parametrize(
    ("field", "value", "expected", "got"),
    [
        ("seq", "4", "int", "str"),
        ("ts", "now", "float", "str"),
        ("nodeid", 7, "str", "int"),
        ("line", "12", "int | null", "str"),
        ("run_id", None, "str", "null"),
        ("seq", 4.5, "int", "float"),
    ],
)
def test_wrong_field_type_is_rejected_naming_field_and_types(
    field: str, value: Any, expected: str, got: str
) -> None:
    message = _reject({**VALID_STARTED, field: value})
    assert message.startswith("invalid frame: ")
    assert f"Expected `{expected}`, got `{got}`" in message
    assert f"$.{field}" in message


def test_wrong_type_inside_a_container_names_the_path() -> None:
    run_finished = {"type": "run_finished", "run_id": "r", "process": "p", "seq": 1, "ts": 1.0}
    message = _reject({**run_finished, "exit_status": 0, "duration": 1.0, "counts": {"passed": "three"}})
    assert "Expected `int`, got `str`" in message
    assert "$.counts[...]" in message


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "malformed"),
        (b"{", "truncated"),
        (b'{"seq": 1,}', "trailing comma"),
        (b"{'type': 'ack'}", "keys must be strings"),
        (b"", "truncated"),
        (b"\xff\xfe{}", "malformed"),
    ],
)
def test_non_json_is_rejected_as_malformed(payload: bytes, reason: str) -> None:
    message = _reject(payload)
    assert message.startswith("malformed frame: ")
    assert reason in message


@pytest.mark.parametrize(("payload", "got"), [([], "array"), ("hello", "str"), (3, "int"), (None, "null")])
def test_json_that_is_not_an_object_is_rejected(payload: Any, got: str) -> None:
    message = _reject(payload)
    assert message.startswith("invalid frame: ")
    assert f"Expected `object`, got `{got}`" in message


@pytest.mark.parametrize(
    "frame",
    [
        Hello(protocol=1, run_id="r", process="p", worker="main", pid=1),
        RunStarted(
            run_id="r",
            process="p",
            seq=1,
            ts=1.0,
            args=[],
            rootdir="/",
            cwd="/",
            python="3.12",
            pytest_version="8",
            plugin_version="0.1",
            host="h",
            pid=1,
        ),
        TestStarted(run_id="r", process="p", seq=2, ts=2.0, nodeid="t.py::t", worker="main"),
        ProcessFinished(run_id="r", process="p", seq=3, ts=3.0, events=3),
    ],
    ids=lambda f: type(f).__struct_config__.tag,
)
def test_decode_server_frame_rejects_client_frames(frame: Any) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_server_frame(protocol.encode(frame))
    message = str(info.value)
    assert message.startswith("invalid server frame: ")
    assert f"'{type(frame).__struct_config__.tag}'" in message


@pytest.mark.parametrize("frame", [Welcome(protocol=1, server_pid=2), Ack(seq=5)], ids=["welcome", "ack"])
def test_decode_client_frame_rejects_server_frames(frame: Any) -> None:
    message = _reject(protocol.encode(frame))
    assert message.startswith("invalid frame: ")
    assert f"'{type(frame).__struct_config__.tag}'" in message


def test_protocol_error_is_a_value_error() -> None:
    assert issubclass(ProtocolError, ValueError)


# Found bugs -------------------------------------------------------------------------------------------


def test_deeply_nested_json_is_a_protocol_error_not_a_recursion_error() -> None:
    """BUG: msgspec raises RecursionError on deep nesting (even inside an ignored field), which is not
    a DecodeError, so it escapes `decode_client_frame` and the spool ingestion that relies on it."""
    depth = 100_000
    payload = b'{"type":"ack","seq":1,"extra":' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(ProtocolError):
        protocol.decode_client_frame(payload)
    with pytest.raises(ProtocolError):
        protocol.decode_server_frame(payload)


def test_str_frame_with_a_lone_surrogate_is_a_protocol_error() -> None:
    """BUG: `decode_client_frame` accepts ``str`` but a str that is not encodable as UTF-8 raises
    UnicodeEncodeError instead of ProtocolError."""
    with pytest.raises(ProtocolError):
        protocol.decode_client_frame('{"type":"ack","seq":1,"x":"\ud800"}')


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
def test_non_finite_floats_do_not_encode_to_a_frame_the_protocol_rejects(value: float) -> None:
    """BUG (minor): msgspec encodes inf/nan as ``null``, so `encode` produces a line that
    `decode_client_frame` rejects: the event is silently lost as a "bad line" on ingestion.
    Either `encode` should refuse it or the frame should decode."""
    event = TestFinished(
        run_id="r",
        process="p",
        seq=1,
        ts=1.0,
        nodeid="t.py::t",
        worker="main",
        outcome="passed",
        duration=value,
    )
    try:
        line = protocol.encode(event)
    except (ValueError, TypeError, msgspec.EncodeError):
        return  # refusing to encode is an acceptable answer
    decoded = protocol.decode_client_frame(line)
    assert isinstance(decoded, TestFinished)


# clip ----------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=60), extra=st.integers(min_value=0, max_value=40))
def test_clip_leaves_text_within_the_limit_unchanged(text: str, extra: int) -> None:
    assert protocol.clip(text, len(text) + extra) == text


@settings(max_examples=100, deadline=None)
@given(text=st.text(min_size=3, max_size=300), limit=st.integers(min_value=2, max_value=200))
def test_clip_keeps_head_and_tail_and_counts_what_was_dropped(text: str, limit: int) -> None:
    if len(text) <= limit:
        assert protocol.clip(text, limit) == text
        return
    clipped = protocol.clip(text, limit)
    half = limit // 2
    dropped = len(text) - 2 * half
    marker = f"\n[... mcpdebug: {dropped} characters dropped ...]\n"
    assert clipped == text[:half] + marker + text[-half:]
    assert clipped.startswith(text[:half])
    assert clipped.endswith(text[-half:])
    # kept + dropped accounts for every character of the original
    assert len(clipped) - len(marker) + dropped == len(text)


def test_clip_example() -> None:
    text = "H" * 10 + "x" * 1000 + "T" * 10
    clipped = protocol.clip(text, 20)
    assert clipped == "H" * 10 + "\n[... mcpdebug: 1000 characters dropped ...]\n" + "T" * 10


def test_clip_default_limit_is_max_text_chars() -> None:
    exactly = "a" * protocol.MAX_TEXT_CHARS
    assert protocol.clip(exactly) is exactly
    over = exactly + "bc"
    clipped = protocol.clip(over)
    assert "[... mcpdebug: 2 characters dropped ...]" in clipped
    assert clipped.endswith("a" * (protocol.MAX_TEXT_CHARS // 2 - 2) + "bc")
    assert len(clipped) < len(over) + 60


def test_clip_with_a_limit_below_two_still_drops_text() -> None:
    """BUG (edge): with ``limit`` 1 (or 0) ``half`` is 0 and ``text[-0:]`` is the whole text, so
    the result says characters were dropped but keeps all of them (and is longer than the input)."""
    clipped = protocol.clip("abcdef", 1)
    assert "6 characters dropped" in clipped
    assert "abcdef" not in clipped


replies = st.builds(
    protocol.Reply,
    id=ints,
    ok=st.booleans(),
    result=st.dictionaries(texts, json_values, max_size=4),
    error=texts,
)


@settings(max_examples=100, deadline=None)
@given(reply=replies)
def test_replies_round_trip_and_are_told_from_events_by_their_prefix(reply: protocol.Reply) -> None:
    text = protocol.encode(reply).decode()
    assert text.startswith(protocol.REPLY_PREFIX)  # how the server routes a message to a waiting request
    assert protocol.decode_reply(text) == reply
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_client_frame(text)  # a reply is never taken for an event


@settings(max_examples=100, deadline=None)
@given(event=events)
def test_no_event_looks_like_a_reply(event: Any) -> None:
    assert not protocol.encode(event).decode().startswith(protocol.REPLY_PREFIX)
