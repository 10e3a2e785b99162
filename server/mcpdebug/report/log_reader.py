"""Seed 000's log read back: followed as it grows (across rotations), grouped by session, calls paired.

Used by `mcpdebug tui`; no textual here, so it is tested on its own. A log copied from another
machine (a CI artifact) reads the same as the live one: it simply stops growing.

Any file reads without an exception: lines that are not JSON objects with a ``message`` are counted
and stepped over, fields of the wrong type are dropped (`_normal`), a torn last line waits for its
end, and a log written by several server starts (each numbers its calls from 1) pairs each answer
with its own call.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

# Limits
KEPT: Final = 50_000
"""Entries held in memory; the oldest go first."""
READ_BYTES: Final = 4 * 1024 * 1024
"""Read per look at the file, so a huge log is taken in over a few looks, the UI answering between."""
LINE_BYTES: Final = 4 * 1024 * 1024
"""A line longer than this with no newline in sight is no entry the server writes: it is dropped."""
PENDING: Final = 10_000
"""Calls waiting for their answer that are remembered; older ones (a server killed) are let go."""

KINDS: Final = {
    "tools": ("tool:call", "tool:response", "tool:error"),
    "states": ("debug:state", "session:created", "session:closed"),
    "breakpoints": ("debug:breakpoint",),
    "variables": ("debug:variables",),
    "output": ("debug:output",),
    "server": ("server:log",),
}
"""The filters of the UI, by the ``message`` field (the seed's parsing guideline 1)."""
_COMMON: Final = ("time", "level", "namespace", "message", "sessionId", "sessionName", "timestamp")


class LogFollower:
    """Complete new lines of a log file at each `read()`; starts over when the file is rotated.

    A rotation (the server's `RotatingFileHandler` renames the file to ``<name>.1`` and opens a new
    one) is noticed by the file's inode: what the old file got after the last look is read from
    ``<name>.1`` first, so no entry falls between the two files.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.bad_lines = 0
        self._partial = b""

    @property
    def unfinished(self) -> bool:
        """Whether the file ends in a line without its newline (being written, or torn)."""
        return bool(self._partial.strip())

    def read(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
        except OSError:
            return []
        out: list[dict[str, Any]] = []
        if stat.st_ino != self.inode or stat.st_size < self.offset:  # rotated, or replaced
            if stat.st_ino != self.inode and self.inode is not None:
                out = self._rest_of_rotated()
            self.inode, self.offset, self._partial = stat.st_ino, 0, b""
        if stat.st_size == self.offset:
            return out
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(READ_BYTES)
        except OSError:
            return out
        self.offset += len(data)
        return out + self._lines(data)

    def _lines(self, data: bytes) -> list[dict[str, Any]]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        if len(self._partial) > LINE_BYTES:
            self._partial = b""
            self.bad_lines += 1
        return self.parse(lines)

    def _rest_of_rotated(self) -> list[dict[str, Any]]:
        """The lines the old file got after the last look, if it is now ``<name>.1``."""
        old = self.path.with_name(self.path.name + ".1")
        try:
            if old.stat().st_ino != self.inode:
                return []
            with open(old, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(READ_BYTES)
        except OSError:
            return []
        return self._lines(data + b"\n")

    def parse(self, lines: Iterable[bytes]) -> list[dict[str, Any]]:
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
                self.bad_lines += 1
                continue
            if isinstance(entry, dict) and isinstance(entry.get("message"), str):
                out.append(_normal(entry))
            else:
                self.bad_lines += 1
        return out


def _normal(entry: dict[str, Any]) -> dict[str, Any]:
    """The fields the reader relies on, of the types it relies on; a field of another type is dropped
    (a number given as a session id is kept as text)."""
    stamp = entry.get("timestamp")
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool) or stamp != stamp:  # NaN too
        entry["timestamp"] = None
    session = entry.get("sessionId")
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        entry["sessionId"] = str(session)
    elif not isinstance(session, str) or not session:
        entry["sessionId"] = None
    for key in ("sessionName", "time", "tool", "level"):
        if not isinstance(entry.get(key), str):
            entry[key] = None
    call = entry.get("callId")
    if call is not None and (not isinstance(call, (int, str)) or isinstance(call, bool)):
        del entry["callId"]
    for key in [k for k in entry if k.startswith("_")]:  # the reader's marks: _row, _answer, _orphan
        del entry[key]
    return entry


@dataclass
class Session:
    id: str
    name: str = ""
    kind: str = ""
    state: str = ""
    started: float | None = None
    """Epoch milliseconds of its first entry."""
    last: float = 0
    entries: int = 0


@dataclass
class Timeline:
    """Every entry read so far as rows to show, the sessions they name, each call with its answer.

    A tool call is one row: its response or error is attached to it (``_answer``) when it comes,
    matched by ``callId`` within the session (the seed's correlation of calls and responses). Each
    row gets a serial number of its own (``_row``), unique however often ids repeat. A server
    numbers its calls from 1: a call whose number is not above the last one's starts another server's
    calls, and the calls still waiting are marked as never answered (``_orphan``).
    """

    rows: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT))
    sessions: dict[str, Session] = field(default_factory=dict)
    calls: dict[tuple[str | None, int | str], dict[str, Any]] = field(default_factory=dict)
    serial: int = 0
    starts: int = 0
    """Server starts seen (by their calls' numbers starting again)."""
    _last_call: int | None = None
    _last_stamp: float = 0

    def add(self, new: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Take in new entries; returns (new rows, rows changed: calls answered or let go)."""
        added: list[dict[str, Any]] = []
        changed: list[dict[str, Any]] = []
        for entry in sorted(new, key=self._when):  # the seed's guideline 2, file order among equals
            self._session(entry)
            message = entry["message"]
            if message in ("tool:response", "tool:error") and "callId" in entry:
                call = self.calls.pop((entry["sessionId"], entry["callId"]), None)
                if call is not None:
                    call["_answer"] = entry
                    changed.append(call)
                    continue
            if message == "tool:call" and "callId" in entry:
                self._new_call(entry, changed)
            self.serial += 1
            entry["_row"] = self.serial
            self.rows.append(entry)
            added.append(entry)
        return added, changed

    def _when(self, entry: dict[str, Any]) -> float:
        """An entry's time to sort on; one without a time sorts with the entry before it."""
        if entry["timestamp"] is not None:
            self._last_stamp = entry["timestamp"]
        return self._last_stamp

    def _new_call(self, entry: dict[str, Any], changed: list[dict[str, Any]]) -> None:
        number = entry["callId"]
        if isinstance(number, int):
            if self._last_call is not None and number <= self._last_call:  # another server start
                self.starts += 1
                for waiting in self.calls.values():
                    waiting["_orphan"] = "no answer: the server stopped or restarted"
                    changed.append(waiting)
                self.calls.clear()
            self._last_call = number
        key = (entry["sessionId"], number)
        replaced = self.calls.pop(key, None)
        if replaced is not None:
            replaced["_orphan"] = "no answer logged"
            changed.append(replaced)
        self.calls[key] = entry
        if len(self.calls) > PENDING:
            self.calls.pop(next(iter(self.calls)))

    def _session(self, entry: dict[str, Any]) -> None:
        sid = entry["sessionId"]
        if sid is None:
            return
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = Session(sid, started=entry["timestamp"])
        session.entries += 1
        session.last = entry["timestamp"] or session.last
        if entry["sessionName"]:
            session.name = entry["sessionName"]
        message = entry["message"]
        if message == "session:created":
            session.kind, session.state = _text(entry.get("kind")), "open"
        elif message == "session:closed":
            session.state = closed_text(entry)
        elif message == "debug:state":
            session.state = _text(entry.get("event"))
            if entry.get("reason"):
                session.state += f" ({_text(entry['reason'])})"


def matches(entry: dict[str, Any], session: str | None, kinds: set[str]) -> bool:
    if session is not None and entry["sessionId"] != session:
        return False
    return any(entry["message"] in KINDS[k] for k in kinds)


def time_of(entry: dict[str, Any]) -> str:
    """HH:MM:SS.mmm of the entry's ISO time (UTC, as logged)."""
    text = entry["time"] or ""
    return text[11:23] if len(text) >= 23 else text


def describe(entry: dict[str, Any]) -> str:
    """What an entry is about, on one line (a call with its answer when it has one); output and the
    server's messages keep their lines."""
    try:
        return _describe(entry)
    except Exception:  # a field of a shape no server writes: the entry as it is
        return _short({k: v for k, v in entry.items() if not k.startswith("_")}, 300)


def _describe(entry: dict[str, Any]) -> str:
    message = entry["message"]
    if message == "tool:call":
        request = entry.get("request") or {}
        args = ", ".join(f"{k}={_short(v)}" for k, v in request.items()) if isinstance(request, dict) else ""
        text = f"{entry['tool'] or '?'}({args})"
        answer = entry.get("_answer")
        if answer is None:
            return f"{text}  … {entry.get('_orphan') or 'waiting'}"
        took = _ms_text(answer.get("durationMs"))
        if answer["message"] == "tool:error":
            return f"{text}  ✗ {took}: {_short(answer.get('error'), 160)}"
        return f"{text}  ✓ {took}: {_short(answer.get('response'), 160)}"
    if message in ("tool:response", "tool:error"):  # its call was not in the log (rotated away)
        what = entry.get("response") if message == "tool:response" else entry.get("error")
        return f"{entry['tool'] or '?'} answered {_short(what, 160)}"
    if message == "debug:state":
        where = entry.get("location")
        at = ""
        if isinstance(where, dict) and where:
            file, line, function = (_text(where.get(k)) for k in ("file", "line", "function"))
            at = f" at {file}:{line} in {function}"
        reason = f" ({_text(entry['reason'])})" if entry.get("reason") else ""
        return f"{_text(entry.get('event'))}{reason}{at}"
    if message == "debug:breakpoint":
        return (
            f"breakpoint {_text(entry.get('breakpointId'))} {_text(entry.get('event'))} at "
            f"{_text(entry.get('file'))}:{_text(entry.get('line'))}"
            + ("" if entry.get("verified") else " (not verified)")
        )
    if message == "debug:variables":
        found = entry.get("variables")
        shown = ", ".join(
            f"{_text(v.get('name'))}={_text(v.get('value'))}" if isinstance(v, dict) else _short(v)
            for v in (found if isinstance(found, list) else [])
        )
        return f"{_text(entry.get('scope'))} ({_text(entry.get('variableCount'))}): {shown}"
    if message == "session:created":
        kind = _text(entry.get("kind")) or "session"
        return f"{kind} created: {entry['sessionName'] or entry['sessionId']}"
    if message == "session:closed":
        return closed_text(entry, with_duration=True)
    if message == "debug:output":
        return f"[{_text(entry.get('category'))}] {_text(entry.get('output')).rstrip()}"
    return _text(entry.get("text")) or message


def closed_text(entry: dict[str, Any], *, with_duration: bool = False) -> str:
    """``closed (finished) after 6.2 s: exit status 1; 1 failed, 1 error, 3 passed``: a run's
    session closes with its exit status and its tests' outcomes."""
    from mcpdebug.views.runs import counts_text

    text = f"closed ({_text(entry.get('reason')) or 'ended'})"
    duration = entry.get("duration")
    if with_duration and isinstance(duration, (int, float)):
        text += f" after {duration / 1000:.1f} s"
    parts = []
    for key in ("exitStatus", "exitCode"):
        if isinstance(entry.get(key), int):
            parts.append(f"exit status {entry[key]}")
    counts = entry.get("counts")
    if isinstance(counts, dict) and counts:
        parts.append(counts_text({str(k): v for k, v in counts.items() if isinstance(v, int)}))
    return text + (": " + "; ".join(parts) if parts else "")


def detail(entry: dict[str, Any], session_name: str = "") -> str:
    """Everything an entry holds, for a person to read: what it is, then each field in full (a
    call's request and its answer)."""
    who = entry["sessionId"]
    namespace = _text(entry.get("namespace"))
    lines = [
        f"{entry['message']} at {entry['time'] or '?'} ({entry['level'] or '?'}, {namespace})",
        f"Session: {session_name or entry['sessionName'] or who} ({who})" if who else "Session: none",
        "",
        describe(entry),
    ]
    fields = {k: v for k, v in entry.items() if k not in _COMMON and not k.startswith("_")}
    if fields:
        lines += ["", "Fields:", *_pretty(fields)]
    answer = entry.get("_answer")
    if isinstance(answer, dict):
        took = _ms_text(answer.get("durationMs"))
        lines += [
            "",
            f"Answer: {answer['message']} at {answer['time'] or '?'} after {took}",
            *_pretty({k: v for k, v in answer.items() if k not in _COMMON and not k.startswith("_")}),
        ]
    elif entry.get("_orphan"):
        lines += ["", f"Answer: {entry['_orphan']}"]
    return "\n".join(lines)


def _pretty(fields: dict[str, Any]) -> list[str]:
    """The fields as JSON, but a text of several lines (a report's ``text``) as its lines below."""
    texts: list[tuple[str, str]] = []

    def lift(value: Any, path: str, depth: int) -> Any:
        if isinstance(value, str) and "\n" in value:
            texts.append((path, value))
            return f"(its {value.count(chr(10)) + 1} lines below)"
        if isinstance(value, dict) and depth < 4:
            return {k: lift(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items()}
        return value

    lines = [json.dumps(lift(fields, "", 0), indent=2, ensure_ascii=False, default=str)]
    for path, text in texts:
        lines += ["", f"{path}:", text]
    return lines


def _ms_text(value: Any) -> str:
    return f"{value:.1f} ms" if isinstance(value, (int, float)) and not isinstance(value, bool) else "? ms"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_log(directory: Path) -> Path:
    from mcpdebug.report.server_log import log_path

    return log_path(directory)


def size_text(path: Path) -> str:
    try:
        return f"{os.path.getsize(path) / 1024:.0f} KB"
    except OSError:
        return "not written yet"
