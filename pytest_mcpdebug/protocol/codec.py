"""Encoding and decoding frames, anything unknown rejected with a reason.

Two forms of the same frames. JSON, one object per line: the handshake, the server's frames, replies,
spool files and ``.wal`` copies (text a person can read, appended a line at a time). Packed
(msgpack), a binary WebSocket message holding an array of events: what a live client streams, where
an `Output`'s lines are its raw ``data`` bytes, copied once into the message and once out of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import msgspec

from pytest_mcpdebug.protocol.control import (
    Ack,
    ClientFrame,
    Hello,
    Registered,
    Reply,
    Request,
    ServerFrame,
    Welcome,
)
from pytest_mcpdebug.protocol.frames import MAX_TEXT_CHARS, Event, Frame, Output, TestFinished
from pytest_mcpdebug.protocol.payloads import HangReport, Snapshot
from pytest_mcpdebug.protocol.quick import QuickPass


class ProtocolError(ValueError):
    """A frame that cannot be accepted; the message says why."""


_encoder = msgspec.json.Encoder()
_packer = msgspec.msgpack.Encoder()


@functools.cache
def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """Built on first use: a decoder resolves the annotations of every type it may meet (milliseconds
    for the frame unions), which a test process that only encodes never needs."""
    return msgspec.json.Decoder(kind)


def _as_json(frame: Frame) -> Frame:
    """JSON has no bytes: an `Output`'s raw lines travel as its ``text``."""
    if type(frame) is Output and frame.data:
        return msgspec.structs.replace(frame, text=frame.data.decode("utf-8", "replace"), data=b"")
    return frame


def encode(frame: Frame) -> bytes:
    """One frame as one line of JSON (without the newline)."""
    return _encoder.encode(_as_json(frame))


encode_quick: Final[Callable[[QuickPass], bytes]] = _encoder.encode
"""A quiet pass's short record as one line of JSON (an array): the encoder's own method, no call between."""


def encode_lines(frames: list[Frame]) -> bytes:
    """Frames as newline-terminated JSON lines: the body of a message or a spool append."""
    buf = bytearray()
    for frame in frames:
        _encoder.encode_into(_as_json(frame), buf, -1)
        buf += b"\n"
    return bytes(buf)


Wire = bytes | Output
"""An event on its way to the server, as the sender holds it until acknowledged: encoded (a JSON line,
or packed), or an `Output` left as it is, so its lines are copied once, into the message."""

OUTPUT_OVERHEAD: Final = 256
"""Bytes an `Output`'s fields take besides its lines, counted towards batch and memory limits."""


def pack(event: Event) -> Wire:
    """An event ready for `packed_message`: output as it is, any other event packed now (its size is
    then known, for the limits, and it no longer refers to the caller's objects)."""
    return event if type(event) is Output else _packer.encode(event)


def wire_size(item: Wire) -> int:
    return len(item) if isinstance(item, bytes) else item.size + OUTPUT_OVERHEAD


def wire_sizes(items: list[Wire]) -> list[int]:
    """`wire_size` of each item, in one pass (a delivery holds a few hundred quiet passes' records)."""
    return [len(item) if type(item) is bytes else item.size + OUTPUT_OVERHEAD for item in items]  # type: ignore[union-attr]


_JSON_STARTS: Final = (b"{", b"[")


def is_json(item: Wire) -> bool:
    """Whether an item is a JSON line, an event's or a quiet pass's short record (a packed one starts
    with a msgpack map's header)."""
    return isinstance(item, bytes) and item[:1] in _JSON_STARTS


def json_forms(items: list[Wire]) -> list[bool]:
    """`is_json` of each item, in one pass."""
    return [type(item) is bytes and item[:1] in _JSON_STARTS for item in items]


def packed_message(items: list[Wire]) -> bytes:
    """A binary message of events (no JSON lines among them): one msgpack array, in one encoding."""
    return _packer.encode([msgspec.Raw(item) if isinstance(item, bytes) else item for item in items])


def is_packed_message(message: bytes | str) -> bool:
    """Whether a message is a packed array (else JSON lines: text messages, spool replays, protocol 1)."""
    if isinstance(message, str) or not message:
        return False
    first = message[0]
    return 0x90 <= first <= 0x9F or first in (0xDC, 0xDD)


