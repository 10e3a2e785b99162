"""Replies about recorded runs and their tests: summaries, session rows, test lists and details."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcpdebug.replies.base import Data, Report


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
