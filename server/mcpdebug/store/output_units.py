"""The output units one batch of events writes to (one transaction of `Store.apply`), as it knows them.

A unit's row (its id, where its head ends, its tail block, each stream's last line) is read once a
batch, in one query for all the units of a run the batch writes to, and kept up to date here while
the batch appends; a unit the batch makes gets its row whole with its first lines. A spool merged
holds thousands of tests with a few lines each: one statement a test for its unit, not five.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Final

from pytest_mcpdebug import protocol

_INSERT: Final = (
    "INSERT INTO outputs (run_id, unit, id, worker, lines, stream_lines, bytes_written, bytes_stored, "
    "head_bytes, tail_block, dropped_lines, dropped_bytes, first_ts, last_ts) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_UPDATE: Final = (
    "UPDATE outputs SET lines=max(lines, ?), stream_lines=?, bytes_written=bytes_written+?, "
    "bytes_stored=bytes_stored+?, head_bytes=head_bytes+?, tail_block=max(tail_block, ?), "
    "dropped_lines=dropped_lines+?, dropped_bytes=dropped_bytes+?, "
    "first_ts=min(coalesce(first_ts, ?), ?), last_ts=max(coalesce(last_ts, ?), ?) WHERE run_id=? AND id=?"
)
_COLUMNS: Final = "id, tail_block, head_bytes, stream_lines"


@dataclass
class Unit:
    """A unit's row as the batch writing it left it."""

    key: str
    id: int
    tail_block: int
    head_bytes: int
    stream_lines: dict[str, int]
    made: bool
    """Made in this batch: every segment it has is one of ``firsts``."""
    row: bool = False
    """Its row is inserted (a unit made in this batch gets it with its first lines)."""
    firsts: set[int] = field(default_factory=set)
    """The first line of each segment this batch wrote."""

    def wrote(
        self,
        db: sqlite3.Connection,
        e: protocol.Output,
        *,
        lines: int,
        stream: str,
        written: int,
        stored: int,
        head: int,
        block: int,
        trimmed: tuple[int, int],
    ) -> None:
        """One event's ``lines`` lines are in their files: the unit's row says so."""
        self.firsts.add(e.first)
        last = e.first + lines - 1
        self.stream_lines[stream] = max(self.stream_lines.get(stream, 0), e.stream_first + lines - 1)
        self.head_bytes += head
        self.tail_block = max(self.tail_block, block)
        counts = stream_text(self.stream_lines)
        if self.made and not self.row:  # its first lines: its row as they leave it
            self.row = True
            row = (e.run_id, self.key, self.id, e.worker, max(last, 0), counts, written, stored, head, block)
            db.execute(_INSERT, (*row, *trimmed, e.ts, e.ts))
        else:
            changes = (last, counts, written, stored, head, block, *trimmed, e.ts, e.ts, e.ts, e.ts)
            db.execute(_UPDATE, (*changes, e.run_id, self.id))


@dataclass
class Batch:
    units: dict[tuple[str, str], Unit] = field(default_factory=dict)
    next_ids: dict[str, int] = field(default_factory=dict)
    """Each run's next unit id, once read."""
    absent: set[tuple[str, str]] = field(default_factory=set)
    """Units looked for at the start of the batch and not found: new ones, no need to look again."""

    def look_up(self, db: sqlite3.Connection, keys: dict[str, set[str]]) -> None:
        """Read the rows of these units (by run), a query a run; remember those not found."""
        for run_id, units in keys.items():
            rows = db.execute(
                f"SELECT unit, {_COLUMNS} FROM outputs WHERE run_id=? AND unit IN "
                "(SELECT value FROM json_each(?))",
                (run_id, json.dumps(list(units))),
            )
            for key, *row in rows:
                self.units[(run_id, key)] = Unit(key, row[0], row[1], row[2], json.loads(row[3]), made=False)
            self.absent.update((run_id, key) for key in units if (run_id, key) not in self.units)

    def known(self, db: sqlite3.Connection, run_id: str, key: str) -> Unit | None:
        """The unit as the batch knows it, or as the table has it (None: a new one)."""
        unit = self.units.get((run_id, key))
        if unit is not None or (run_id, key) in self.absent:
            return unit
        row = db.execute(
            f"SELECT {_COLUMNS} FROM outputs WHERE run_id=? AND unit=?", (run_id, key)
        ).fetchone()
        if row is None:
            return None
        unit = self.units[(run_id, key)] = Unit(key, row[0], row[1], row[2], json.loads(row[3]), made=False)
        return unit

    def make(self, db: sqlite3.Connection, run_id: str, key: str) -> Unit:
        """A new unit, with the run's next id."""
        unit_id = self.next_ids.get(run_id)
        if unit_id is None:
            unit_id = db.execute(
                "SELECT coalesce(max(id), 0) + 1 FROM outputs WHERE run_id=?", (run_id,)
            ).fetchone()[0]
        self.next_ids[run_id] = unit_id + 1
        unit = self.units[(run_id, key)] = Unit(key, unit_id, 0, 0, {}, made=True)
        return unit

    def forget(self, run_id: str, key: str) -> None:
        """Its row changed behind the batch (its tail moved into its file): read it again if needed."""
        self.units.pop((run_id, key), None)
        self.absent.discard((run_id, key))


def stream_text(lines: dict[str, int]) -> str:
    """A unit's last line of each stream as `json.dumps` writes them, in a quarter of its time."""
    if all(name in protocol.STREAMS and type(last) is int for name, last in lines.items()):
        return "{" + ", ".join([f'"{name}": {last}' for name, last in lines.items()]) + "}"
    return json.dumps(lines)
