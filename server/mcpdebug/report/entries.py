"""What goes in seed 000's log: one function per entry type, called where the thing happens.

Each function checks its logger's level first and then hands a record with the raw fields to the
log's queue (`server_log`); cleaning and JSON happen in the writer thread. Without an open log
(`mcpdebug serve` opens it) a call costs one level check.

Sessions are whatever an agent talks about by id: a recorded run (its run id), a test held at its
failure or hang, a debug session, a process session. ``session:created`` remembers a session's name
and start, so later entries (a tool call naming only the id) carry the name and ``session:closed``
its duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Final

from mcpdebug.report import log_values
from pytest_mcpdebug.redaction import REDACTED, is_secret_expression

TOOLS: Final = logging.getLogger("debug-mcp.tools")
STATE: Final = logging.getLogger("debug-mcp.state")
BREAKPOINT: Final = logging.getLogger("debug-mcp.breakpoint")
VARIABLES: Final = logging.getLogger("debug-mcp.variables")
SESSION: Final = logging.getLogger("debug-mcp.session")
OUTPUT: Final = logging.getLogger("debug-mcp.output")
# Until `server_log.open_log` attaches the file, entries cost one level check and go nowhere: not to
# the root logger either, where the MCP SDK puts a console handler (an in-memory server, a test or a
# benchmark would otherwise print every tool call).
logging.getLogger("debug-mcp").setLevel(logging.CRITICAL + 10)
logging.getLogger("debug-mcp").propagate = False

TYPES: Final = (
    "tool:call",
    "tool:response",
    "tool:error",
    "debug:state",
    "debug:breakpoint",
    "debug:variables",
    "session:created",
    "session:closed",
    "debug:output",
)
# Limits
SESSIONS_KEPT: Final = 10_000


class _Known:
    """Sessions seen created (name, start) and closed; bounded, safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._closed: OrderedDict[str, None] = OrderedDict()

    def created(self, session_id: str, name: str, started: float) -> bool:
        with self._lock:
            if session_id in self._open or session_id in self._closed:
                return False
            self._open[session_id] = (name, started)
            if len(self._open) > SESSIONS_KEPT:
                self._open.popitem(last=False)
            return True

    def closed(self, session_id: str) -> tuple[str, float] | bool | None:
        """(name, started) of a session closing now; False if it was closed already."""
        with self._lock:
            if session_id in self._closed:
                return False
            self._closed[session_id] = None
            if len(self._closed) > SESSIONS_KEPT:
                self._closed.popitem(last=False)
            return self._open.pop(session_id, None)

    def name(self, session_id: str) -> str | None:
        known = self._open.get(session_id)
        return known[0] if known is not None else None

    def clear(self) -> None:
        with self._lock:
            self._open.clear()
            self._closed.clear()


known = _Known()


def _emit(logger: logging.Logger, level: int, message: str, fields: dict[str, Any]) -> None:
    if "sessionName" not in fields:
        session = fields.get("sessionId")
        fields = {"sessionId": session, "sessionName": known.name(session) if session else None, **fields}
    logger.log(level, message, extra={"entry": fields})


