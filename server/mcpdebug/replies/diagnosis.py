"""Typed replies of the diagnosis tools (suspects, value history, flaky history).

Each is a report: ``text`` is complete on its own, the other fields repeat its key facts for clients
that show the model only ``structuredContent`` (DESIGN.md, "MCP surface: principles").
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from mcpdebug.replies import base


class Report(base.Report):
    keeps_none: ClassVar[bool] = True  # every field listed, null or not (as a change's returned_by)


class SuspectLine(BaseModel):
    position: int = Field(description="1-based place in this ranking")
    rank: str = Field(description='its tie group\'s places, e.g. "3" or "2-4" (equal scores)')
    file: str = Field(description="relative to the run's rootdir when inside it")
    line: int = Field(description="the line, or the function's def line at function level")
    function: str
    source: str
    ochiai: float
    dstar: float | None = Field(
        description="DStar (star 2); null when infinite (no passing test ran it and every failing test did)"
    )
    failed: int = Field(description="failing tests that ran it")
    passed: int = Field(description="passing tests that ran it")
    tied: int = Field(description="other suspects with the same score")
    score: float = Field(default=0.0, description="Ochiai plus the weight of the other evidence (see why)")
    why: str = Field(default="", description="why it ranks here: coverage, the failing stack, its kind, ...")


class Suspects(Report):
    run_id: str
    level: str = Field(description="statement or function")
    failing_tests: int
    passing_tests: int
    suspects: list[SuspectLine]
    next_call: str | None = None


class ValueChange(BaseModel):
    name: str
    file: str
    line: int
    function: str
    old: str | None = Field(description="the value before; null when unset or not kept")
    new: str
    returned_by: str | None = Field(
        default=None, description="function() at file:line whose return gave the value"
    )
    depth: int = Field(default=0, description="calls followed from the failing line (0: the line itself)")


class ValueHistoryReply(Report):
    run_id: str
    test: str
    name: str | None = None
    failing_line: str | None = Field(
        default=None, description="file:line where the test's exception surfaced"
    )
    changes: list[ValueChange]
    outcome: str = Field(description="the traced test's outcome")


class TraceReply(ValueHistoryReply):
    original_outcome: str | None = Field(description="the test's outcome in the run it was traced for")
    outcome_changed: bool = Field(description="the traced run's outcome differs (flaky or time-dependent)")
    lines: int = Field(description="lines executed in traced code")
    steps: int = Field(description="changes, calls, returns and raises recorded")
    dropped: int = Field(description="steps left out between the head and the tail kept")


class HistoryEntry(BaseModel):
    run_id: str
    finished: str
    outcome: str
    attempt: int = 1
    duration: float
    phase: str = ""
    message: str = ""
    commit: str = Field(description='short commit id, "" when unknown')
    uncommitted_changes: bool


class TestHistory(Report):
    __test__ = False

    test: str
    entries: list[HistoryEntry]
    verdict: str | None = Field(
        default=None, description="new, flaky, failing or first, for a failing latest entry"
    )


class FlakyEntry(BaseModel):
    test: str
    passes: int
    failures: int
    runs: int
    versions: list[str] = Field(description="code versions on which it both passed and failed")
    last_failure_run: str | None = None
    last_failure: str | None = Field(default=None, description="the last failure's message")
    versioned: bool = Field(description="false: it passed and failed on unknown code versions (no git)")


class FlakyList(Report):
    runs: int = Field(description="runs looked at")
    flaky: list[FlakyEntry]
