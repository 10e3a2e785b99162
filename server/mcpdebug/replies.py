"""The typed reply of every MCP tool: its ``outputSchema`` and its ``structuredContent``.

Some clients (Claude Code, VS Code) give the model only the JSON of ``structuredContent``, others only
the text content, so both carry everything (DESIGN.md, "MCP surface: principles"):

- a `Report` (failure, hang, summary, output) holds the complete report in ``text`` beside typed key
  fields (test, outcome, phase, kind, file, line, the follow-up call); its text content is ``text``.
- a `Data` reply (lists, stack, scopes, variables, evaluate, matches) is the typed object itself; its
  text content is a readable rendering when the view gave one, else the object's JSON.

Views build these; tools return them; the CLI prints ``render()``. Field names of seed 002's shapes
(``stackFrames``, ``variablesReference``) keep its camelCase.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, PrivateAttr
from pydantic_core import to_jsonable_python
from typing_extensions import Self


class Reply(BaseModel):
    """What every reply shares: the text content is ``render()`` (also its ``str()``, so a reply put
    into a larger text by mistake reads as the reply, not as the model's fields)."""

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        return json.dumps(self.structured(), indent=1, ensure_ascii=False)

    keeps_none: ClassVar[bool] = False
    """Seed 004's replies list every field, null or not; the others leave out what does not apply."""

    def structured(self) -> dict[str, Any]:
        """The ``structuredContent``: the model's JSON, without the optional fields that do not apply
        (a field declared ``X | None`` without a default stays, as null)."""
        if self.keeps_none:
            return self.model_dump(mode="json", by_alias=True)
        return _compact(self)


def _compact(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None and not field.is_required():
            continue
        out[field.alias or name] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _compact(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return to_jsonable_python(value)


class Report(Reply):
    text: str = Field(description="The complete report; the other fields repeat its key facts.")

    def render(self) -> str:
        return self.text


class Data(Reply):
    _text: str | None = PrivateAttr(default=None)

    def with_text(self, text: str) -> Self:
        """Render as ``text`` (a readable form of the same data) instead of JSON."""
        self._text = text
        return self

    def render(self) -> str:
        return self._text if self._text is not None else super().render()


# Runs and tests -----------------------------------------------------------------------------------


class Problem(BaseModel):
    test: str
    outcome: str = Field(description="failed or error")
    phase: str = Field(description="setup, call or teardown")
    message: str


class RunSummary(Report):
    run_id: str
    status: str = Field(description="running, finished, interrupted or crashed")
    exit_status: int | None = None
    counts: dict[str, int] = Field(description="tests per outcome")
    failures: list[Problem] = Field(description="failed or errored tests (the first 50)")
    next_call: str | None = None


class SessionRow(BaseModel):
    run_id: str
    kind: str
    label: str
    status: str
    exit_status: int | None = None
    started: str
    duration: float | None = Field(default=None, description="seconds")
    counts: dict[str, int]


class HeldSession(BaseModel):
    session_id: str = Field(description="what evaluate_expression and the inspection tools take")
    test: str
    run_id: str
    worker: str
    reason: str = Field(description="failure or hang")
    resumes_in: float | None = Field(default=None, description="seconds until it resumes by itself")


# Process sessions (seed 004) ----------------------------------------------------------------------


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


# Debug sessions (debugpy) ------------------------------------------------------------------------


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


class TestRow(BaseModel):
    test: str
    outcome: str
    duration: float | None = None
    worker: str
    message: str | None = None


class TestList(Data):
    run_id: str
    total: int = Field(description="tests in the run")
    matching: int = Field(description="tests with the outcome asked for")
    offset: int
    tests: list[TestRow]
    next_call: str | None = Field(default=None, description="the call for the next page")


class PhaseRow(BaseModel):
    phase: str
    outcome: str
    duration: float | None = None
    message: str | None = None


class TestDetail(Report):
    run_id: str
    test: str
    outcome: str
    file: str | None = None
    line: int | None = None
    phases: list[PhaseRow]


# Failures and hangs -------------------------------------------------------------------------------


class FailureReport(Report):
    run_id: str
    test: str | None = Field(default=None, description="absent when the run has no failure")
    kind: Literal["failed", "error", "hang", "crashed", "none"]
    phase: str | None = None
    exception: str | None = Field(default=None, description="type: first line of the message")
    file: str | None = Field(default=None, description="where it was raised, in the project's code")
    line: int | None = None
    function: str | None = None
    session_id: str | None = Field(default=None, description="set when the test is held alive right now")
    other_failures: list[str] = Field(default_factory=list)
    next_call: str | None = None


class HangInfo(Report):
    run_id: str
    test: str | None = Field(default=None, description="absent when the run has no hang")
    kind: str | None = Field(
        default=None, description="busy, polling, blocked, gil, stuck, killed, crashed, ..."
    )
    summary: str | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None
    other_hangs: list[str] = Field(default_factory=list)
    next_call: str | None = None


class Detection(Report):
    verdict: Literal["HUNG", "COMPLETED", "SAMPLED"] = Field(
        description="SAMPLED: a running process (pid) read from outside, hung or not"
    )
    run_id: str | None = None
    exit_status: int | None = None
    hung_tests: list[str] = Field(default_factory=list)
    kind: str | None = None
    file: str | None = None
    line: int | None = None


# Frames (seed 002's shapes; stored snapshot or live session) --------------------------------------


class StackFrame(BaseModel):
    id: int = Field(description="frame_id for the other tools; 0 is the raise point")
    name: str
    file: str
    line: int
    column: int = 1
    library: bool = False
    thread: str | None = None


class FrameRef(BaseModel):
    id: int
    name: str
    file: str
    line: int
    thread: str | None = None


class Stack(Data):
    success: bool = True
    session: str | None = None
    test: str | None = None
    phase: str | None = None
    exception: str | None = None
    stackFrames: list[StackFrame]
    count: int
    libraryFramesHidden: int | None = None
    message: str | None = Field(default=None, description="why the stack is empty")


class Scope(BaseModel):
    name: str
    variablesReference: int
    expensive: bool = False
    count: int | None = Field(default=None, description="its variables (a debug session does not count)")


class Scopes(Data):
    success: bool = True
    session: str | None = None
    scopes: list[Scope]
    frame: FrameRef


class Variable(BaseModel):
    name: str
    value: str
    type: str
    variablesReference: int = Field(description="0: nothing to expand; else pass it to get_variables")


class Variables(Data):
    success: bool = True
    session: str | None = None
    variables: list[Variable]
    count: int
    notShown: int | None = None
    frame: FrameRef | None = None
    scopeName: str | None = None


class SourceLine(BaseModel):
    line: int
    content: str


class SourceContext(Data):
    success: bool = True
    file: str
    line: int
    lineContent: str
    surrounding: list[SourceLine]
    note: str


class Evaluation(Data):
    success: bool = True
    session: str
    result: str = Field(description="the value's repr (long values are cut)")
    type: str
    variablesReference: int
    frame: FrameRef | None = None
    output: str | None = Field(default=None, description="what the code printed")


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


# Output --------------------------------------------------------------------------------------------


class OutputWindow(Report):
    run_id: str
    test: str | None = Field(default=None, description="absent for the run's output outside tests")
    stream: str
    first: int | None = Field(default=None, description="first line shown (1-based)")
    last: int | None = None
    total: int = Field(description="lines in this output")
    earlier: str | None = Field(default=None, description="the call for the lines before")
    later: str | None = Field(default=None, description="the call for the lines after")
    uri: str | None = None
    path: str | None = Field(default=None, description="the output file on disk")


class Match(BaseModel):
    occurrence: int
    test: str | None = None
    line: int
    text: str
    context: list[str] = Field(description="the lines around it, as numbered lines")


class SearchResult(Data):
    pattern: str
    scope: str
    total: int = Field(description="matching lines; 0 is a normal answer")
    matches: list[Match]
    next_call: str | None = None
    hint: str | None = Field(default=None, description="what to try when nothing matched")


class LogLine(BaseModel):
    time: str
    session: str = Field(description="a run id, or a process session's label")
    test: str | None = None
    stream: str
    text: str
    process: bool = Field(default=False, description="a line of a process session")


class Logs(Data):
    total_results: int
    truncated: bool
    sessions_queried: list[str]
    sessions_not_found: list[str]
    time_range: str | None = None
    known_sessions: list[str] | None = None
    lines: list[LogLine]
