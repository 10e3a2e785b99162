"""The reply of `localize`: what the dynamic localizer found, and the ranking after it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcpdebug.replies.base import Report


class LocalizedRow(BaseModel):
    file: str = Field(description="relative to the run's rootdir when inside it")
    line: int
    change: str = Field(description="the change that did best, e.g. \"'<' -> '<='\"; \"\" when none ran")
    fixed: int = Field(description="failing tests that passed with the change")
    failing: int = Field(description="failing tests re-run")
    broke: int = Field(description="passing neighbours (tests that run the line) that failed with it")
    passing: int = Field(description="passing neighbours run")
    tried: int = Field(description="changes of the line that were run")
    note: str = Field(default="", description="why the line was not (fully) tried")


class LocalizeReply(Report):
    run_id: str
    budget: float = Field(description="seconds allowed")
    elapsed: float = Field(description="seconds the localizer's process took")
    complete: bool = Field(description="every planned line was tried within the budget")
    lines: list[LocalizedRow]
    next_call: str | None = None
