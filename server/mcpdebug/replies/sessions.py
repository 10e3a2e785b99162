"""Replies about sessions: held tests and live runs, process sessions (seed 004), debug sessions."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from mcpdebug.replies.base import Data, Report
from mcpdebug.replies.frames import Variable
from mcpdebug.replies.runs import SessionRow


class HeldSession(BaseModel):
    session_id: str = Field(description="what evaluate_expression and the inspection tools take")
    test: str
    run_id: str
    worker: str
    reason: str = Field(description="failure or hang")
    resumes_in: float | None = Field(default=None, description="seconds until it resumes by itself")


# Live runs -----------------------------------------------------------------------------------------


class Continued(Data):
    """Seed 002's reply to continue_execution."""

    success: bool = True
    state: Literal["running", "stopped", "finished"] = "running"
    message: str
    run_id: str | None = None
    next_call: str | None = None
    debug: DebugStop | None = Field(default=None, description="a debug session's next stop")


class RunState(Report):
    state: Literal["stopped", "running", "finished", "closed"]
    run_id: str | None = None
    session_id: str | None = Field(default=None, description="the held test's session, when stopped")
    test: str | None = None
    exit_status: int | None = None
    next_call: str | None = None
    debug: DebugStop | None = Field(default=None, description="where a debug session stopped")


# Process sessions (seed 004) -----------------------------------------------------------------------


class ProcessSession(BaseModel):
    """One process session, with seed 004's fields."""

    label: str
    run_id: str = Field(description="The session's id: get_output(run_id=...) reads its output")
    mode: str = Field(description="managed (started by start_process), run (mcpdebug run) or forward")
    status: str = Field(description="running, stopped, crashed, restarting or disconnected")
    pid: int | None = Field(default=None, description="The command's pid (a forward session has none)")
    exit_code: int | None = Field(default=None, description="Its last exit status; -N when signal N ended it")
    command: list[str]
    source: str | None = Field(default=None, description="What a forward session reads")
    cwd: str
    restart: str = Field(description="Restart policy: no, on-failure or always")
    restarts: int
    started: str | None = None
    exited: str | None = Field(default=None, description="When the process last exited")
    ended: str | None = Field(default=None, description="When the session ended (its runner stopped)")
    lines: int = Field(description="Lines stored")
    bytes: int = Field(description="Bytes stored")
    message: str = Field(description="What its last state change said")
    test_run: str | None = Field(default=None, description="The test run whose test started it, if one did")


class StartedProcess(Report):
    keeps_none: ClassVar[bool] = True

    session: ProcessSession
    output: str = Field(
        description="Its output so far: the last 20 lines, and when there are more, how many were left "
        "out and the call (and resource) that reads them"
    )


class ProcessControl(Data):
    keeps_none: ClassVar[bool] = True

    success: bool
    message: str
    action: str
    signal: str | None = None
    pid: int | None = Field(
        default=None, description="The process signalled, or the new process after a restart"
    )
    old_pid: int | None = Field(default=None, description="After a restart: the process that was replaced")
    session: ProcessSession


class StdinSent(Data):
    keeps_none: ClassVar[bool] = True

    success: bool
    message: str
    bytes_sent: int
    label: str
    pid: int | None


# Debug sessions (debugpy) --------------------------------------------------------------------------


class DebugSessionInfo(BaseModel):
    id: str
    name: str
    language: str = "python"
    kind: str = Field(description="script (start_debugging) or tests (run_tests(debug=True))")
    state: str = Field(description="created, starting, running, paused, terminated or closed")
    reason: str | None = None
    location: str | None = None
    target: str = ""
    pid: int | None = None
    exitCode: int | None = None
    breakpoints: int = 0
    watches: int = 0
    createdAt: str
    updatedAt: str
    ended: str | None = Field(default=None, description="why it was closed")


class Location(BaseModel):
    file: str = Field(description="absolute path")
    line: int
    function: str
    lineContent: str


class WatchChange(BaseModel):
    watchId: str
    expression: str
    old: str | None
    new: str


class DebugStop(BaseModel):
    """Where a debug session is after a start, a step, continue or pause: the typed facts of the
    reply's text, as the debug tools give them."""

    sessionId: str
    state: Literal["starting", "running", "paused", "terminated"]
    reason: str | None = Field(default=None, description="breakpoint, step, exception, pause or entry")
    location: Location | None = None
    breakpointId: str | None = None
    exception: str | None = None
    locals: list[Variable] = Field(default_factory=list, description="the top frame's, the first 20")
    watchesChanged: list[WatchChange] = Field(default_factory=list)
    exitCode: int | None = None
    next: str = Field(description="what to call next")


class SessionList(Data):
    held: list[HeldSession] = Field(description="tests held alive right now")
    debug: list[DebugSessionInfo] = Field(default_factory=list, description="debug sessions (debugpy)")
    processes: list[ProcessSession] = Field(default_factory=list, description="process sessions (seed 004)")
    sessions: list[SessionRow] = Field(description="recorded test runs, newest first")
