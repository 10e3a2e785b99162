"""Replies of the debug tools: typed (each model is a tool's ``outputSchema``), with seed 002's names.

A stop (`ExecutionReply`) is a report: its ``text`` says in a few lines where the debuggee is, the
source line, the top frame's locals, the watches that changed and which call comes next; the other
fields carry the same facts typed. Lists and acknowledgements are data.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Literal

from pydantic import BaseModel, Field

from mcpdebug.debug import breakpoints as bp_source
from mcpdebug.debug.breakpoints import Breakpoint
from mcpdebug.debug.session import DebugSession
from mcpdebug.debug.stops import Stop
from mcpdebug.debug.watches import Watch
from mcpdebug.processes.test_runs import RunError, Runner
from mcpdebug.replies import DebugSessionInfo, Location, Variable, WatchChange
from mcpdebug.store import Store
from mcpdebug.views import live as live_view
from mcpdebug.views import lookup


class BreakpointSpec(BaseModel):
    """A breakpoint run_tests(debug=True) sets before the tests start."""

    file: str = Field(description="Source file, absolute or relative to cwd.")
    line: int = Field(ge=1)
    condition: str | None = Field(default=None, description="Stop only when this Python expression is true.")
    hit_condition: str | None = Field(default=None, description='e.g. ">= 3": stop from the 3rd hit on.')
    log_message: str | None = Field(default=None, description='Log instead of stopping: "total is {total}".')


class SourceLine(BaseModel):
    line: int
    content: str


class SourceContext(BaseModel):
    lineContent: str
    surrounding: list[SourceLine]


class ExecutionReply(BaseModel):
    """Where a debug session is after start, a step, continue or pause."""

    sessionId: str
    state: Literal["starting", "running", "paused", "terminated"]
    reason: str | None = Field(
        default=None, description="why it paused: breakpoint, step, exception, pause or entry"
    )
    location: Location | None = None
    breakpointId: str | None = None
    exception: str | None = None
    locals: list[Variable] = Field(default_factory=list, description="the top frame's, the first 20")
    watchesChanged: list[WatchChange] = Field(default_factory=list)
    exitCode: int | None = None
    next: str = Field(description="what to call next")
    text: str = Field(description="the complete reply; the other fields repeat its facts")


class SessionCreated(BaseModel):
    success: bool = True
    sessionId: str
    name: str
    state: str
    executable: str
    message: str


class DebugSessionList(BaseModel):
    sessions: list[DebugSessionInfo]
    count: int


class SessionClosed(BaseModel):
    success: bool
    sessionId: str
    exitCode: int | None = None
    message: str


class BreakpointInfo(BaseModel):
    breakpointId: str
    file: str = Field(description="absolute path")
    line: int = Field(description="the line debugpy bound it to (the requested one until it is bound)")
    requestedLine: int
    verified: bool
    enabled: bool
    condition: str | None = None
    hitCondition: str | None = None
    logMessage: str | None = None
    conditionError: str | None = None
    hits: int = 0
    message: str
    context: SourceContext | None = None


class BreakpointList(BaseModel):
    sessionId: str
    breakpoints: list[BreakpointInfo]
    exceptionFilters: list[str]
    count: int


class ExceptionFilters(BaseModel):
    sessionId: str
    filters: list[str]
    message: str


class WatchInfo(BaseModel):
    watchId: str
    expression: str
    value: str | None = Field(
        default=None, description="its value at the last stop (None until it is evaluated)"
    )


class WatchList(BaseModel):
    sessionId: str
    watches: list[WatchInfo]
    count: int


# Building them --------------------------------------------------------------------------------------


async def reply(session: DebugSession, store: Store, runner: Runner) -> ExecutionReply:
    """`execution`, with a finished test run's summary (as run_tests gives it) once its results are stored."""
    finished = None
    if session.kind == "tests" and session.state in ("terminated", "closed") and session.error is None:
        try:
            result = await runner.wait(session.id, 5.0)
            finished = (await asyncio.to_thread(live_view.outcome, store, result)).text
        except (lookup.NotFound, RunError) as exc:  # it died before recording anything: that says why
            finished = str(exc)
    return execution(session, finished)


def execution(session: DebugSession, finished: str | None = None) -> ExecutionReply:
    """The reply of every tool that lets the debuggee run (``finished``: a test run's summary)."""
    sid = session.id
    if session.state == "paused" and session.stop is not None:
        return _paused(session, session.stop)
    if session.state in ("terminated", "closed"):
        return _terminated(session, finished)
    state: Literal["starting", "running"] = "starting" if session.state == "starting" else "running"
    nxt = (
        f'wait_for_stop(id="{sid}", timeout=...) waits for its next stop; '
        f'pause_execution(session_id="{sid}") pauses it'
    )
    doing = (
        "is still starting (collecting tests)"
        if state == "starting"
        else "is running and has not stopped yet"
    )
    return ExecutionReply(
        sessionId=sid, state=state, next=nxt, text=f"RUNNING: session {sid} {doing}.\nNext: {nxt}."
    )


