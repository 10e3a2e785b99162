"""Where captured output lives: one text file per test (a *unit*), indexed by segments in SQLite.

Each `Output` event becomes a *segment*: its lines appended to the unit's file, and a row saying
which lines (in the unit's combined numbering and within their stream) sit at which bytes. Reads
go straight to the bytes they need, so a range or a tail of a million-line output costs one small
SQL query and one read; a search streams the file a segment at a time, so memory stays bounded.

A unit's file holds its lines in order, one per line, so an agent can also open or grep it. Past
half of ``max_test_output`` further lines go to rolling *tail blocks*; when the tail outgrows the
other half its oldest block is dropped. When the test finishes, the kept tail is appended to the
file after a marker line that says which lines were dropped: head and tail survive, the middle is
counted, and line numbers stay the ones the test produced.
"""

from __future__ import annotations

import array
import json
import math
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcpdebug.store.output_tail import TailBlocks
from pytest_mcpdebug import protocol
from pytest_mcpdebug.limits import Limits
from pytest_mcpdebug.output.lines import cut_long_lines

OUTPUT_DIR: Final = "output"
UNITS_FILE: Final = "units.jsonl"
"""Beside a run's output files: ``[id, worker, unit]`` per unit, so they can be read without the
database (a store rebuilt after corruption recovers them)."""
MAX_BLOCK_BYTES: Final = 4 * 1024 * 1024


def unit_key(nodeid: str, worker: str) -> str:
    """A test's unit is its node id; a process's output outside tests is "" (or "@gw0" for a worker,
    "@linux-3:main" for a CI shard's process: each shard's of a merged run apart)."""
    if nodeid:
        return nodeid
    return "" if worker in ("", "main", "controller") else f"@{worker}"


def is_run_unit(unit: str) -> bool:
    return unit == "" or unit.startswith("@")


@dataclass(frozen=True)
class Segment:
    first: int
    count: int
    stream: str
    stream_first: int
    phase: str
    ts: float
    times: bytes | None
    block: int
    offset: int
    length: int
    """Bytes of the lines without the final newline."""

    def line_times(self) -> array.array[float] | None:
        if self.times is None:
            return None
        values = array.array("d")
        values.frombytes(self.times)
        return values


@dataclass
class _Split:
    """One event's lines divided between the head (kept whole) and the tail (the last lines kept)."""

    head: bytes
    head_count: int
    rest: bytes | None
    """Lines for the tail; None when every line went to the head."""
    trimmed_lines: int = 0
    """Lines of the rest dropped because the tail could not hold them all."""
    trimmed_bytes: int = 0


@dataclass
class _Unit:
    """A unit's row as the batch writing it left it: what `Outputs.append` reads of it."""

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


@dataclass
class _Batch:
    units: dict[tuple[str, str], _Unit] = field(default_factory=dict)
    next_ids: dict[str, int] = field(default_factory=dict)
    """Each run's next unit id, once read."""
    absent: set[tuple[str, str]] = field(default_factory=set)
    """Units looked for at the start of the batch and not found: new ones, no need to look again."""


_SEGMENT_COLUMNS = "first, count, stream, stream_first, phase, ts, times, block, offset, length"


