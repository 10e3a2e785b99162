"""The typed reply of every MCP tool: its ``outputSchema`` and its ``structuredContent``.

Some clients (Claude Code, VS Code) give the model only the JSON of ``structuredContent``, others only
the text content, so both carry everything (DESIGN.md, "MCP surface: principles"):

- a `Report` (failure, hang, summary, output) holds the complete report in ``text`` beside typed key
  fields (test, outcome, phase, kind, file, line, the follow-up call); its text content is ``text``.
- a `Data` reply (lists, stack, scopes, variables, evaluate, matches) is the typed object itself; its
  text content is a readable rendering when the view gave one, else the object's JSON.

Views build these; tools return them; the CLI prints ``render()``. Field names of seed 002's shapes
(``stackFrames``, ``variablesReference``) keep its camelCase. One module per concern (`base`, `runs`,
`sessions`, `failures`, `frames`, `output`, `diagnosis`); every reply but the diagnosis ones (imported from
`replies.diagnosis`) is importable from here.
"""

from __future__ import annotations

from mcpdebug.replies.base import Data, Reply, Report
from mcpdebug.replies.failures import Detection, FailureReport, HangInfo
from mcpdebug.replies.frames import (
    Evaluation,
    FrameRef,
    Scope,
    Scopes,
    SourceContext,
    SourceLine,
    Stack,
    StackFrame,
    Variable,
    Variables,
)
from mcpdebug.replies.output import LogLine, Logs, Match, OutputWindow, SearchResult
from mcpdebug.replies.runs import (
    PhaseRow,
    Problem,
    RunEnvironment,
    RunSummary,
    SessionRow,
    ShardRow,
    TestDetail,
    TestList,
    TestRow,
)
from mcpdebug.replies.sessions import (
    Continued,
    DebugSessionInfo,
    DebugStop,
    HeldSession,
    Location,
    ProcessControl,
    ProcessSession,
    RunState,
    SessionList,
    StartedProcess,
    StdinSent,
    WatchChange,
)

__all__ = [
    "Continued",
    "Data",
    "DebugSessionInfo",
    "DebugStop",
    "Detection",
    "Evaluation",
    "FailureReport",
    "FrameRef",
    "HangInfo",
    "HeldSession",
    "Location",
    "LogLine",
    "Logs",
    "Match",
    "OutputWindow",
    "PhaseRow",
    "Problem",
    "ProcessControl",
    "ProcessSession",
    "Reply",
    "Report",
    "RunEnvironment",
    "RunState",
    "RunSummary",
    "Scope",
    "Scopes",
    "SearchResult",
    "SessionList",
    "SessionRow",
    "ShardRow",
    "SourceContext",
    "SourceLine",
    "Stack",
    "StackFrame",
    "StartedProcess",
    "StdinSent",
    "TestDetail",
    "TestList",
    "TestRow",
    "Variable",
    "Variables",
    "WatchChange",
]
