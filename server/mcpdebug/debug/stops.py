"""A stop as captured and logged, and what reading one needs of its session (`session`, `inspect`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mcpdebug.debug.breakpoints import Breakpoint, Breakpoints, log_breakpoint
from mcpdebug.debug.dap import DapClient
from mcpdebug.debug.watches import Change, Watches
from mcpdebug.report import entries


@dataclass
class Stop:
    number: int
    thread: int
    reason: str
    description: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)
    """innermost first: id (index), dap (debugpy's frame id), name, file, line, library."""
    locals: list[dict[str, Any]] = field(default_factory=list)
    exception: dict[str, str] | None = None
    changes: list[Change] = field(default_factory=list)
    breakpoint: Breakpoint | None = None

    @classmethod
    def reported(cls, number: int, body: dict[str, Any]) -> Stop:
        """The stop debugpy's ``stopped`` event announces, before anything of it is read."""
        return cls(
            number=number,
            thread=int(body.get("threadId", 0)),
            reason=str(body.get("reason", "pause")),
            description=str(body.get("description") or body.get("text") or ""),
        )

    def log(self, session_id: str) -> None:
        """Seed 000's debug:state for this stop, with where it stopped (and debug:breakpoint for a hit)."""
        top = self.frames[0] if self.frames else None
        location = {"file": top["file"], "line": top["line"], "function": top["name"]} if top else None
        entries.debug_state(
            session_id, "paused", reason=self.reason, location=location, thread_id=self.thread
        )
        if self.breakpoint is not None:
            log_breakpoint(session_id, "hit", self.breakpoint, hits=self.breakpoint.hits)


class Paused(Protocol):
    """The parts of a debug session `inspect` reads a stop through."""

    root: Path
    dap: DapClient | None
    stop: Stop | None
    watches: Watches
    breakpoints: Breakpoints

    async def current_stop(self, doing: str) -> Stop:
        """The stop the session is paused at (captured), or DebugError saying why there is none."""
        ...
