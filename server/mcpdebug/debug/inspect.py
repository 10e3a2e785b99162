"""A paused debuggee, read through DAP, in the shapes of the held-failure sessions' answers.

`answer` serves the live session commands (stack, scopes, variables, locals, evaluate, files) for
get_stack_trace, get_scopes, get_variables, get_local_variables, evaluate_expression and
get_source_context, so those tools take a debug session's id unchanged. Frame ids are the frame's
index in the stop's stack (0 = innermost, where it stopped), as for a held failure; debugpy's own
frame ids and variablesReferences stay valid until the debuggee resumes.

Values are bounded and redacted as everywhere else (`pytest_mcpdebug.values`): 200 characters for a
variable, 4,000 for an evaluated result, secrets never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from mcpdebug.debug import DebugError
from mcpdebug.debug.dap import DapError
from mcpdebug.debug.stops import Paused, Stop
from pytest_mcpdebug.redaction import REDACTED, hidden, is_secret_expression, is_secret_name, redact
from pytest_mcpdebug.values import is_library

# Limits
VALUE_CHARS: Final = 200
RESULT_CHARS: Final = 4_000
MAX_VARIABLES: Final = 500
MAX_FRAMES: Final = 100
STOP_LOCALS: Final = 20
"""Locals shown in a stop's reply (get_local_variables shows them all)."""
_REVEALS_NOTHING: Final = frozenset({"None", "True", "False", "''", '""', "[]", "{}", "()", "set()"})
"""debugpy's text of values shown even under a secret's name (`pytest_mcpdebug.redaction.reveals_nothing`)."""
GROUPS: Final = ("special variables", "function variables", "class variables", "protected variables")
"""debugpy's groupings of a frame's names: shown only with include_special."""


async def capture(session: Paused, stop: Stop) -> None:
    """Read what a stop's reply shows: the stack, the top frame's locals, the exception, the watches."""
    dap = session.dap
    assert dap is not None
    body = await dap.request("stackTrace", {"threadId": stop.thread, "startFrame": 0, "levels": MAX_FRAMES})
    stop.frames = [_frame(i, f) for i, f in enumerate(body.get("stackFrames", []))]
    top = stop.frames[0] if stop.frames else None
    exception = dap.send("exceptionInfo", {"threadId": stop.thread}) if stop.reason == "exception" else None
    if top is not None:
        stop.changes = session.watches.record(await watch_values(session, top), stop.number)
    if exception is not None:
        with contextlib.suppress(DapError):
            info = await exception
            stop.exception = {
                "type": str(info.get("exceptionId", "")).split("  ")[0].strip(),
                "message": str(info.get("description", "")),
            }
    if top is not None:
        try:
            stop.locals = (await _locals(session, top, include_special=False))[:STOP_LOCALS]
        except DebugError:
            stop.locals = []
        if stop.reason == "breakpoint":
            stop.breakpoint = session.breakpoints.at(top["file"], top["line"])
            if stop.breakpoint is not None:
                stop.breakpoint.hits += 1


async def watch_values(session: Paused, frame: dict[str, Any]) -> dict[str, str]:
    """Every watch's text in ``frame`` (its value, or the error its evaluation raised)."""
    assert session.dap is not None
    watches = session.watches.all()
    requests = [
        session.dap.send(
            "evaluate", {"expression": w.expression, "frameId": frame["dap"], "context": "watch"}
        )
        for w in watches
    ]
    results = await asyncio.gather(*requests, return_exceptions=True)
    return {w.id: _watch_value(w.expression, r) for w, r in zip(watches, results, strict=False)}


