"""What a run recorded, counted over its processes, and the closing line that says so.

Each process counts the events it streamed, spooled and dropped; an xdist worker hands its counts to
the controller in ``workeroutput`` (pytest-xdist's channel back), and the controller prints one
line for the whole run. A drop is never silent: the line becomes a warning that says what was not
recorded, why, and what to do.
"""

from __future__ import annotations

from typing import Any

WORKER_KEY = "mcpdebug"
"""The key of a worker's counts in ``workeroutput``."""


class Tally:
    __slots__ = ("dropped", "notes", "problems", "processes", "sent", "silent", "spooled")

    def __init__(
        self,
        sent: int = 0,
        spooled: int = 0,
        dropped: int = 0,
        processes: int = 0,
        problems: list[str] | None = None,
        silent: list[str] | None = None,
    ) -> None:
        self.sent = sent
        self.spooled = spooled
        self.dropped = dropped
        self.processes = processes
        self.problems: list[str] = [] if problems is None else problems
        """Why events were dropped, once each."""
        self.silent: list[str] = [] if silent is None else silent
        """Workers that ended without handing over their counts (crashed)."""
        self.notes: list[str] = []
        """What workers had to say (a remote worker whose channel broke: where it spooled)."""

    def add(self, *, sent: int, spooled: int, dropped: int, problem: str | None) -> None:
        self.sent += sent
        self.spooled += spooled
        self.dropped += dropped
        self.processes += 1
        if problem and problem not in self.problems:
            self.problems.append(problem)

    def add_relayed(self, *, sent: int, spooled: int, dropped: int, problem: str | None) -> None:
        """What the controller delivered for a remote worker (`relay`): that worker is counted already."""
        self.add(sent=sent, spooled=spooled, dropped=dropped, problem=problem)
        self.processes -= 1

    def add_worker(self, worker: str, counts: Any) -> None:
        """A worker's ``workeroutput`` entry (or None: it died first)."""
        if not isinstance(counts, dict):
            self.silent.append(worker)
            return
        if counts.get("note"):
            self.notes.append(f"worker {worker}: {counts['note']}")
        self.add(
            sent=int(counts.get("sent", 0)),
            spooled=int(counts.get("spooled", 0)),
            dropped=int(counts.get("dropped", 0)),
            problem=counts.get("problem"),
        )

    def summary(
        self,
        run_id: str,
        *,
        warnings: list[str],
        emptied: int,
        url: str | None,
        spool: str,
        dir_arg: str,
        program: str = "mcpdebug",
    ) -> list[tuple[str, bool]]:
        """The recording's lines in pytest's summary (each with whether it is a warning): what went
        wrong, once each, then the closing line."""
        said = dict.fromkeys([*warnings, *self.notes])
        lines = [(f"mcpdebug: warning: {warning}", True) for warning in said]
        if emptied:
            times = "once" if emptied == 1 else f"{emptied} times"
            lines.append(
                (
                    f"mcpdebug: warning: pytest's capture was emptied by another reader {times} (e.g. "
                    "--pdb): output written just before that may be missing; the rest was recorded",
                    True,
                )
            )
        return [*lines, self.closing_line(run_id, url=url, spool=spool, dir_arg=dir_arg, program=program)]

    def closing_line(
        self, run_id: str, *, url: str | None, spool: str, dir_arg: str, program: str = "mcpdebug"
    ) -> tuple[str, bool]:
        """The run's last line, and whether it is a warning; ``dir_arg`` (`` --dir X`` or "") and
        ``program`` (`mcpdebug`, or the path that runs it: `commands.program`) make its commands work
        as pasted where pytest was started."""
        inspect = (
            f"inspect it with `{program} show {run_id}{dir_arg}`, "
            f"or serve it to an agent with `{program} serve{dir_arg}`"
        )
        died = (
            f"; worker{'s' if len(self.silent) > 1 else ''} {', '.join(self.silent)} died before "
            "reporting (what it recorded until then is kept)"
            if self.silent
            else ""
        )
        recorded = self.sent + self.spooled
        if self.dropped:
            why = "; ".join(self.problems) or "the spool could not be written"
            fix = f"{why}, or pass --mcp-debug-dir DIR to record elsewhere"
            if not recorded:
                return f"mcpdebug: warning: run {run_id} was not recorded: {fix}{died}", True
            return (
                f"mcpdebug: warning: run {run_id}: {self.dropped:,} of {recorded + self.dropped:,} events "
                f"were not recorded: {fix}; what was recorded ({self._where(url, spool)}) is kept: "
                f"{inspect}{died}",
                True,
            )
        return f"mcpdebug: run {run_id} {self._where(url, spool)}; {inspect}{died}", False

    def _where(self, url: str | None, spool: str) -> str:
        by = f" from {self.processes} processes" if self.processes > 1 else ""
        streamed = f"streamed to {url or 'the server'}"
        if not self.spooled:
            return f"{streamed} ({self.sent:,} events{by})"
        if not self.sent:
            return f"saved to {spool} ({self.spooled:,} events{by})"
        return f"{streamed} ({self.sent:,} events) and saved to {spool} ({self.spooled:,} events){by}"