class Outputs:
    """Output files of one store folder; every method takes the connection to use."""

    def __init__(self, directory: Path, limits: Limits) -> None:
        self.root = directory / OUTPUT_DIR
        self.limits = limits
        self.tail = TailBlocks(self.path, limits)
        self._folders: set[str] = set()
        """Run folders made already (a folder per run, asked for at each new unit: a system call each)."""
        self._run_dirs: dict[str, str] = {}
        """Each run's folder of output files, as a string (a `Path` per write costs more than the write)."""
        self._index: dict[str, list[str]] = {}
        """Lines of each run's `UNITS_FILE` not written yet: written by `flush_index`, once a batch."""
        self._batch: _Batch | None = None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """What the units of one transaction look like as it writes them (`Store.apply`): a unit's
        row is read once a batch, not at each of its events, and a new one is inserted whole.

        Entered inside the transaction (its write lock keeps any other batch out); forgotten when it
        ends, and on a rollback with the index lines of the units it had made."""
        self._batch = _Batch()
        try:
            yield
        except BaseException:
            self._index = {}
            raise
        finally:
            self._batch = None

    # Paths ----------------------------------------------------------------------------------------

    def path(self, run_id: str, unit_id: int, block: int = 0) -> Path:
        name = f"{unit_id}.log" if block == 0 else f"{unit_id}.tail{block}.log"
        return self.root / safe_name(run_id) / name

    def _file(self, run_id: str, unit_id: int, block: int) -> str:
        """`path` as a string, without making paths (the writing side's)."""
        folder = self._run_dirs.get(run_id)
        if folder is None:
            folder = self._run_dirs[run_id] = os.path.join(self.root, safe_name(run_id))
        return f"{folder}/{unit_id}.log" if block == 0 else f"{folder}/{unit_id}.tail{block}.log"

    # Writing --------------------------------------------------------------------------------------

    def append(self, db: sqlite3.Connection, e: protocol.Output) -> int:
        """File one event's lines; returns the bytes added to the store (0 for a duplicate)."""
        unit = self._unit(db, e)
        if e.first in unit.firsts or (
            not unit.made
            and db.execute(  # lines stored before this batch
                "SELECT 1 FROM segments WHERE run_id=? AND unit_id=? AND first=?",
                (e.run_id, unit.id, e.first),
            ).fetchone()
        ):
            return 0
        unit_id = unit.id
        data = cut_long_lines(e.raw(), self.limits.max_line_length)
        count = data.count(b"\n") + 1  # the text is the truth, whatever `count` claims
        times = e.times if e.times and len(e.times) == count else None
        stream = e.stream if e.stream in protocol.STREAMS else "stdout"
        split = self._split(data, count, unit.tail_block, unit.head_bytes)
        pieces: list[tuple[int, bytes, int, int]] = []  # block, lines, index of first line, count
        if split.head_count:
            pieces.append((0, split.head, 0, split.head_count))
        block = 0
        dropped = 0
        if split.rest is not None:
            block = max(unit.tail_block, 1)
            if split.trimmed_lines:  # every tail line kept so far is older than the lines just dropped
                dropped = self.tail.drop(db, e.run_id, unit_id, keep_last=0)
                block = unit.tail_block + 1
            else:
                current = self.path(e.run_id, unit_id, block)
                quarter = min(MAX_BLOCK_BYTES, max(self.limits.max_test_output // 8, 1))
                if current.exists() and current.stat().st_size >= quarter:
                    block += 1
            first_rest = split.head_count + split.trimmed_lines
            pieces.append((block, split.rest, first_rest, count - first_rest))
        stored = sum(self._write_segment(db, e, unit_id, stream, times, *piece) for piece in pieces)
        unit.firsts.add(e.first)
        unit.stream_lines[stream] = max(unit.stream_lines.get(stream, 0), e.stream_first + count - 1)
        head = len(split.head) + 1 if split.head_count else 0
        unit.head_bytes += head
        unit.tail_block = max(unit.tail_block, block)
        if unit.made and not unit.row:  # the unit's first lines: its row as they leave it
            unit.row = True
            db.execute(
                "INSERT INTO outputs (run_id, unit, id, worker, lines, stream_lines, bytes_written, "
                "bytes_stored, head_bytes, tail_block, dropped_lines, dropped_bytes, first_ts, last_ts) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    e.run_id,
                    unit.key,
                    unit_id,
                    e.worker,
                    max(e.first + count - 1, 0),
                    _stream_text(unit.stream_lines),
                    len(data) + 1,
                    stored,
                    head,
                    block,
                    split.trimmed_lines,
                    split.trimmed_bytes,
                    e.ts,
                    e.ts,
                ),
            )
        else:
            db.execute(
                "UPDATE outputs SET lines=max(lines, ?), stream_lines=?, bytes_written=bytes_written+?, "
                "bytes_stored=bytes_stored+?, head_bytes=head_bytes+?, tail_block=max(tail_block, ?), "
                "dropped_lines=dropped_lines+?, dropped_bytes=dropped_bytes+?, "
                "first_ts=min(coalesce(first_ts, ?), ?), last_ts=max(coalesce(last_ts, ?), ?) "
                "WHERE run_id=? AND id=?",
                (
                    e.first + count - 1,
                    _stream_text(unit.stream_lines),
                    len(data) + 1,
                    stored,
                    head,
                    block,
                    split.trimmed_lines,
                    split.trimmed_bytes,
                    e.ts,
                    e.ts,
                    e.ts,
                    e.ts,
                    e.run_id,
                    unit_id,
                ),
            )
        if block:
            dropped += self.tail.drop_old(db, e.run_id, unit_id)
        return stored - dropped

    def look_up(self, db: sqlite3.Connection, events: list[protocol.Event]) -> None:
        """Read the rows of the units a batch's outputs go to, a query a run (not one an event)."""
        batch = self._batch
        if batch is None:
            return
        keys: dict[str, set[str]] = {}
        for e in events:
            if type(e) is protocol.Output:
                keys.setdefault(e.run_id, set()).add(unit_key(e.nodeid, e.worker))
        for run_id, units in keys.items():
            rows = db.execute(
                "SELECT unit, id, tail_block, head_bytes, stream_lines FROM outputs WHERE run_id=? AND unit "
                "IN (SELECT value FROM json_each(?))",
                (run_id, json.dumps(list(units))),
            )
            for key, *row in rows:
                batch.units[(run_id, key)] = _Unit(
                    key, row[0], row[1], row[2], json.loads(row[3]), made=False
                )
            batch.absent.update((run_id, key) for key in units if (run_id, key) not in batch.units)

    def _unit(self, db: sqlite3.Connection, e: protocol.Output) -> _Unit:
        """The unit's row as this batch knows it; a new unit (the run's next id) on its first lines."""
        key = unit_key(e.nodeid, e.worker)
        batch = self._batch or _Batch()
        unit = batch.units.get((e.run_id, key))
        if unit is not None:
            return unit
        row = None
        if (e.run_id, key) not in batch.absent:
            row = db.execute(
                "SELECT id, tail_block, head_bytes, stream_lines FROM outputs WHERE run_id=? AND unit=?",
                (e.run_id, key),
            ).fetchone()
        if row is not None:
            unit = _Unit(key, row[0], row[1], row[2], json.loads(row[3]), made=False)
        else:
            unit_id = batch.next_ids.get(e.run_id)
            if unit_id is None:
                unit_id = db.execute(
                    "SELECT coalesce(max(id), 0) + 1 FROM outputs WHERE run_id=?", (e.run_id,)
                ).fetchone()[0]
            batch.next_ids[e.run_id] = unit_id + 1
            unit = _Unit(key, unit_id, 0, 0, {}, made=True)
            index = os.path.join(self.folder(e.run_id), UNITS_FILE)
            self._index.setdefault(index, []).append(json.dumps([unit_id, e.worker, key]) + "\n")
        batch.units[(e.run_id, key)] = unit
        return unit

    def folder(self, run_id: str) -> str:
        """The run's folder of output files, made if it is not there yet."""
        folder = self._run_dirs.get(run_id) or os.path.dirname(self._file(run_id, 0, 0))
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        return folder

    def flush_index(self) -> None:
        """Write the index lines of the units made since the last call (before the batch commits)."""
        pending, self._index = self._index, {}
        for path, lines in pending.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)  # once a batch (the folder may have gone)
            with open(path, "a", encoding="utf-8") as index:
                index.writelines(lines)

    def _split(self, data: bytes, count: int, tail_block: int, head_bytes: int) -> _Split:
        """Split one event's lines (up to a megabyte) at line ends: what still fits in the head and,
        of the rest, the last lines that fit in the tail."""
        half = self.limits.max_test_output // 2
        split = _Split(head=b"", head_count=0, rest=data)
        if tail_block == 0:
            room = half - head_bytes
            if len(data) + 1 <= room:
                split.head, split.head_count, split.rest = data, count, None
            elif room > 0:
                end = data.rfind(b"\n", 0, room)
                if end >= 0:
                    split.head, split.head_count = data[:end], data.count(b"\n", 0, end) + 1
                    split.rest = data[end + 1 :]
        tail_budget = self.limits.max_test_output - half
        rest = split.rest
        if rest is not None and len(rest) + 1 > tail_budget:
            end = rest.find(b"\n", len(rest) - tail_budget)
            if end < 0:
                end = rest.rfind(b"\n")
            if end >= 0:
                split.trimmed_lines, split.trimmed_bytes = rest.count(b"\n", 0, end) + 1, end + 1
                split.rest = rest[end + 1 :]
        return split

    def _write_segment(
        self,
        db: sqlite3.Connection,
        e: protocol.Output,
        unit_id: int,
        stream: str,
        times: list[float] | None,
        block: int,
        lines: bytes,
        index: int,
        count: int,
    ) -> int:
        """Append ``count`` lines of the event (from its ``index``-th) to a block file and index them;
        returns the bytes written."""
        self.folder(e.run_id)
        offset = self._write(self._file(e.run_id, unit_id, block), lines)
        values = (
            e.first + index,
            count,
            stream,
            e.stream_first + index,
            e.phase,
            e.ts,
            _times_blob(times[index : index + count] if times else None, count),
            block,
            offset,
            len(lines),
        )
        db.execute(
            f"INSERT INTO segments ({_SEGMENT_COLUMNS}, run_id, unit_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (*values, e.run_id, unit_id),
        )
        return len(lines) + 1

    def _write(self, path: str, data: bytes) -> int:
        """Append; a write cut short (a full disk) is taken back, so the file keeps whole lines only."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder went (evicted, set aside, deleted by hand): made again
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            try:
                done = os.writev(fd, (data, b"\n"))  # no copy of a megabyte to add its newline
                if done <= len(data):
                    view = memoryview(data + b"\n")  # cut short: the rest, rarely
                    while done < len(view):
                        done += os.write(fd, view[done:])
            except OSError:
                os.ftruncate(fd, offset)
                raise
        finally:
            os.close(fd)
        return offset

    def finish(self, db: sqlite3.Connection, run_id: str, unit: str) -> None:
        """The unit will write no more: its kept tail moves into its file (see `TailBlocks.finish`)."""
        batch = self._batch
        known = batch.units.get((run_id, unit)) if batch else None
        if known is not None and not known.tail_block:
            return  # (a unit this batch knows without a tail has none to move)
        self.tail.finish(db, run_id, unit)
        if batch:  # its row changed: read again if more lines come
            batch.units.pop((run_id, unit), None)
            batch.absent.discard((run_id, unit))

    def delete_run(self, run_id: str) -> None:
        shutil.rmtree(self.root / safe_name(run_id), ignore_errors=True)
        self._folders.discard(os.path.dirname(self._file(run_id, 0, 0)))

    # Reading --------------------------------------------------------------------------------------

    def segments(
        self, db: sqlite3.Connection, run_id: str, unit_id: int, stream: str | None = None
    ) -> list[Segment]:
        if stream is None:
            rows = db.execute(
                f"SELECT {_SEGMENT_COLUMNS} FROM segments WHERE run_id=? AND unit_id=? ORDER BY first",
                (run_id, unit_id),
            )
        else:
            rows = db.execute(
                f"SELECT {_SEGMENT_COLUMNS} FROM segments WHERE run_id=? AND unit_id=? AND stream=? "
                "ORDER BY stream_first",
                (run_id, unit_id, stream),
            )
        return [Segment(*r) for r in rows]

    def read(self, run_id: str, unit_id: int, seg: Segment) -> bytes:
        """A segment's lines (joined by newlines); empty if its file has gone (evicted meanwhile)."""
        try:
            with open(self.path(run_id, unit_id, seg.block), "rb") as f:
                return os.pread(f.fileno(), seg.length, seg.offset)
        except FileNotFoundError:
            return b""


def _stream_text(lines: dict[str, int]) -> str:
    """A unit's last line of each stream as `json.dumps` writes them, in a quarter of its time."""
    if all(name in protocol.STREAMS and type(last) is int for name, last in lines.items()):
        return "{" + ", ".join([f'"{name}": {last}' for name, last in lines.items()]) + "}"
    return json.dumps(lines)


def _times_blob(times: list[float] | None, count: int) -> bytes | None:
    if not times or len(times) != count or not all(map(math.isfinite, times)):
        return None
    return array.array("d", times).tobytes()


def safe_name(name: str) -> str:
    """``name`` as one plain file name: never empty, never ``.`` or ``..``, no separator.

    Run ids are checked at decode (`protocol.RUN_ID_PATTERN`); this holds for any that got in before.
    """
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)
    return safe if safe and not safe.startswith(".") else f"_{safe}"


def row_dict(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["stream_lines"] = json.loads(out["stream_lines"])
    return out
