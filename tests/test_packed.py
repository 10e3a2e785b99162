"""The packed form of the protocol: binary messages of msgpack events whose output lines are raw bytes.

A live client sends these; the JSON form (spool files, ``.wal`` copies, text messages) must stay what
it was, so an old spool still imports and a spooled packed event reads as the JSON one would.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol import EVENT_CLASSES, EVENT_STRATEGIES, floats, ints, run_ids

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import Output, ProtocolError, Wire
from pytest_mcpdebug.recording.wire import batches, runs

raw_outputs = st.builds(
    Output,
    run_id=run_ids,
    process=st.text(max_size=20),
    seq=ints,
    ts=floats,
    nodeid=st.text(max_size=20),
    worker=st.just("main"),
    phase=st.just("call"),
    stream=st.sampled_from(protocol.STREAMS),
    first=ints,
    stream_first=ints,
    count=ints,
    data=st.binary(min_size=1, max_size=300),
)
events = st.one_of(*EVENT_STRATEGIES.values(), raw_outputs)
wires = st.tuples(events, st.booleans()).map(lambda p: protocol.encode(p[0]) if p[1] else protocol.pack(p[0]))
"""Events as a live client holds them: JSON lines (written ahead, replayed) or packed (or raw output)."""


def _message(items: list[Any]) -> bytes:
    return protocol.packed_message([protocol.pack(e) for e in items])


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__struct_config__.tag)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_every_event_type_round_trips_through_a_packed_message(cls: type, data: st.DataObject) -> None:
    batch = data.draw(st.lists(EVENT_STRATEGIES[cls], min_size=1, max_size=3))
    message = _message(batch)
    assert protocol.is_packed_message(message)
    assert protocol.decode_packed_message(message) == batch


@settings(max_examples=100, deadline=None)
@given(batch=st.lists(events, max_size=20))
def test_a_mixed_batch_keeps_its_order_and_its_bytes(batch: list[Any]) -> None:
    assert protocol.decode_packed_message(_message(batch)) == batch


@settings(max_examples=200, deadline=None)
@given(items=st.lists(wires, max_size=30), limit=st.integers(1, 4000))
def test_a_delivery_is_cut_into_batches_and_runs_that_keep_every_item_in_order(
    items: list[Wire], limit: int
) -> None:
    sizes = protocol.wire_sizes(items)
    assert sizes == [protocol.wire_size(item) for item in items]
    assert protocol.json_forms(items) == [protocol.is_json(item) for item in items]

    cut = list(batches(items, sizes, limit))
    assert [item for batch in cut for item in batch] == items
    for batch in cut:
        counted = [protocol.wire_size(item) + 1 for item in batch]
        assert batch and sum(counted[:-1]) < limit  # a batch ends at its first item reaching the limit
    assert all(sum(protocol.wire_size(item) + 1 for item in batch) >= limit for batch in cut[:-1])

    for batch in cut:
        split = list(runs(batch))
        assert [item for _, run in split for item in run] == batch
        assert all(run and all(protocol.is_json(item) == json for item in run) for json, run in split)
        assert all(a[0] != b[0] for a, b in itertools.pairwise(split))  # a run is as long as it can be


@settings(max_examples=200, deadline=None)
@given(event=raw_outputs)
def test_raw_lines_become_text_only_in_the_json_form(event: Output) -> None:
    """Packed, the bytes arrive as they were written; as JSON (a spool), they are the text decoding
    them would give, invalid UTF-8 replaced, and the store reads the same valid UTF-8 from both."""
    (packed,) = protocol.decode_packed_message(_message([event]))
    assert isinstance(packed, Output) and packed.data == event.data and packed.text == ""
    text = event.data.decode("utf-8", "replace")
    for line in (protocol.encode(event), protocol.json_line(protocol.pack(event))):
        spooled = protocol.decode_client_frame(line)
        assert isinstance(spooled, Output)
        assert spooled.text == text and spooled.data == b""
        assert b'"data"' not in line
        assert spooled.raw() == packed.raw() == text.encode()
    assert packed.as_text() == text
    assert packed.size == len(event.data)


def test_a_json_line_stays_as_it_is() -> None:
    event = protocol.TestStarted(run_id="r", process="p", seq=1, ts=1.0, nodeid="t", worker="main")
    line = protocol.encode(event)
    assert protocol.json_line(line) is line
    assert protocol.json_line(protocol.pack(event)) == line


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(st.one_of(*EVENT_STRATEGIES.values()), min_size=1, max_size=5))
def test_json_lines_are_never_taken_for_a_packed_message(frames: list[Any]) -> None:
    body = protocol.encode_lines(frames)
    assert not protocol.is_packed_message(body) and not protocol.is_packed_message(body.decode())
    assert not protocol.is_packed_message(b"")


builtins = st.recursive(
    st.none() | st.booleans() | ints | floats | st.text(max_size=10) | st.binary(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(builtins, max_size=5))
def test_any_msgpack_array_decodes_or_raises_protocol_error(items: list[Any]) -> None:
    _decodes_or_protocol_error(msgspec.msgpack.encode(items))


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=200), header=st.sampled_from([b"\x91", b"\x9f", b"\xdc\xff\xff", b"\xdd"]))
def test_any_bytes_after_an_array_header_decode_or_raise_protocol_error(
    payload: bytes, header: bytes
) -> None:
    _decodes_or_protocol_error(header + payload)


@settings(max_examples=100, deadline=None)
@given(event=st.one_of(*EVENT_STRATEGIES.values()), field=st.text(min_size=1, max_size=12), value=builtins)
def test_an_event_with_a_field_made_wrong_is_refused_with_a_reason(
    event: Any, field: str, value: Any
) -> None:
    fields = msgspec.to_builtins(event)
    fields[field] = value
    _decodes_or_protocol_error(msgspec.msgpack.encode([fields]))


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        pytest.param(b"\xdd\xff\xff\xff\xff", "truncated", id="four-billion-events-claimed"),
        pytest.param(b"\x91" * 100_000 + b"\xc0", "invalid frame|nested", id="deeply-nested"),
        pytest.param(b"\x90\x00", "trailing", id="trailing-bytes"),
        pytest.param(msgspec.msgpack.encode([{"type": "hello"}]), "invalid frame", id="hello"),
        pytest.param(msgspec.msgpack.encode([{"type": "ack", "seq": 1}]), "invalid frame", id="server-frame"),
        pytest.param(b"\x91\xc1", "malformed", id="reserved-byte"),
        pytest.param(b"\x91\xd4\x01\x02", "got `ext`", id="extension-type"),
    ],
)
def test_hostile_packed_messages_are_refused_with_a_reason(message: bytes, reason: str) -> None:
    assert protocol.is_packed_message(message)
    with pytest.raises(ProtocolError, match=reason):
        protocol.decode_packed_message(message)


def _decodes_or_protocol_error(message: bytes) -> None:
    try:
        decoded = protocol.decode_packed_message(message)
    except ProtocolError as exc:
        assert str(exc).strip()
        return
    assert all(isinstance(e, EVENT_CLASSES) for e in decoded)
