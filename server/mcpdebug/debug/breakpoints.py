"""A debug session's breakpoints: ours to name and keep, debugpy's to bind.

Each breakpoint has a stable id (``bp1``, ``bp2``, ...) and keeps it while it is toggled, however
often debugpy re-binds it: DAP's ``setBreakpoints`` replaces all of a file's breakpoints at once and
numbers them anew each time, so the session sends a file's enabled breakpoints in one request and
maps debugpy's answer back by position (`Breakpoints.bound`).

A condition, hit condition or log message that is not valid Python is refused here, before it
reaches debugpy (which would report the error at every hit): the breakpoint is kept, unverified,
with ``condition_error`` saying what is wrong, so the agent can fix it with set_breakpoint on the
same line.
"""

from __future__ import annotations

import itertools
import linecache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcpdebug.report import entries
from mcpdebug.views.lookup import quoted
from pytest_mcpdebug.debug import logpoints
from pytest_mcpdebug.redaction import redact

SURROUNDING: Final = 2
"""Lines shown before and after a breakpoint's line in set_breakpoint's reply."""
PENDING: Final = "pending: bound when the debugged process starts"
INVALID: Final = "not set in debugpy: fix the error and call set_breakpoint again on this line"


class BreakpointError(LookupError):
    """A breakpoint that cannot be set or found; the message says what exists and what to do."""


@dataclass
class Breakpoint:
    id: str
    file: str
    """Absolute path."""
    line: int
    """The line asked for; `bound_line` is where debugpy put it."""
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None
    enabled: bool = True
    verified: bool = False
    bound_line: int | None = None
    message: str = PENDING
    condition_error: str | None = None
    hits: int = 0

    @property
    def valid(self) -> bool:
        return self.condition_error is None

    def dap(self) -> dict[str, Any]:
        """This breakpoint in a ``setBreakpoints`` request."""
        source: dict[str, Any] = {"line": self.line}
        if self.condition:
            source["condition"] = self.condition
        if self.hit_condition:
            source["hitCondition"] = self.hit_condition
        if self.log_message:  # named, so the server counts its hits (`logpoints`)
            source["logMessage"] = logpoints.marked(self.id, self.log_message)
        return source

    def where(self) -> str:
        return f"{self.file}:{self.bound_line or self.line}"


@dataclass
class Breakpoints:
    root: Path
    """Relative paths are resolved against this folder (the project's)."""
    _items: dict[str, Breakpoint] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    session: str = ""
    """The debug session's id, for seed 000's debug:breakpoint entries."""

    def add(
        self,
        file: str,
        line: int,
        condition: str | None = None,
        hit_condition: str | None = None,
        log_message: str | None = None,
    ) -> tuple[Breakpoint, bool]:
        """A new breakpoint, or the one already asked for on that line, updated (True)."""
        path = resolve(self.root, file)
        lines = source_lines(path)
        if not 1 <= line <= len(lines):
            raise BreakpointError(
                f"{path} has lines 1-{len(lines)}; line {line} is outside them. get_source_context shows "
                "the file's lines."
            )
        existing = next((b for b in self._items.values() if b.file == str(path) and b.line == line), None)
        bp = existing or Breakpoint(id=f"bp{next(self._ids)}", file=str(path), line=line)
        bp.condition, bp.hit_condition = condition or None, hit_condition or None
        bp.log_message = log_message or None
        bp.enabled = True  # setting a breakpoint asks for it to be on
        bp.condition_error = check(bp)
        bp.verified, bp.bound_line = False, None  # until debugpy binds it as it is now
        bp.message = INVALID if bp.condition_error else PENDING
        self._items[bp.id] = bp
        entries.debug_breakpoint(self.session, "set", bp.id, bp.file, line, False, condition=bp.condition)
        return bp, existing is not None

    def get(self, breakpoint_id: str) -> Breakpoint:
        found = self._items.get(breakpoint_id)
        if found is None:
            known = ", ".join(f"{b.id} ({b.where()})" for b in self._items.values()) or "none"
            raise BreakpointError(
                f"No breakpoint {quoted(breakpoint_id)} in this session. Its breakpoints: {known}; "
                "list_breakpoints lists them, set_breakpoint adds one."
            )
        return found

    def remove(self, breakpoint_id: str) -> Breakpoint:
        return self._items.pop(self.get(breakpoint_id).id)

    def all(self) -> list[Breakpoint]:
        return list(self._items.values())

    def in_file(self, path: str) -> list[Breakpoint]:
        return [b for b in self._items.values() if b.file == path]

    def files(self) -> list[str]:
        return list(dict.fromkeys(b.file for b in self._items.values()))

    def to_send(self, path: str) -> list[Breakpoint]:
        """The file's breakpoints debugpy should have: enabled and valid."""
        return [b for b in self.in_file(path) if b.enabled and b.valid]

    def bound(self, sent: list[Breakpoint], results: list[dict[str, Any]], path: str) -> dict[int, str]:
        """Take debugpy's answer to a file's ``setBreakpoints``; returns its ids -> ours."""
        ids: dict[int, str] = {}
        for bp, result in zip(sent, results, strict=False):
            self.update(bp, result)
            if isinstance(result.get("id"), int):
                ids[result["id"]] = bp.id
        for bp in self.in_file(path):
            if not bp.enabled:
                bp.verified, bp.message = False, "disabled: toggle_breakpoint(enabled=True) turns it back on"
        return ids

    @staticmethod
    def update(bp: Breakpoint, result: dict[str, Any]) -> None:
        bp.verified = bool(result.get("verified"))
        line = result.get("line")
        bp.bound_line = line if isinstance(line, int) else bp.bound_line
        bp.message = str(result.get("message") or ("bound" if bp.verified else "not verified by debugpy"))

    def at(self, file: str, line: int) -> Breakpoint | None:
        """The enabled breakpoint a stop at file:line is at, if any."""
        for bp in self._items.values():
            if bp.enabled and bp.file == file and (bp.bound_line or bp.line) == line:
                return bp
        return None


