"""The events of a run where nothing fails, prints or hangs, encoded with the standard library.

`frames` defines every frame as a msgspec `Struct`: importing msgspec and defining them was a quarter of
what recording adds to a one-test run (callgrind: ~100M estimated cycles of extra work, ~73M without
them). The events of a quiet run are few and flat (its start, each process's, its code version, its
collection, each test's start and end, its finish), so they are written here, with ``json``, as JSON
lines the server reads exactly as it reads `codec.encode`'s (`tests/test_plain.py` checks that for any
values). The first other event (a failure's snapshot, a line of output, a hang) loads msgspec then; and
a run still going after a tick loads it at its next quiet pass, in the test thread, to encode quiet
passes' records (`msgspec_quick_line`: `quick_line`'s seven ``repr``s of floats cost a test ~75K
instructions more), which a one-test run never does.

The names of each event's fields are in `FIELDS`, checked against `frames` by the tests: msgspec
ignores a field it does not know, so a misspelt one would be lost without a word.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring as _string  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    Phases = Sequence[tuple[str, float, float]]
    QuickRecord = tuple[str, str, int, float, str, str, str, int | None, int, Phases]
    """A quiet pass's short record: run id, process, seq, ts, nodeid, worker, file, 0-based line,
    attempt, passed phases (`quick.QuickPass`'s fields)."""
    QuickLine = Callable[[QuickRecord], bytes]
    """`quick_line`'s signature."""

FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "run_started": (
        "args", "rootdir", "cwd", "python", "pytest_version", "plugin_version", "host", "pid", "label",
        "workers", "kind", "shard",
    ),
    "process_started": ("worker", "pid", "host"),
    "code_version": ("commit", "changes", "note", "shard", "environment", "ci", "machine"),
    "collection_finished": ("count",),
    "test_started": ("nodeid", "worker", "file", "line"),
    "phase_finished": ("nodeid", "worker", "when", "outcome", "duration", "message", "longrepr", "wasxfail"),
    "test_finished": (
        "nodeid", "worker", "outcome", "duration", "message", "passed_phases", "attempt", "file", "line",
    ),
    "run_finished": ("exit_status", "duration", "counts"),
    "process_finished": ("events",),
}  # fmt: skip
"""The events encoded here, by their wire ``type``, and the fields each may carry (besides the head
every event has: ``run_id``, ``process``, ``seq``, ``ts``)."""

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class Encoded:
    """An event already encoded here, as the sender queues it in place of a frame: its ``seq`` and its
    JSON line (an object, or a quiet pass's short record)."""

    __slots__ = ("line", "seq")

    def __init__(self, seq: int, line: bytes) -> None:
        self.seq = seq
        self.line = line


def event_line(tag: str, run_id: str, process: str, seq: int, ts: float, fields: dict[str, Any]) -> bytes:
    """The JSON line of the event ``tag`` (a key of `FIELDS`) with these fields. JSON has no NaN or
    infinity: a number that is neither is written as 0, as the frame's own check (`EventBase`) does."""
    frame = {"type": tag, "run_id": run_id, "process": process, "seq": seq, "ts": ts, **fields}
    try:
        text = _encode(frame)
    except ValueError:  # a NaN or an infinity somewhere
        text = _encode(_finite(frame))
    return text.encode("utf-8", "replace")  # "replace": a lone surrogate (an undecodable argument)


def quick_line(record: QuickRecord) -> bytes:
    """A quiet pass's short record (`quick.QuickPass`'s array) as `codec.encode_quick` writes it: what a
    passing test's end leaves in the write-ahead copy. ``line`` is 0-based, as pytest gives it."""
    run_id, process, seq, ts, nodeid, worker, file, line, attempt, passed = record
    phases = ",".join([f"[{_string(when)},{_number(took)},{_number(at)}]" for when, took, at in passed])
    where = "null" if line is None else line
    when = repr(float(ts)) if math.isfinite(ts) else "0.0"  # the record's ts may not be null
    return (
        f"[{_string(run_id)},{_string(process)},{seq},{when},{_string(nodeid)},{_string(worker)},"
        f"{_string(file)},{where},{attempt},[{phases}]]"
    ).encode("utf-8", "replace")


def msgspec_quick_line() -> QuickLine:
    """`quick_line` by msgspec's encoder, the same record at a fraction of the cost a test (`quick_line`
    formats seven floats with ``repr``, ~15 us a test in a run): for a process that has msgspec loaded,
    or a run long enough to repay its import (~7 ms). The encoder itself, no Python frame around it:
    the record's ts must be finite (the reporter's is `time.time`'s), as msgspec writes NaN as null;
    a phase's NaN becomes null, read back as 0, as `quick_line` writes it."""
    import msgspec

    encode: QuickLine = msgspec.json.Encoder().encode
    return encode


def _number(value: float) -> str:
    """A float as JSON: its shortest repr, or null for NaN and infinities (read back as 0)."""
    return repr(float(value)) if math.isfinite(value) else "null"


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity in it made 0.0."""
    if isinstance(value, float):
        return value if math.isfinite(value) else 0.0
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