def session_of(arguments: dict[str, Any]) -> str | None:
    """The session a tool call is about: its ``session_id``, else its ``run_id``."""
    for key in ("session_id", "run_id"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# Tools ------------------------------------------------------------------------------------------------


def tool_call(call: int, tool: str, arguments: dict[str, Any]) -> None:
    if TOOLS.isEnabledFor(logging.INFO):
        session = session_of(arguments)
        fields = {"sessionId": session, "sessionName": known.name(session) if session else None}
        _emit(
            TOOLS, logging.INFO, "tool:call", {**fields, "tool": tool, "callId": call, "request": arguments}
        )


def tool_response(call: int, tool: str, arguments: dict[str, Any], response: Any, seconds: float) -> None:
    if TOOLS.isEnabledFor(logging.INFO):
        expression = arguments.get("expression")
        if isinstance(expression, str) and is_secret_expression(expression):
            response = REDACTED  # evaluate_expression("API_TOKEN"): its value is the secret
        session = session_of(arguments)
        fields = {"sessionId": session, "sessionName": known.name(session) if session else None}
        _emit(
            TOOLS,
            logging.INFO,
            "tool:response",
            {
                **fields,
                "tool": tool,
                "callId": call,
                "success": True,
                "durationMs": round(seconds * 1000, 3),
                "response": response,
            },
        )


def tool_error(call: int, tool: str, arguments: dict[str, Any], error: str, seconds: float) -> None:
    if TOOLS.isEnabledFor(logging.ERROR):
        session = session_of(arguments)
        fields = {"sessionId": session, "sessionName": known.name(session) if session else None}
        _emit(
            TOOLS,
            logging.ERROR,
            "tool:error",
            {
                **fields,
                "tool": tool,
                "callId": call,
                "success": False,
                "durationMs": round(seconds * 1000, 3),
                "error": error,
            },
        )


# Sessions and their states ------------------------------------------------------------------------


def session_created(
    session_id: str, name: str, kind: str, *, started: float | None = None, **fields: Any
) -> None:
    """``kind``: run, held, debug or process. Logged once per session, whoever notices it first."""
    if known.created(session_id, name, started or time.time()) and SESSION.isEnabledFor(logging.INFO):
        entry = {"sessionId": session_id, "sessionName": name, "kind": kind, "language": "python", **fields}
        _emit(SESSION, logging.INFO, "session:created", entry)


def session_closed(session_id: str, reason: str, *, ended: float | None = None, **fields: Any) -> None:
    opened = known.closed(session_id)
    if opened is False or not SESSION.isEnabledFor(logging.INFO):
        return
    name, started = opened if isinstance(opened, tuple) else (None, None)
    duration = None if started is None else max(0, round(((ended or time.time()) - started) * 1000))
    entry = {"sessionId": session_id, "sessionName": name, "duration": duration, "reason": reason, **fields}
    _emit(SESSION, logging.INFO, "session:closed", entry)


def debug_state(
    session_id: str,
    event: str,
    *,
    reason: str | None = None,
    location: dict[str, Any] | None = None,
    thread_id: int | None = None,
    **fields: Any,
) -> None:
    """``event``: paused (reason breakpoint, step, entry, exception, pause, failure, hang), running or
    stopped."""
    if STATE.isEnabledFor(logging.INFO):
        entry: dict[str, Any] = {"sessionId": session_id, "event": event, "reason": reason}
        if location is not None:
            entry["location"] = location
        entry["threadId"] = thread_id
        _emit(STATE, logging.INFO, "debug:state", {**entry, **fields})


def debug_breakpoint(
    session_id: str, event: str, breakpoint_id: str, file: str, line: int, verified: bool, **fields: Any
) -> None:
    """``event``: set, verified (``verified`` says whether debugpy bound it) or hit."""
    if BREAKPOINT.isEnabledFor(logging.INFO):
        entry = {
            "sessionId": session_id,
            "event": event,
            "breakpointId": breakpoint_id,
            "file": file,
            "line": line,
            "verified": verified,
            **fields,
        }
        _emit(BREAKPOINT, logging.INFO, "debug:breakpoint", entry)


def debug_variables(
    session_id: str,
    *,
    frame_id: int | None,
    scope: str,
    reference: int | None,
    variables: list[dict[str, Any]],
) -> None:
    if VARIABLES.isEnabledFor(logging.INFO):
        shown = [
            {"name": v.get("name"), "type": v.get("type"), "value": v.get("value")}
            for v in variables[: log_values.VARIABLES]
            if isinstance(v, dict)
        ]
        entry = {
            "sessionId": session_id,
            "frameId": frame_id,
            "scope": scope,
            "variablesReference": reference,
            "variableCount": len(variables),
            "variables": log_values.Rows(shown),
        }
        _emit(VARIABLES, logging.INFO, "debug:variables", entry)


def debug_output(session_id: str, category: str, output: str, *, level: int = logging.INFO) -> None:
    """What the debugged program wrote (``category``: stdout, stderr, log); a run's or a process
    session's lines are ``debug`` level: many, and readable in full with get_output."""
    if OUTPUT.isEnabledFor(level) and output:
        entry = {"sessionId": session_id, "category": category, "output": output}
        _emit(OUTPUT, level, "debug:output", entry)
