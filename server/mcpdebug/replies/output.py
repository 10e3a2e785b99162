"""Replies about captured output: a window of lines, search matches, a process's log lines."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcpdebug.replies.base import Data, Report


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
