"""Replies that diagnose a test: its failure, its hang, a hang detected in a running process."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcpdebug.replies.base import Report


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
