"""The kept tail of an over-long output: rolling blocks past half of ``max_test_output``, the oldest
dropped first, moved into the unit's file after a marker for the gap when the unit finishes."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from pytest_mcpdebug.limits import Limits


class TailBlocks:
    """The tail blocks of one store folder's units; every method takes the connection to use."""

    def __init__(self, path: Callable[[str, int, int], Path], limits: Limits) -> None:
        self.path = path
        """Where a unit's block is (`Outputs.path`)."""
        self.limits = limits

    def drop_old(self, db: sqlite3.Connection, run_id: str, unit_id: int) -> int:
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
        return self.drop(db, run_id, unit_id, keep_last=len(sizes) - drop) if drop else 0

    def drop(self, db: sqlite3.Connection, run_id: str, unit_id: int, *, keep_last: int) -> int:
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
        main = self.path(run_id, unit_id, 0)
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


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