def decode_packed_message(message: bytes) -> list[Event]:
    """The events of a packed message, rejecting anything else (a hello, trailing bytes) with a reason."""
    try:
        events: list[Event] = _unpacker(list[Event]).decode(message)  # type: ignore[valid-type]
        return events
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid frame: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    except RecursionError:
        raise ProtocolError("malformed message: nested too deeply") from None


def json_line(item: Wire) -> bytes:
    """An item as a JSON line, whatever its form: what a spool file holds (a quiet pass's short
    record, a JSON array, is kept as it is: see `quick`)."""
    if isinstance(item, bytes):
        return item if item[:1] in (b"{", b"[") else encode(_unpacker(Event).decode(item))
    return encode(item)


def event_line(line: bytes) -> bytes:
    """A spooled line as its event's JSON line (a quiet pass's short record made a `TestFinished`):
    what a spool replayed over a connection sends (each line's ``seq`` is read to match the server's
    acknowledgements)."""
    if not line.startswith(b"["):
        return line
    try:
        return encode(quick_event(line))
    except msgspec.DecodeError:
        return line  # the server says what is wrong with it


def quick_event(line: bytes) -> TestFinished:
    """The `TestFinished` a quiet pass's short record stands for, to be encoded (raises DecodeError)."""
    quick: QuickPass = _decoder(QuickPass).decode(line)
    return quick.event()


@functools.cache
def _unpacker(kind: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(kind)


def decode_client_frame(line: bytes | str) -> Hello | Event:
    """Decode a frame sent by a test process, rejecting malformed or unknown frames with a reason."""
    try:
        frame: Hello | Event = _decoder(ClientFrame).decode(line)
        return frame
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid frame: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed frame: {exc}") from None
    except RecursionError:
        raise ProtocolError("malformed frame: JSON nested too deeply") from None
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"malformed frame: not valid UTF-8 ({exc.reason})") from None


def decode_quick(line: bytes) -> QuickPass:
    """A quiet pass's short record as it is, not made a `TestFinished` (what a first look needs)."""
    try:
        quick: QuickPass = _decoder(QuickPass).decode(line)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise ProtocolError(f"invalid quick pass: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid quick pass: not decodable JSON") from None
    return quick


def decode_spooled_line(line: bytes) -> Hello | Event:
    """A line of a spool file or a write-ahead copy: a frame, or a quiet pass's short record (`quick`)."""
    if not line.lstrip(b" \t").startswith(b"["):
        return decode_client_frame(line)
    try:
        quick: QuickPass = _decoder(QuickPass).decode(line)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise ProtocolError(f"invalid quick pass: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid quick pass: not decodable JSON") from None
    return quick.event(stored=True)


class _VersionProbe(msgspec.Struct):
    type: str = ""
    protocol: int = 0


def hello_version(line: bytes | str) -> int | None:
    """The protocol version a hello claims, read before validating the rest.

    A newer client's hello may have other fields; it must still learn which version we speak.
    """
    try:
        probe = msgspec.json.decode(line, type=_VersionProbe)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return None
    return probe.protocol if probe.type == "hello" else None


def decode_server_frame(line: bytes | str) -> Welcome | Ack | Request | Registered:
    try:
        frame: Welcome | Ack | Request | Registered = _decoder(ServerFrame).decode(line)
        return frame
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise ProtocolError(f"invalid server frame: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid server frame: not decodable JSON") from None


REPLY_PREFIX: Final = '{"type":"reply"'
"""How a reply message starts (msgspec writes the tag first): the server tells it from events by this."""


def decode_reply(message: bytes | str) -> Reply:
    try:
        reply: Reply = _decoder(Reply).decode(message)
        return reply
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"invalid reply: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid reply: not decodable JSON") from None


def encode_value(value: msgspec.Struct) -> str:
    return _encoder.encode(value).decode()


def decode_hang_report(text: str | bytes) -> HangReport:
    report: HangReport = _decoder(HangReport).decode(text)
    return report


def decode_snapshot(text: str | bytes) -> Snapshot:
    snapshot: Snapshot = _decoder(Snapshot).decode(text)
    return snapshot


def split_lines(body: bytes | str) -> list[bytes]:
    """The non-empty lines of a message or spool chunk."""
    data = body.encode() if isinstance(body, str) else body
    return [line for line in data.split(b"\n") if line and not line.isspace()]


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Keep the head and tail of an over-long text field, saying how much was dropped."""
    if len(text) <= limit:
        return text
    half = max(limit, 0) // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n[... mcpdebug: {dropped} characters dropped ...]\n{text[len(text) - half :]}"