async def answer(session: Paused, command: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if command == "files":
        return _files(session)
    doing = {
        "stack": "get the stack trace",
        "scopes": "get scopes",
        "variables": "get variables",
        "locals": "get local variables",
        "evaluate": "evaluate expressions",
    }.get(command)
    if doing is None:
        raise DebugError(f"A debug session does not answer {command!r}.")
    stop = await session.current_stop(doing)
    try:
        if command == "stack":
            return _stack(stop, bool(arguments.get("include_library", False)))
        frame = _pick(stop, arguments.get("frame_id"))
        if command == "scopes":
            return await _scopes(session, frame)
        if command == "variables":
            return await _variables(session, int(arguments["variables_reference"]))
        if command == "locals":
            variables = await _locals(session, frame, include_special=bool(arguments.get("include_special")))
            return {**_listed(variables), "frame": _describe(frame), "scopeName": "Locals"}
        return await _evaluate(session, frame, str(arguments.get("expression", "")))
    except DapError as exc:
        raise DebugError(f"debugpy: {exc}") from None


# Commands -------------------------------------------------------------------------------------------


def _stack(stop: Stop, include_library: bool) -> dict[str, Any]:
    shown = [_describe(f) | {"column": 1, "library": f["library"]} for f in stop.frames]
    kept = [f for f in shown if include_library or not f["library"]] or shown[:1]
    hidden = len(shown) - len(kept)
    return {"stackFrames": kept, "count": len(kept), **({"libraryFramesHidden": hidden} if hidden else {})}


async def _scopes(session: Paused, frame: dict[str, Any]) -> dict[str, Any]:
    assert session.dap is not None
    body = await session.dap.request("scopes", {"frameId": frame["dap"]})
    scopes = [
        {
            "name": s.get("name", ""),
            "variablesReference": int(s.get("variablesReference") or 0),
            "expensive": bool(s.get("expensive", False)),
        }
        for s in body.get("scopes", [])
    ]
    return {"scopes": scopes, "frame": _describe(frame)}


async def _variables(session: Paused, reference: int) -> dict[str, Any]:
    assert session.dap is not None
    try:
        body = await session.dap.request("variables", {"variablesReference": reference})
    except DapError:
        raise DebugError(
            f"No variablesReference {reference} at this stop (they change at every stop): get_scopes or "
            "get_local_variables give the current ones."
        ) from None
    return _listed([_variable(v) for v in body.get("variables", [])])


async def _locals(session: Paused, frame: dict[str, Any], *, include_special: bool) -> list[dict[str, Any]]:
    scopes = (await _scopes(session, frame))["scopes"]
    chosen = next((s for s in scopes if s["name"].lower().startswith("local")), scopes[0] if scopes else None)
    if chosen is None or not chosen["variablesReference"]:
        return []
    variables: list[dict[str, Any]] = (await _variables(session, chosen["variablesReference"]))["variables"]
    if include_special:
        return variables
    return [v for v in variables if v["name"] not in GROUPS and not v["name"].startswith("__")]


async def _evaluate(session: Paused, frame: dict[str, Any], expression: str) -> dict[str, Any]:
    if not expression.strip():
        raise DebugError("The expression is empty: give Python code, e.g. len(items).")
    assert session.dap is not None
    try:
        body = await session.dap.request(
            "evaluate", {"expression": expression, "frameId": frame["dap"], "context": "repl"}
        )
    except DapError as exc:
        text = str(exc).strip()
        kind = "Name not found" if "NameError" in text else "Error"
        raise DebugError(f"{kind}: {text[-4000:]}") from None
    result = str(body.get("result", ""))
    ref = int(body.get("variablesReference") or 0)
    if is_secret_expression(expression) and result not in _REVEALS_NOTHING:
        result, ref = REDACTED, 0
    return {
        "result": _cut(redact(result[: RESULT_CHARS + 512]), RESULT_CHARS),
        "type": str(body.get("type", "")),
        "variablesReference": ref,
        "frame": _describe(frame),
    }


def _files(session: Paused) -> dict[str, Any]:
    """What get_source_context may read: the session's folder, and the files of its stop and breakpoints."""
    files = [f["file"] for f in session.stop.frames] if session.stop is not None else []
    return {"root": str(session.root), "files": [*files, *session.breakpoints.files()]}


# Helpers --------------------------------------------------------------------------------------------


def _pick(stop: Stop, frame_id: Any) -> dict[str, Any]:
    if frame_id is None:
        if not stop.frames:
            raise DebugError("This stop has no Python frames to inspect.")
        return stop.frames[0]
    if not isinstance(frame_id, int) or not 0 <= frame_id < len(stop.frames):
        raise DebugError(
            f"No frame {frame_id}: this stop has frames 0-{len(stop.frames) - 1} (0 is where it stopped); "
            "get_stack_trace lists them."
        )
    return stop.frames[frame_id]


def _frame(index: int, frame: dict[str, Any]) -> dict[str, Any]:
    name = str(frame.get("name", "")).replace(" (Current frame)", "")
    path = str((frame.get("source") or {}).get("path", ""))
    return {
        "id": index,
        "dap": frame.get("id"),
        "name": name,
        "file": path,
        "line": int(frame.get("line") or 0),
        "library": bool(path) and is_library(path),
    }


def _describe(frame: dict[str, Any]) -> dict[str, Any]:
    return {"id": frame["id"], "name": frame["name"], "file": frame["file"], "line": frame["line"]}


def _variable(v: dict[str, Any]) -> dict[str, Any]:
    name = str(v.get("name", ""))
    text = str(v.get("value", ""))
    ref = int(v.get("variablesReference") or 0)
    if is_secret_name(name) and text not in _REVEALS_NOTHING:
        value, ref = hidden(redact(text)), 0  # a secret is not expanded either (as in a snapshot)
    else:
        value = _cut(redact(text[: VALUE_CHARS + 512]), VALUE_CHARS)
    return {"name": name, "value": value, "type": str(v.get("type", "")), "variablesReference": ref}


def _listed(variables: list[dict[str, Any]]) -> dict[str, Any]:
    shown = variables[:MAX_VARIABLES]
    more = len(variables) - len(shown)
    return {"variables": shown, "count": len(variables), **({"notShown": more} if more else {})}


def _watch_value(expression: str, result: Any) -> str:
    if isinstance(result, dict):
        text = str(result.get("result", ""))
        if is_secret_expression(expression) and text not in _REVEALS_NOTHING:
            return REDACTED
        return _cut(redact(text[: VALUE_CHARS + 512]), VALUE_CHARS)
    error = str(result).strip().splitlines()
    return f"<error: {redact(error[-1]) if error else type(result).__name__}>"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"
