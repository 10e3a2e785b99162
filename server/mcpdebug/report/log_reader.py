"""Seed 000's log read back: followed as it grows (across rotations), grouped by session, calls paired.

Used by `mcpdebug tui` (`log_text` says what an entry is about); no textual here, so it is tested on
its own. A log copied from another
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

from mcpdebug.report.log_text import closed_text, text_of

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
            session.kind, session.state = text_of(entry.get("kind")), "open"
        elif message == "session:closed":
            session.state = closed_text(entry)
        elif message == "debug:state":
            session.state = text_of(entry.get("event"))
            if entry.get("reason"):
                session.state += f" ({text_of(entry['reason'])})"


def matches(entry: dict[str, Any], session: str | None, kinds: set[str]) -> bool:
    if session is not None and entry["sessionId"] != session:
        return False
    return any(entry["message"] in KINDS[k] for k in kinds)


def default_log(directory: Path) -> Path:
    from mcpdebug.report.server_log import log_path

    return log_path(directory)


def size_text(path: Path) -> str:
    try:
        return f"{os.path.getsize(path) / 1024:.0f} KB"
    except OSError:
        return "not written yet"
