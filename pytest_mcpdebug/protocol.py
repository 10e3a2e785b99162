"""The wire protocol between a test process and `mcpdebug serve`.

One format for both transports: a WebSocket message (text or binary) and a spool file are each
newline-delimited JSON *frames*, one frame per line. Every frame is an object whose ``type`` names
one of the definitions below; anything else is rejected with a reason. This module does no I/O and imports
nothing from pytest, so the server can depend on it and the plugin can import it cheaply.

Delivery is at-least-once and ingestion is idempotent: every event carries ``run_id``, ``process``
(unique per OS process within a run) and a per-process ``seq``. The server stores each
``(run_id, process, seq)`` once, so a spool replayed twice, or an event sent over the socket and also
spooled, stores nothing twice.

Handshake over WebSocket: the client connects with ``Authorization: Bearer <token>`` (checked before
the upgrade), sends a ``hello`` frame, and the server answers ``welcome`` or closes the connection
with a close code and a reason. After that the server sends ``ack`` frames naming the highest ``seq``
it has committed, so the client knows what it may forget.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Final

import msgspec

PROTOCOL_VERSION: Final = 1

# Close codes the server uses (RFC 6455 leaves 4000-4999 to applications).
CLOSE_MALFORMED: Final = 1007  # "invalid frame payload data"
CLOSE_POLICY: Final = 1008  # bad or missing hello, protocol version mismatch
CLOSE_TOO_BIG: Final = 1009  # websockets enforces max_size with this code itself

# Limits
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""Largest WebSocket message the server accepts. Clients batch below a quarter of it."""
MAX_TEXT_CHARS: Final = 1024 * 1024
"""Longest text field (failure text, captured output) a single event carries; see `clip`."""


Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""Every integer on the wire fits SQLite's 64-bit integers; larger ones are rejected at decode."""


class _Frame(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Base of every frame; the subclass's ``tag`` is the wire ``type``."""


class _Event(_Frame):
    """An event from a test process. ``(run_id, process, seq)`` identifies it for idempotency."""

    run_id: str
    process: str
    seq: Int
    ts: float

    def __post_init__(self) -> None:
        # JSON has no inf/nan (msgspec writes null, which decoding rejects): keep events decodable.
        if not math.isfinite(self.ts):
            self.ts = 0.0
        duration = getattr(self, "duration", 0.0)
        if not math.isfinite(duration):
            self.duration = 0.0


# Handshake and flow control -------------------------------------------------------------------


class Hello(_Frame, tag="hello"):
    """First frame a client sends over WebSocket."""

    protocol: Int
    run_id: str
    process: str
    worker: str
    pid: Int
    spool: str | None = None
    """Name of this process's spool file (in the spool folder) if it wrote one before connecting."""


class Welcome(_Frame, tag="welcome"):
    protocol: Int
    server_pid: int


class Ack(_Frame, tag="ack"):
    """The server committed every event of this connection up to and including ``seq``."""

    seq: Int


# Live inspection ---------------------------------------------------------------------------------
#
# While a test is held the server sends `Request` frames on the same connection; the held process
# answers each with a `Reply` (a text message of its own, never batched with events) naming its id.


class Request(_Frame, tag="request"):
    id: Int
    session: str
    command: str
    """stack, scopes, variables, locals, evaluate, continue or close."""
    arguments: dict[str, Any] = {}


class Reply(_Frame, tag="reply"):
    id: Int
    ok: bool = True
    result: dict[str, Any] = {}
    error: str = ""
    """Why the request failed, in words an agent can act on (``ok`` is false)."""


REQUEST_COMMANDS: Final = ("stack", "scopes", "variables", "locals", "evaluate", "continue", "close")


# Events -----------------------------------------------------------------------------------------


class RunStarted(_Event, tag="run_started"):
    """Sent once per run by the controlling process (not by xdist workers)."""

    args: list[str]
    rootdir: str
    cwd: str
    python: str
    pytest_version: str
    plugin_version: str
    host: str
    pid: Int
    label: str = ""
    workers: Int = 0


class ProcessStarted(_Event, tag="process_started"):
    """Every process that sends events announces itself: the controller and each xdist worker."""

    worker: str
    pid: Int
    host: str


class CollectionFinished(_Event, tag="collection_finished"):
    count: Int
    """Number of tests collected."""


class CollectionError(_Event, tag="collection_error"):
    """A module or other collector that failed to collect (import error, syntax error, ...)."""

    nodeid: str
    message: str
    longrepr: str = ""


class TestStarted(_Event, tag="test_started"):
    """Sent *before* the test runs, so a process killed mid-test still shows what was running."""

    __test__ = False  # not a pytest test class

    nodeid: str
    worker: str
    file: str = ""
    line: Int | None = None


class PhaseFinished(_Event, tag="phase_finished"):
    """One of setup/call/teardown finished. Its output was sent before, as `Output` events."""

    nodeid: str
    worker: str
    when: str
    outcome: str
    """pytest's report outcome: passed, failed or skipped."""
    duration: float
    message: str = ""
    """One line: the exception or skip reason."""
    longrepr: str = ""
    wasxfail: str | None = None


STREAMS: Final = ("stdout", "stderr", "log", "warnings")
"""Output streams: what the process wrote to fd 1 and 2, log records, and pytest's warnings."""


class Output(_Event, tag="output"):
    """Complete lines one process wrote to one stream, numbered by that process.

    The sender numbers lines per *unit* (a test, or the process's output outside tests), both in
    the unit's combined stream (``first``) and within this stream (``stream_first``), so the
    server stores each line at its place whatever order events arrive in.
    """

    nodeid: str
    """The test that wrote the lines, or "" for output outside tests (collection, session fixtures)."""
    worker: str
    phase: str
    """setup, call, teardown, collect, or "" outside any phase."""
    stream: str
    first: Int
    """1-based number of the first line in the unit's combined output."""
    stream_first: Int
    """1-based number of the first line within its stream."""
    count: Int
    text: str
    """``count`` lines joined by newlines (no trailing newline); each at most the line limit."""
    times: list[float] | None = None
    """Per-line timestamps when they differ (log records); otherwise every line has ``ts``."""


class PassedPhase(msgspec.Struct, array_like=True):
    """A phase that passed quietly, reported with its test's end rather than in an event of its own."""

    when: str
    duration: float
    finished: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.duration):
            self.duration = 0.0
        if not math.isfinite(self.finished):
            self.finished = 0.0


