"""Seed 000's log read back: followed as it grows (across rotations), grouped by session, calls paired.

Used by `mcpdebug tui`; no textual here, so it is tested on its own. A log copied from another
machine (a CI artifact) reads the same as the live one: it simply stops growing.
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
    """Complete new lines of a log file at each `read()`; starts over when the file is rotated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.bad_lines = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
        except OSError:
            return []
        if stat.st_ino != self.inode or stat.st_size < self.offset:  # rotated, or replaced
            self.inode, self.offset, self._partial = stat.st_ino, 0, b""
        if stat.st_size == self.offset:
            return []
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(READ_BYTES)
        except OSError:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        return self.parse(lines)

    def parse(self, lines: Iterable[bytes]) -> list[dict[str, Any]]:
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if isinstance(entry, dict) and isinstance(entry.get("message"), str):
                out.append(entry)
            else:
                self.bad_lines += 1
        return out


@dataclass
class Session:
    id: str
    name: str = ""
    kind: str = ""
    state: str = ""
    started: int | None = None
    """Epoch milliseconds of its first entry."""
    last: int = 0
    entries: int = 0


@dataclass
class Timeline:
    """Every entry read so far as rows to show, the sessions they name, each call with its answer.

    A tool call is one row: its response or error is attached to it (``answer``) when it comes,
    matched by ``callId`` within the session (the seed's correlation of calls and responses).
    """

    rows: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT))
    sessions: dict[str, Session] = field(default_factory=dict)
    calls: dict[tuple[str | None, int], dict[str, Any]] = field(default_factory=dict)

    def add(self, new: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Take in new entries; returns (new rows, rows changed: calls that got their answer)."""
        added: list[dict[str, Any]] = []
        answered: list[dict[str, Any]] = []
        for entry in sorted(new, key=lambda e: e.get("timestamp") or 0):  # the seed's guideline 2
            self._session(entry)
            message = entry["message"]
            if message in ("tool:response", "tool:error") and "callId" in entry:
                call = self.calls.pop((entry.get("sessionId"), entry["callId"]), None)
                if call is not None:
                    call["answer"] = entry
                    answered.append(call)
                    continue
            if message == "tool:call" and "callId" in entry:
                self.calls[(entry.get("sessionId"), entry["callId"])] = entry
                if len(self.calls) > 10_000:  # calls never answered (a server killed) are let go
                    self.calls.pop(next(iter(self.calls)))
            self.rows.append(entry)
            added.append(entry)
        return added, answered

    def _session(self, entry: dict[str, Any]) -> None:
        sid = entry.get("sessionId")
        if not isinstance(sid, str) or not sid:
            return
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = Session(sid, started=entry.get("timestamp"))
        session.entries += 1
        session.last = entry.get("timestamp") or session.last
        if entry.get("sessionName"):
            session.name = str(entry["sessionName"])
        message = entry["message"]
        if message == "session:created":
            session.kind, session.state = str(entry.get("kind") or ""), "open"
        elif message == "session:closed":
            session.state = f"closed ({entry.get('reason') or 'ended'})"
        elif message == "debug:state":
            session.state = str(entry.get("event") or "")
            if entry.get("reason"):
                session.state += f" ({entry['reason']})"


def matches(entry: dict[str, Any], session: str | None, kinds: set[str]) -> bool:
    if session is not None and entry.get("sessionId") != session:
        return False
    return any(entry["message"] in KINDS[k] for k in kinds)


def time_of(entry: dict[str, Any]) -> str:
    """HH:MM:SS.mmm of the entry's ISO time (UTC, as logged)."""
    text = str(entry.get("time") or "")
    return text[11:23] if len(text) >= 23 else text


def describe(entry: dict[str, Any]) -> str:
    """One line saying what an entry is about (a call with its answer when it has one)."""
    message = entry["message"]
    if message == "tool:call":
        request = entry.get("request") or {}
        args = ", ".join(f"{k}={_short(v)}" for k, v in request.items()) if isinstance(request, dict) else ""
        text = f"{entry.get('tool')}({args})"
        answer = entry.get("answer")
        if answer is None:
            return text + "  … waiting"
        took = f"{answer.get('durationMs', 0):.1f} ms"
        if answer["message"] == "tool:error":
            return f"{text}  ✗ {took}: {_short(answer.get('error'), 160)}"
        return f"{text}  ✓ {took}: {_short(answer.get('response'), 160)}"
    if message in ("tool:response", "tool:error"):  # its call was not in the log (rotated away)
        what = entry.get("response") if message == "tool:response" else entry.get("error")
        return f"{entry.get('tool')} answered {_short(what, 160)}"
    if message == "debug:state":
        where = entry.get("location") or {}
        at = f" at {where.get('file')}:{where.get('line')} in {where.get('function')}" if where else ""
        reason = f" ({entry['reason']})" if entry.get("reason") else ""
        return f"{entry.get('event')}{reason}{at}"
    if message == "debug:breakpoint":
        return (
            f"breakpoint {entry.get('breakpointId')} {entry.get('event')} at {entry.get('file')}:"
            f"{entry.get('line')}" + ("" if entry.get("verified") else " (not verified)")
        )
    if message == "debug:variables":
        shown = ", ".join(f"{v.get('name')}={v.get('value')}" for v in entry.get("variables") or [])
        return f"{entry.get('scope')} ({entry.get('variableCount')}): {shown}"
    if message == "session:created":
        return f"{entry.get('kind') or 'session'} created: {entry.get('sessionName')}"
    if message == "session:closed":
        duration = entry.get("duration")
        took = f" after {duration / 1000:.1f} s" if isinstance(duration, (int, float)) else ""
        return f"closed ({entry.get('reason') or 'ended'}){took}"
    if message == "debug:output":
        return f"[{entry.get('category')}] {str(entry.get('output') or '').rstrip()}"
    return str(entry.get("text") or entry.get("message"))


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
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
