"""The wire protocol between a test process and `mcpdebug serve`.

A spool file and a text WebSocket message are newline-delimited JSON *frames*, one frame per line.
Every frame is an object whose ``type`` names one of the definitions in `frames`; anything else is
rejected with a reason. A live client streams events as binary messages in the packed form: one
msgpack array of the same frames, in which an `Output`'s lines are raw bytes (``data``), so output
is neither decoded nor escaped on its way (a binary message that starts like JSON is JSON lines, as
a replayed spool file or a protocol 1 client sends). It does no I/O and
imports nothing from pytest, so the server can depend on it and the plugin can import it cheaply.

Delivery is at-least-once and ingestion is idempotent: every event carries ``run_id``, ``process``
(unique per OS process within a run) and a per-process ``seq``. The server stores each
``(run_id, process, seq)`` once, so a spool replayed twice, or an event sent over the socket and also
spooled, stores nothing twice.

Handshake over WebSocket: the client connects with ``Authorization: Bearer <token>`` (checked before
the upgrade), sends a ``hello`` frame, and the server answers ``welcome`` or closes the connection
with a close code and a reason. After that the server sends ``ack`` frames naming the highest ``seq``
it has committed, so the client knows what it may forget.

Process sessions (`mcpdebug run`, `mcpdebug forward`, processes the server manages) speak the same
protocol: a `SessionStarted` event asks for a label and the server answers `Registered`; lines are
`Output` events outside any test; `ProcessStatus` events report the process's state; control comes
back as `Request` frames (restart, signal, stdin) answered by `Reply`.

The package is one I/O-free module split for reading: `frames` (the events), `control` (the frames
that run a connection: handshake, acks, requests and replies), `payloads` (what a failure snapshot and
a hang report carry), `trace`, `quick` (a quiet pass as a write-ahead copy holds it, never sent) and
`codec` (encoding and decoding). They load on first use of any of their names here: they import
msgspec and define every frame, most of what recording adds to a run's start, and a run whose events
are all `plain` ones (nothing fails, prints or hangs) never needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol.codec import (
        OUTPUT_OVERHEAD,
        REPLY_PREFIX,
        ProtocolError,
        Wire,
        clip,
        decode_client_frame,
        decode_hang_report,
        decode_packed_message,
        decode_quick,
        decode_reply,
        decode_server_frame,
        decode_snapshot,
        decode_spooled_line,
        encode,
        encode_lines,
        encode_quick,
        encode_value,
        event_line,
        hello_version,
        is_json,
        is_packed_message,
        json_forms,
        json_line,
        pack,
        packed_message,
        quick_event,
        split_lines,
        wire_size,
        wire_sizes,
    )
    from pytest_mcpdebug.protocol.control import (
        CLOSE_MALFORMED,
        CLOSE_POLICY,
        CLOSE_TOO_BIG,
        PROCESS_COMMANDS,
        PROCESS_SIGNALS,
        REQUEST_COMMANDS,
        Ack,
        ClientFrame,
        Hello,
        Registered,
        Reply,
        Request,
        ServerFrame,
        Welcome,
    )
    from pytest_mcpdebug.protocol.frames import (
        ACCEPTED_VERSIONS,
        EVENT_TYPES,
        HELLO_VERSION,
        MAX_MESSAGE_BYTES,
        MAX_TEXT_CHARS,
        PROCESS_STATES,
        PROTOCOL_VERSION,
        RUN_ID_PATTERN,
        SESSION_MODES,
        SHORT_RECORDS_VERSION,
        STREAMS,
        CodeVersion,
        CollectionError,
        CollectionFinished,
        CoverageRecorded,
        Event,
        EventBase,
        FailureSnapshot,
        Frame,
        HangDetected,
        Held,
        Localization,
        LocalizedLine,
        Output,
        PassedPhase,
        PhaseFinished,
        ProcessFinished,
        ProcessStarted,
        ProcessStatus,
        Resumed,
        RunFinished,
        RunStarted,
        SessionStarted,
        TestFinished,
        TestStarted,
        ValueTrace,
        is_run_id,
    )
    from pytest_mcpdebug.protocol.payloads import (
        DoctestExample,
        HangFrame,
        HangProcess,
        HangReport,
        HangTask,
        HangThread,
        Int,
        Snapshot,
        SnapshotException,
        SnapshotFrame,
        SnapshotVar,
    )
    from pytest_mcpdebug.protocol.quick import QuickPass
    from pytest_mcpdebug.protocol.trace import Trace, TraceStep

__all__ = [
    "ACCEPTED_VERSIONS",
    "CLOSE_MALFORMED",
    "CLOSE_POLICY",
    "CLOSE_TOO_BIG",
    "EVENT_TYPES",
    "HELLO_VERSION",
    "MAX_MESSAGE_BYTES",
    "MAX_TEXT_CHARS",
    "OUTPUT_OVERHEAD",
    "PROCESS_COMMANDS",
    "PROCESS_SIGNALS",
    "PROCESS_STATES",
    "PROTOCOL_VERSION",
    "REPLY_PREFIX",
    "REQUEST_COMMANDS",
    "RUN_ID_PATTERN",
    "SESSION_MODES",
    "SHORT_RECORDS_VERSION",
    "STREAMS",
    "Ack",
    "ClientFrame",
    "CodeVersion",
    "CollectionError",
    "CollectionFinished",
    "CoverageRecorded",
    "DoctestExample",
    "Event",
    "EventBase",
    "FailureSnapshot",
    "Frame",
    "HangDetected",
    "HangFrame",
    "HangProcess",
    "HangReport",
    "HangTask",
    "HangThread",
    "Held",
    "Hello",
    "Int",
    "Localization",
    "LocalizedLine",
    "Output",
    "PassedPhase",
    "PhaseFinished",
    "ProcessFinished",
    "ProcessStarted",
    "ProcessStatus",
    "ProtocolError",
    "QuickPass",
    "Registered",
    "Reply",
    "Request",
    "Resumed",
    "RunFinished",
    "RunStarted",
    "ServerFrame",
    "SessionStarted",
    "Snapshot",
    "SnapshotException",
    "SnapshotFrame",
    "SnapshotVar",
    "TestFinished",
    "TestStarted",
    "Trace",
    "TraceStep",
    "ValueTrace",
    "Welcome",
    "Wire",
    "clip",
    "decode_client_frame",
    "decode_hang_report",
    "decode_packed_message",
    "decode_quick",
    "decode_reply",
    "decode_server_frame",
    "decode_snapshot",
    "decode_spooled_line",
    "encode",
    "encode_lines",
    "encode_quick",
    "encode_value",
    "event_line",
    "hello_version",
    "is_json",
    "is_packed_message",
    "is_run_id",
    "json_forms",
    "json_line",
    "pack",
    "packed_message",
    "quick_event",
    "split_lines",
    "wire_size",
    "wire_sizes",
]


def __getattr__(name: str) -> Any:
    """A name of `__all__`: the first use of any loads the modules and keeps every name here, so later
    uses are plain attribute lookups."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import threading

    from pytest_mcpdebug.quiet_import import collector_paused, own_modules

    # As the recorder's own import (`quiet_import`): mid-run too (a first failure's snapshot), the
    # collector held off and, in pytest's thread, its assertion rewriting stepped around.
    main = threading.current_thread() is threading.main_thread()
    with own_modules() if main else collector_paused():
        from pytest_mcpdebug.protocol import codec, control, frames, payloads, quick, trace

    found: dict[str, Any] = {}
    # A name one of them imports from another is the same object in both.
    for module in (codec, control, frames, payloads, quick, trace):
        found.update((n, v) for n, v in vars(module).items() if n in __all__)
    globals().update(found)
    return found[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