class SnapshotVar(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A variable: its value rendered by seed 000's rules; ``ref`` > 0 if it has children."""

    name: str
    type: str
    value: str
    ref: Int = 0


class SnapshotException(msgspec.Struct, kw_only=True, omit_defaults=True):
    type: str
    message: str
    relation: str = ""
    """For a link of the chain: "cause" (raise ... from) or "context" (raised while handling)."""


class SnapshotFrame(msgspec.Struct, kw_only=True, omit_defaults=True):
    file: str
    """Absolute path."""
    line: Int
    function: str
    library: bool = False
    """A frame of the standard library, site-packages, pytest or pluggy (no locals kept)."""
    source: list[tuple[Int, str]] = []
    locals: list[SnapshotVar] = []


class Snapshot(msgspec.Struct, kw_only=True, omit_defaults=True):
    exception: SnapshotException
    chain: list[SnapshotException] = []
    notes: list[str] = []
    """The exception's notes: hypothesis puts its falsifying example here."""
    assertion: str = ""
    """pytest's assertion introspection: the compared values and its explanation."""
    frames: list[SnapshotFrame] = []
    """Innermost (the raise point) first, down to the test function."""
    frames_dropped: Int = 0
    children: dict[str, list[SnapshotVar]] = {}
    """Children of expandable variables, by ``ref``."""


class FailureSnapshot(_Event, tag="failure_snapshot"):
    """A failed phase's exception and frames, taken while they were alive."""

    nodeid: str
    worker: str
    when: str
    snapshot: Snapshot


class HangFrame(msgspec.Struct, kw_only=True, omit_defaults=True):
    file: str
    line: Int
    function: str
    code: str = ""
    """The source line."""
    library: bool = False


class HangThread(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    ident: Int
    frames: list[HangFrame] = []
    """Innermost first."""
    test: bool = False
    """The thread running the test."""
    daemon: bool = False
    cpu: float | None = None
    """CPU seconds this thread used while the test ran (where the platform tells)."""


class HangTask(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An asyncio task of the loop the test thread runs, and where it waits."""

    name: str
    coro: str
    state: str
    awaiting: str = ""
    frames: list[HangFrame] = []


class HangReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Why a test (or a run) did not finish: the watchdog's diagnosis from the hung process itself."""

    kind: str
    """busy, polling, blocked, unknown, gil (a C call holding the GIL), killed or crashed."""
    summary: str
    """One line: "busy loop in lines 40-44 of retry_forever() (tests/test_x.py); 98% CPU"."""
    file: str = ""
    function: str = ""
    line: Int = 0
    lines: list[Int] = []
    call: str = ""
    wait_kind: str = ""
    since: float = 0.0
    timeout: float = 0.0
    elapsed: float = 0.0
    """Wall seconds from the start of the timed part of the test to the report."""
    cpu: float | None = None
    """CPU seconds the test's thread used in that time."""
    phase: str = ""
    samples: Int = 0
    interval: float = 0.0
    action: str = ""
    """What happened next: fail, pause, exit, or "" (recorded only)."""
    threads: list[HangThread] = []
    locals: list[SnapshotVar] = []
    locals_frame: str = ""
    """Whose locals: "retry_forever() at /abs/x.py:42"."""
    children: dict[str, list[SnapshotVar]] = {}
    tasks: list[HangTask] = []
    output: list[str] = []
    """The last lines the test wrote before the report."""
    source: list[tuple[Int, str]] = []


class HangDetected(_Event, tag="hang"):
    """A test ran past its timeout (or the run was killed, or crashed) and this is why."""

    nodeid: str
    worker: str
    when: str
    report: HangReport


class TestFinished(_Event, tag="test_finished"):
    """The test's final outcome after teardown, as pytest's summary counts it."""

    __test__ = False

    nodeid: str
    worker: str
    outcome: str
    """passed, failed, error, skipped, xfailed or xpassed."""
    duration: float
    message: str = ""
    passed_phases: list[PassedPhase] = []
    """Phases that passed (not xpassed) and so were not sent as `PhaseFinished`: a passing test
    costs two events, not five."""


class Held(_Event, tag="held"):
    """A failing test is held alive for an agent (``--mcp-debug-break``); it answers `Request` frames.

    Sent after the failure's `FailureSnapshot`, so the server has the snapshot when it learns of the hold.
    """

    session: str
    """The live session's id: ``<run id>-<worker>-<n>``."""
    nodeid: str
    worker: str
    when: str
    reason: str = "failure"
    timeout: float = 0.0
    """Seconds without a request after which the test resumes by itself."""


class Resumed(_Event, tag="resumed"):
    """A hold ended: ``reason`` is continue, close, timeout or disconnected."""

    session: str
    reason: str


class RunFinished(_Event, tag="run_finished"):
    exit_status: Int
    duration: float
    counts: dict[str, Int] = {}


class ProcessFinished(_Event, tag="process_finished"):
    """The last frame a process sends; a spool file ending with it is complete."""

    events: Int


Event = (
    RunStarted
    | ProcessStarted
    | CollectionFinished
    | CollectionError
    | TestStarted
    | PhaseFinished
    | FailureSnapshot
    | Output
    | TestFinished
    | Held
    | Resumed
    | HangDetected
    | RunFinished
    | ProcessFinished
)
ClientFrame = Hello | Event
ServerFrame = Welcome | Ack | Request

EVENT_TYPES: Final = tuple(t.__struct_config__.tag for t in Event.__args__)  # type: ignore[attr-defined]


class ProtocolError(ValueError):
    """A frame that cannot be accepted; the message says why."""


_encoder = msgspec.json.Encoder()
_client_decoder = msgspec.json.Decoder(ClientFrame)
_server_decoder = msgspec.json.Decoder(ServerFrame)


def encode(frame: _Frame) -> bytes:
    """One frame as one line of JSON (without the newline)."""
    return _encoder.encode(frame)


def encode_lines(frames: list[_Frame]) -> bytes:
    """Frames as newline-terminated JSON lines: the body of a message or a spool append."""
    buf = bytearray()
    for frame in frames:
        _encoder.encode_into(frame, buf, -1)
        buf += b"\n"
    return bytes(buf)


def decode_client_frame(line: bytes | str) -> Hello | Event:
    """Decode a frame sent by a test process, rejecting malformed or unknown frames with a reason."""
    try:
        frame: Hello | Event = _client_decoder.decode(line)
        return frame
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid frame: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed frame: {exc}") from None
    except RecursionError:
        raise ProtocolError("malformed frame: JSON nested too deeply") from None
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"malformed frame: not valid UTF-8 ({exc.reason})") from None


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


def decode_server_frame(line: bytes | str) -> Welcome | Ack | Request:
    try:
        frame: Welcome | Ack | Request = _server_decoder.decode(line)
        return frame
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise ProtocolError(f"invalid server frame: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid server frame: not decodable JSON") from None


_reply_decoder = msgspec.json.Decoder(Reply)
REPLY_PREFIX: Final = '{"type":"reply"'
"""How a reply message starts (msgspec writes the tag first): the server tells it from events by this."""


def decode_reply(message: bytes | str) -> Reply:
    try:
        reply: Reply = _reply_decoder.decode(message)
        return reply
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"invalid reply: {exc}") from None
    except (RecursionError, UnicodeEncodeError):
        raise ProtocolError("invalid reply: not decodable JSON") from None


_snapshot_decoder = msgspec.json.Decoder(Snapshot)


def encode_value(value: msgspec.Struct) -> str:
    return _encoder.encode(value).decode()


_hang_decoder = msgspec.json.Decoder(HangReport)


def decode_hang_report(text: str | bytes) -> HangReport:
    report: HangReport = _hang_decoder.decode(text)
    return report


def decode_snapshot(text: str | bytes) -> Snapshot:
    snapshot: Snapshot = _snapshot_decoder.decode(text)
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
