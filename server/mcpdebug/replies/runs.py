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


class ShardRow(BaseModel):
    label: str = Field(description='the shard\'s label ("" for a run recorded in one part)')
    host: str
    status: str = Field(description="running, finished, interrupted")
    exit_status: int | None = None
    tests: int = Field(description="tests it ran")
    ci: dict[str, str] = Field(description="its CI job: provider, workflow, job, run, commit, branch, url")
    machine: dict[str, str] = Field(default={}, description="cpus, cpus_usable, encodings, uid, umask, ...")


class RunEnvironment(Report):
    run_id: str
    ci: dict[str, str] = Field(
        description="the CI job (the first shard's): provider, job, commit, branch, url"
    )
    shards: list[ShardRow]
    variables: dict[str, str] = Field(
        description="environment variables the same in every shard (secrets' values hidden)"
    )
    differing: dict[str, dict[str, str]] = Field(
        description="variables that differ between shards: name -> shard label -> value"
    )
    next_call: str | None = None