def _paused(session: DebugSession, stop: Stop) -> ExecutionReply:
    sid = session.id
    top = stop.frames[0] if stop.frames else None
    location = None
    lines = []
    why = {
        "breakpoint": "at a breakpoint",
        "step": "after a step",
        "exception": "at an exception",
        "pause": "by pause_execution",
        "entry": "on entry",
    }.get(stop.reason, f"({stop.reason})")
    if stop.breakpoint is not None:
        why += f" ({stop.breakpoint.id}, hit {stop.breakpoint.hits})"
    exception = None
    if stop.exception is not None:
        exception = f"{stop.exception['type']}: {stop.exception['message']}".strip(": ")
    if top is not None:
        content = bp_source.context(top["file"], top["line"], 0)["lineContent"]
        location = Location(file=top["file"], line=top["line"], function=top["name"], lineContent=content)
        lines.append(f"PAUSED {why} in {top['name']}() at {_short(top['file'], session)}:{top['line']}")
        lines.append(f"  {top['line']:>4} | {content}")
    else:
        lines.append(f"PAUSED {why} (no Python frame)")
    if exception:
        lines.append(f"Exception: {exception}")
    variables = [Variable(**v) for v in stop.locals]
    if variables:
        lines.append("Locals: " + ", ".join(f"{v.name} = {v.value}" for v in variables))
    changes = [
        WatchChange(watchId=c.watch.id, expression=c.watch.expression, old=c.old, new=c.new)
        for c in stop.changes
    ]
    if changes:
        lines.append("Watches changed: " + "; ".join(f"{c.expression}: {c.old} -> {c.new}" for c in changes))
    nxt = (
        f'step_over / step_into / step_out / continue_execution(session_id="{sid}"); '
        f'evaluate_expression, get_local_variables, get_stack_trace(session_id="{sid}") read it'
    )
    lines.append(f"Next: {nxt}.")
    return ExecutionReply(
        sessionId=sid,
        state="paused",
        reason=stop.reason,
        location=location,
        breakpointId=stop.breakpoint.id if stop.breakpoint is not None else None,
        exception=exception,
        locals=variables,
        watchesChanged=changes,
        next=nxt,
        text="\n".join(lines),
    )


def _terminated(session: DebugSession, finished: str | None) -> ExecutionReply:
    sid, code = session.id, session.exit_code
    ending = f"exit code {code}" if code is not None else "no exit code"
    if session.kind == "tests":
        head = f"TERMINATED: the debugged run {sid} ended ({ending})."
        body = finished or ""
        nxt = (
            f'get_run_summary(run_id="{sid}") and get_test read the run; '
            f'close_debug_session(session_id="{sid}")'
        )
    else:
        head = f"TERMINATED: {session.target} ended ({ending})."
        tail = list(session.output.tail)[-15:] if session.output is not None else []
        body = ("Last output:\n" + "\n".join(f"  {line}" for line in tail)) if tail else "It printed nothing."
        nxt = (
            f'get_output(run_id="{sid}") / search_output(run_id="{sid}", pattern=...) read its output; '
            f'close_debug_session(session_id="{sid}") removes the session'
        )
    text = "\n".join(part for part in (head, body, f"Next: {nxt}.") if part)
    return ExecutionReply(sessionId=sid, state="terminated", exitCode=code, next=nxt, text=text)


def session_info(session: DebugSession) -> DebugSessionInfo:
    stop = session.stop if session.state == "paused" else None
    top = stop.frames[0] if stop is not None and stop.frames else None
    return DebugSessionInfo(
        id=session.id,
        name=session.name,
        kind=session.kind,
        state=session.state,
        reason=stop.reason if stop is not None else None,
        location=f"{top['file']}:{top['line']} in {top['name']}()" if top is not None else None,
        target=session.target,
        pid=session.pid,
        exitCode=session.exit_code,
        breakpoints=len(session.breakpoints.all()),
        watches=len(session.watches.all()),
        createdAt=_iso(session.created_at),
        updatedAt=_iso(session.updated_at),
        ended=session.ended or session.error,
    )


def sessions_text(sessions: list[DebugSession]) -> str:
    """The debug sessions' lines of list_sessions."""
    if not sessions:
        return ""
    lines = [f"Debug sessions ({len(sessions)}): the debug, execution and inspection tools take these ids"]
    for s in sessions:
        info = session_info(s)
        state = info.state + (f" ({info.reason}) at {info.location}" if info.location else "")
        if info.exitCode is not None:
            state += f", exit code {info.exitCode}"
        if info.ended:
            state += f": {info.ended}"
        lines.append(f"- {s.id} [{s.kind}] {s.name}: {state}")
    return "\n".join(lines)


def breakpoint_info(bp: Breakpoint, with_context: bool = False) -> BreakpointInfo:
    context = None
    if with_context:
        raw = bp_source.context(bp.file, bp.bound_line or bp.line)
        context = SourceContext(
            lineContent=raw["lineContent"], surrounding=[SourceLine(**s) for s in raw["surrounding"]]
        )
    return BreakpointInfo(
        breakpointId=bp.id,
        file=bp.file,
        line=bp.bound_line or bp.line,
        requestedLine=bp.line,
        verified=bp.verified,
        enabled=bp.enabled,
        condition=bp.condition,
        hitCondition=bp.hit_condition,
        logMessage=bp.log_message,
        conditionError=bp.condition_error,
        hits=bp.hits,
        message=bp.message,
        context=context,
    )


def watch_info(watch: Watch) -> WatchInfo:
    return WatchInfo(watchId=watch.id, expression=watch.expression, value=watch.value)


def _short(path: str, session: DebugSession) -> str:
    try:
        relative = os.path.relpath(path, session.root)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))
