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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.limits import Limits
from pytest_mcpdebug.output.lines import cut_long_lines

OUTPUT_DIR: Final = "output"
UNITS_FILE: Final = "units.jsonl"
"""Beside a run's output files: ``[id, worker, unit]`` per unit, so they can be read without the
database (a store rebuilt after corruption recovers them)."""
MAX_BLOCK_BYTES: Final = 4 * 1024 * 1024


def unit_key(nodeid: str, worker: str) -> str:
    """A test's unit is its node id; a process's output outside tests is "" (or "@gw0" for a worker)."""
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


_SEGMENT_COLUMNS = "first, count, stream, stream_first, phase, ts, times, block, offset, length"


class Outputs:
    """Output files of one store folder; every method takes the connection to use."""

    def __init__(self, directory: Path, limits: Limits) -> None:
        self.root = directory / OUTPUT_DIR
        self.limits = limits

    # Paths ----------------------------------------------------------------------------------------

    def path(self, run_id: str, unit_id: int, block: int = 0) -> Path:
        name = f"{unit_id}.log" if block == 0 else f"{unit_id}.tail{block}.log"
        return self.root / safe_name(run_id) / name

    # Writing --------------------------------------------------------------------------------------

    def append(self, db: sqlite3.Connection, e: protocol.Output) -> int:
        """File one event's lines; returns the bytes added to the store (0 for a duplicate)."""
        row = self._unit_row(db, e)
        unit_id = row["id"]
        if db.execute(
            "SELECT 1 FROM segments WHERE run_id=? AND unit_id=? AND first=?", (e.run_id, unit_id, e.first)
        ).fetchone():
            return 0
        data = cut_long_lines(e.text.encode("utf-8", "replace"), self.limits.max_line_length)
        count = data.count(b"\n") + 1  # the text is the truth, whatever `count` claims
        times = e.times if e.times and len(e.times) == count else None
        stream = e.stream if e.stream in protocol.STREAMS else "stdout"
        split = self._split(data, count, row)
        pieces: list[tuple[int, bytes, int, int]] = []  # block, lines, index of first line, count
        if split.head_count:
            pieces.append((0, split.head, 0, split.head_count))
        block = 0
        dropped = 0
        if split.rest is not None:
            block = max(row["tail_block"], 1)
            if split.trimmed_lines:  # every tail line kept so far is older than the lines just dropped
                dropped = self._drop_tail_blocks(db, e.run_id, unit_id, keep_last=0)
                block = row["tail_block"] + 1
            else:
                current = self.path(e.run_id, unit_id, block)
                quarter = min(MAX_BLOCK_BYTES, max(self.limits.max_test_output // 8, 1))
                if current.exists() and current.stat().st_size >= quarter:
                    block += 1
            first_rest = split.head_count + split.trimmed_lines
            pieces.append((block, split.rest, first_rest, count - first_rest))
        stored = sum(self._write_segment(db, e, unit_id, stream, times, *piece) for piece in pieces)
        stream_lines = json.loads(row["stream_lines"])
        stream_lines[stream] = max(stream_lines.get(stream, 0), e.stream_first + count - 1)
        db.execute(
            "UPDATE outputs SET lines=max(lines, ?), stream_lines=?, bytes_written=bytes_written+?, "
            "bytes_stored=bytes_stored+?, head_bytes=head_bytes+?, tail_block=max(tail_block, ?), "
            "dropped_lines=dropped_lines+?, dropped_bytes=dropped_bytes+?, "
            "first_ts=min(coalesce(first_ts, ?), ?), last_ts=max(coalesce(last_ts, ?), ?) "
            "WHERE run_id=? AND id=?",
            (
                e.first + count - 1,
                json.dumps(stream_lines),
                len(data) + 1,
                stored,
                len(split.head) + 1 if split.head_count else 0,
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
            dropped += self._drop_old_tail(db, e.run_id, unit_id)
        return stored - dropped

    def _unit_row(self, db: sqlite3.Connection, e: protocol.Output) -> sqlite3.Row:
        """The unit's row in ``outputs``, created (with the run's next id) on its first lines."""
        key = unit_key(e.nodeid, e.worker)
        row: sqlite3.Row | None = db.execute(
            "SELECT * FROM outputs WHERE run_id=? AND unit=?", (e.run_id, key)
        ).fetchone()
        if row is None:
            unit_id = db.execute(
                "SELECT coalesce(max(id), 0) + 1 FROM outputs WHERE run_id=?", (e.run_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO outputs (run_id, unit, id, worker, first_ts, last_ts) VALUES (?,?,?,?,?,?)",
                (e.run_id, key, unit_id, e.worker, e.ts, e.ts),
            )
            folder = self.root / safe_name(e.run_id)
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / UNITS_FILE, "a", encoding="utf-8") as index:
                index.write(json.dumps([unit_id, e.worker, key]) + "\n")
            row = db.execute("SELECT * FROM outputs WHERE run_id=? AND unit=?", (e.run_id, key)).fetchone()
        assert row is not None
        return row

    def _split(self, data: bytes, count: int, row: sqlite3.Row) -> _Split:
        """Split one event's lines (up to a megabyte) at line ends: what still fits in the head and,
        of the rest, the last lines that fit in the tail."""
        half = self.limits.max_test_output // 2
        split = _Split(head=b"", head_count=0, rest=data)
        if row["tail_block"] == 0:
            room = half - row["head_bytes"]
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
        offset = self._write(self.path(e.run_id, unit_id, block), lines)
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

    def _write(self, path: Path, data: bytes) -> int:
        """Append; a write cut short (a full disk) is taken back, so the file keeps whole lines only."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            try:
                view, done = memoryview(data + b"\n"), 0
                while done < len(view):
                    done += os.write(fd, view[done:])
            except OSError:
                os.ftruncate(fd, offset)
                raise
        finally:
            os.close(fd)
        return offset

    def _drop_old_tail(self, db: sqlite3.Connection, run_id: str, unit_id: int) -> int:
        """Drop the oldest tail blocks while the tail is over its half of the limit."""
        budget = self.limits.max_test_output - self.limits.max_test_output // 2
        sizes = [
            r[0]
            for r in db.execute(
                "SELECT sum(length + 1) FROM segments WHERE run_id=? AND unit_id=? AND block > 0 "
                "GROUP BY block ORDER BY block",
                (run_id, unit_id),
            )
        ]
        total = sum(sizes)
        drop = 0
        while drop < len(sizes) - 1 and total > budget:  # never the block being written
            total -= sizes[drop]
            drop += 1
        return self._drop_tail_blocks(db, run_id, unit_id, keep_last=len(sizes) - drop) if drop else 0

    def _drop_tail_blocks(self, db: sqlite3.Connection, run_id: str, unit_id: int, *, keep_last: int) -> int:
        """Drop all tail blocks but the newest ``keep_last``; returns the bytes dropped."""
        blocks = db.execute(
            "SELECT block, sum(length + 1), sum(count) FROM segments WHERE run_id=? AND unit_id=? "
            "AND block > 0 GROUP BY block ORDER BY block",
            (run_id, unit_id),
        ).fetchall()
        dropped_bytes = dropped_lines = 0
        for block, size, lines in blocks[: max(len(blocks) - keep_last, 0)]:
            db.execute(
                "DELETE FROM segments WHERE run_id=? AND unit_id=? AND block=?", (run_id, unit_id, block)
            )
            self.path(run_id, unit_id, block).unlink(missing_ok=True)
            dropped_bytes += size
            dropped_lines += lines
        if dropped_bytes:
            db.execute(
                "UPDATE outputs SET bytes_stored=bytes_stored-?, dropped_bytes=dropped_bytes+?, "
                "dropped_lines=dropped_lines+? WHERE run_id=? AND id=?",
                (dropped_bytes, dropped_bytes, dropped_lines, run_id, unit_id),
            )
        return dropped_bytes

    def finish(self, db: sqlite3.Connection, run_id: str, unit: str) -> None:
        """The unit will write no more: move its kept tail into its file, after a marker for the gap."""
        row = db.execute(
            "SELECT id, tail_block, lines, dropped_lines, dropped_bytes, bytes_written FROM outputs "
            "WHERE run_id=? AND unit=?",
            (run_id, unit),
        ).fetchone()
        if row is None or row["tail_block"] == 0:
            return
        unit_id = row["id"]
        blocks = [
            r[0]
            for r in db.execute(
                "SELECT DISTINCT block FROM segments WHERE run_id=? AND unit_id=? AND block > 0 "
                "ORDER BY block",
                (run_id, unit_id),
            )
        ]
        main = self.path(run_id, unit_id)
        main.parent.mkdir(parents=True, exist_ok=True)
        with open(main, "ab") as out:
            if row["dropped_lines"]:
                out.write(self._gap_marker(db, run_id, unit_id, row).encode() + b"\n")
            for block in blocks:
                path = self.path(run_id, unit_id, block)
                base = out.tell()
                with open(path, "rb") as f:
                    shutil.copyfileobj(f, out)
                db.execute(
                    "UPDATE segments SET block=0, offset=offset+? WHERE run_id=? AND unit_id=? AND block=?",
                    (base, run_id, unit_id, block),
                )
            end = out.tell()
        for block in blocks:
            self.path(run_id, unit_id, block).unlink(missing_ok=True)
        db.execute(
            "UPDATE outputs SET tail_block=0, head_bytes=? WHERE run_id=? AND id=?", (end, run_id, unit_id)
        )

    def _gap_marker(self, db: sqlite3.Connection, run_id: str, unit_id: int, row: sqlite3.Row) -> str:
        head_end = db.execute(
            "SELECT max(first + count - 1) FROM segments WHERE run_id=? AND unit_id=? AND block=0",
            (run_id, unit_id),
        ).fetchone()[0]
        return (
            f"[mcpdebug: {row['dropped_lines']} lines ({_size(row['dropped_bytes'])}) after line "
            f"{head_end or 0} were dropped here: the test wrote {_size(row['bytes_written'])}, over "
            f"max_test_output={_size(self.limits.max_test_output)}; its first and last halves are kept. "
            "Line numbers below this marker are the test's own: this file skips the dropped ones.]"
        )

    def delete_run(self, run_id: str) -> None:
        shutil.rmtree(self.root / safe_name(run_id), ignore_errors=True)

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


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def row_dict(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["stream_lines"] = json.loads(out["stream_lines"])
    return out