def resolve(root: Path, file: str) -> Path:
    path = Path(file).expanduser()
    path = (path if path.is_absolute() else root / path).resolve()
    if not path.is_file():
        raise BreakpointError(
            f"File not found: {path}"
            + ("" if Path(file).is_absolute() else f" (relative paths are resolved against {root})")
        )
    return path


def source_lines(path: Path) -> list[str]:
    linecache.checkcache(str(path))
    lines = linecache.getlines(str(path))
    if not lines:
        try:
            lines = path.read_text(errors="replace").splitlines(keepends=True)
        except OSError as exc:
            raise BreakpointError(f"Cannot read {path}: {exc.strerror}.") from None
    return [line.rstrip("\r\n") for line in lines]


def context(file: str, line: int, around: int = SURROUNDING) -> dict[str, Any]:
    """Seed 002's ``context``: the line and a few around it, as the file is on disk now."""
    try:
        lines = source_lines(Path(file))
    except BreakpointError:
        return {"lineContent": "", "surrounding": []}
    first, last = max(line - around, 1), min(line + around, len(lines))
    return {
        "lineContent": redact(lines[line - 1], code=True) if 1 <= line <= len(lines) else "",
        "surrounding": [
            {"line": n, "content": redact(lines[n - 1], code=True)} for n in range(first, last + 1)
        ],
    }


def check(bp: Breakpoint) -> str | None:
    """Why the breakpoint's condition, hit condition or log message is not valid, or None."""
    if bp.condition:
        error = _compile_error(bp.condition)
        if error:
            return f"condition {bp.condition!r}: {error}"
    if bp.hit_condition and _compile_error(hit_expression(bp.hit_condition).replace("@HIT@", "0")):
        return (
            f"hit_condition {bp.hit_condition!r} is not a hit count: use a number (5: the 5th hit), a "
            "comparison (>= 3, > 2, == 5, < 10) or a modulo (% 2: every 2nd hit)"
        )
    if bp.log_message and logpoints.MARK in bp.log_message:
        return "log_message: it has a control character (\\x1f): leave it out"
    if bp.log_message:
        try:
            parts = log_expressions(bp.log_message)
        except ValueError as exc:
            return f"log_message: {exc}"
        for part in parts:
            error = _compile_error(part)
            if error:
                return f"log_message: {{{part}}}: {error}"
    return None


def hit_expression(hit_condition: str) -> str:
    """debugpy's reading of a hit condition (its ``_get_hit_condition_expression``)."""
    expr = hit_condition.strip()
    if expr.isdigit():
        return f"@HIT@ == {expr}"
    if expr.startswith("%"):
        return f"@HIT@ {expr} == 0"
    if expr.startswith(("==", ">", "<")):
        return f"@HIT@ {expr}"
    return expr


def log_expressions(message: str) -> list[str]:
    """The ``{expression}`` parts of a log message; ValueError for unbalanced braces."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(message):
        if char == "{":
            if depth == 0:
                start = i + 1
            depth += 1
        elif char == "}":
            if depth == 0:
                raise ValueError(f"unbalanced '}}' at character {i + 1}: write {{expression}} to log a value")
            depth -= 1
            if depth == 0:
                parts.append(message[start:i])
    if depth:
        raise ValueError("unbalanced '{': write {expression} to log a value")
    return parts


def _compile_error(expression: str) -> str | None:
    try:
        compile(expression, "<condition>", "eval")
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg}" + (f" at column {exc.offset}" if exc.offset else "")
    except ValueError as exc:
        return f"invalid: {exc}"
    return None


def log_breakpoint(session_id: str, event: str, bp: Breakpoint, **fields: Any) -> None:
    """Seed 000's debug:breakpoint entry for ``bp`` (verified, hit), where debugpy put it."""
    line = bp.bound_line or bp.line
    entries.debug_breakpoint(
        session_id, event, bp.id, bp.file, line, bp.verified, detail=bp.message, **fields
    )
