"""What a source says that the merged store already says otherwise: kept as it is, and reported.

A test of a run is one record: the same test stored again with the same end (its outcome and the
moment it ended) is the same record, imported twice, and changes nothing. The same test ended
differently, or at another moment, by another shard (two shards ran it: the split overlapped; or two
CI runs were given one id) is a conflict: the store keeps what it had, the source's record of that
test is left out, and `mcpdebug merge` lists it. A shard's label names one controlling process: two
processes under one label (shards not labelled, `--mcp-debug-shard`) is a conflict of the run's own
records (its start, collection, finish and output outside tests), which are kept from the first.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

SAME_END: Final = 0.001
"""Seconds two records of a test's end may differ by and be the same record (JSON's float round trip)."""


@dataclass(frozen=True)
class Conflict:
    run_id: str
    what: str
    """The test's node id, or "shard LABEL"."""
    kept: str
    left_out: str
    source: str

    def text(self) -> str:
        return f"{self.run_id} {self.what}: kept {self.kept}; left out {self.left_out} from {self.source}"


@dataclass
class Ended:
    """A test's end as a source records it."""

    outcome: str
    finished: float
    worker: str
    process: str = ""


@dataclass
class RunMerge:
    """What merging one run of one source did."""

    new_tests: int = 0
    known_tests: int = 0
    left_out: dict[str, str] = field(default_factory=dict)
    """Node ids whose records are left out (conflicts): of one process of the source, or of all ("")."""
    processes_left_out: set[str] = field(default_factory=set)
    """Processes whose records of the run itself are left out (a shard's label taken already)."""

    def leaves_out(self, nodeid: str, process: str) -> bool:
        if nodeid:
            left = self.left_out.get(nodeid)
            return left is not None and left in ("", process)
        return process in self.processes_left_out


def stored_ends(
    db: sqlite3.Connection, run_id: str, schema: str = "main", among: Collection[str] | None = None
) -> dict[str, Ended]:
    """Every ended test of a run in a store (``schema``: an attached source's name), or those of
    them ``among`` names (a source's tests: the eighth shard merged reads its own, not the seven
    others' too)."""
    if among is None:
        rows = db.execute(
            f"SELECT nodeid, status, finished, worker FROM {schema}.tests "
            "WHERE run_id=? AND finished IS NOT NULL",
            (run_id,),
        )
    else:
        rows = db.execute(
            f"SELECT nodeid, status, finished, worker FROM {schema}.tests WHERE run_id=? AND finished IS "
            "NOT NULL AND nodeid IN (SELECT value FROM json_each(?))",
            (run_id, json.dumps(list(among))),
        )
    return {r[0]: Ended(r[1], float(r[2]), r[3] or "") for r in rows}


def compare(
    run_id: str, have: dict[str, Ended], incoming: dict[str, Ended], source: str, conflicts: list[Conflict]
) -> RunMerge:
    """Which of a source's tests the store has already (the same record), lacks, or contradicts."""
    merge = RunMerge()
    for nodeid, end in incoming.items():
        kept = have.get(nodeid)
        if kept is None:
            merge.new_tests += 1
        elif kept.outcome == end.outcome and abs(kept.finished - end.finished) <= SAME_END:
            merge.known_tests += 1
        else:
            merge.left_out[nodeid] = ""
            conflicts.append(Conflict(run_id, nodeid, _describe(kept), _describe(end), source))
    return merge


def within(
    run_id: str, nodeid: str, first: Ended, later: Ended, source: str, conflicts: list[Conflict]
) -> bool:
    """Two processes of one source ended the same test differently: the first is kept."""
    if first.process == later.process or first.outcome == later.outcome:
        return False  # a rerun's attempts; a dead worker's tests said again by its controller
    conflicts.append(Conflict(run_id, nodeid, _describe(first), _describe(later), source))
    return True


def shard_conflict(
    db: sqlite3.Connection, run_id: str, label: str, process: str, source: str, conflicts: list[Conflict]
) -> bool:
    """Whether the store holds shard ``label`` of the run from another process (then the source's
    records of the run itself are left out)."""
    row = db.execute(
        "SELECT process, host FROM main.shards WHERE run_id=? AND label=? AND process != ''", (run_id, label)
    ).fetchone()
    if row is None or row[0] == process:
        return False
    name = f"shard {label!r}" if label else "its shard without a label"
    conflicts.append(
        Conflict(
            run_id,
            name,
            f"the one run by {row[0]} on {row[1] or '?'}",
            f"the one run by {process} (give each shard its own --mcp-debug-shard)",
            source,
        )
    )
    return True


def _describe(end: Ended) -> str:
    import datetime as dt

    when = dt.datetime.fromtimestamp(end.finished).isoformat(sep=" ", timespec="seconds")
    return f"{end.outcome} on {end.worker or '?'} at {when}"


def taken_label(
    run_id: str, label: str, first: str, later: str, source: str, conflicts: list[Conflict]
) -> None:
    """Two processes of one source ran under one shard label."""
    name = f"shard {label!r}" if label else "its shard without a label"
    conflicts.append(
        Conflict(
            run_id,
            name,
            f"the one run by {first}",
            f"the one run by {later} (give each shard its own --mcp-debug-shard)",
            source,
        )
    )
