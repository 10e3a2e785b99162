"""Flaky history: each test's outcome in every recorded run, and the code version each run tested.

Written by the event handlers (`record_test`, `record_failed_phase`, `record_version`) and kept when
retention evicts a run's output, so "is this failure new?" can be answered about runs long gone. The
history is bounded by runs (`HISTORY_RUNS`), not by age.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import Any, Final

from mcpdebug.store.queries import MAX_ID_QUERY
from pytest_mcpdebug import protocol

# Limits
HISTORY_RUNS: Final = 1_000
"""Runs whose test outcomes the history keeps; older rows go when a new run reports its version."""
MESSAGE_CHARS: Final = 200

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_HISTORY_OUTCOMES: Final = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "rerun")


def message_digest(message: str) -> str:
    """Failures with the same message (memory addresses aside) share a digest."""
    if not message:
        return ""
    return hashlib.sha1(_ADDRESS.sub("0x?", message).encode(), usedforsecurity=False).hexdigest()[:12]


def record_test(db: sqlite3.Connection, e: protocol.TestFinished) -> None:
    """A test (or one attempt of a rerun test) ended; its failed phase may be stored already."""
    if e.outcome not in _HISTORY_OUTCOMES:
        return
    failed = e.outcome in ("failed", "error", "rerun")
    phase = (
        failed
        and db.execute(
            "SELECT phase FROM phases WHERE run_id=? AND nodeid=? AND outcome IN ('failed', 'rerun') "
            "ORDER BY finished DESC LIMIT 1",
            (e.run_id, e.nodeid),
        ).fetchone()
    )
    db.execute(
        "INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.nodeid,
            e.run_id,
            e.attempt,
            e.outcome,
            e.duration,
            e.ts,
            phase[0] if phase and failed else "",
            message_digest(e.message) if failed else "",
            e.message[:MESSAGE_CHARS] if failed else "",
            e.worker,
        ),
    )


def record_failed_phase(db: sqlite3.Connection, e: protocol.PhaseFinished) -> None:
    """A failed phase arriving after its test's end (a spool replayed out of order) fills the gap."""
    if e.outcome in ("failed", "rerun"):
        db.execute(
            "UPDATE history SET phase=? WHERE nodeid=? AND run_id=? AND phase='' AND outcome!='passed'",
            (e.when, e.nodeid, e.run_id),
        )


def record_version(db: sqlite3.Connection, e: protocol.CodeVersion) -> None:
    db.execute(
        "INSERT OR REPLACE INTO versions VALUES (?, ?, ?, ?, ?)",
        (e.run_id, e.commit, e.changes, e.note, e.ts),
    )
    prune(db)


def prune(db: sqlite3.Connection, keep: int = HISTORY_RUNS) -> None:
    """Forget the history of all but the newest ``keep`` runs."""
    row = db.execute(
        "SELECT recorded FROM versions ORDER BY recorded DESC LIMIT 1 OFFSET ?", (keep,)
    ).fetchone()
    if row is None:
        return
    old = [r[0] for r in db.execute("SELECT run_id FROM versions WHERE recorded<=?", (row[0],))]
    db.executemany("DELETE FROM history WHERE run_id=?", [(r,) for r in old])
    db.executemany("DELETE FROM versions WHERE run_id=?", [(r,) for r in old])


def backfill(db: sqlite3.Connection) -> None:
    """A store written before the history existed: its stored tests start the history."""
    rows = db.execute(
        "SELECT t.run_id, t.nodeid, t.status, t.duration, t.finished, t.message, t.worker, "
        "(SELECT phase FROM phases p WHERE p.run_id=t.run_id AND p.nodeid=t.nodeid AND p.outcome='failed' "
        "ORDER BY finished LIMIT 1) AS phase FROM tests t WHERE t.finished IS NOT NULL"
    ).fetchall()
    for r in rows:
        if r[2] not in _HISTORY_OUTCOMES:
            continue
        failed = r[2] in ("failed", "error")
        db.execute(
            "INSERT OR IGNORE INTO history VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
            (
                r[1],
                r[0],
                r[2],
                r[3] or 0.0,
                r[4],
                (r[7] or "") if failed else "",
                message_digest(r[5]) if failed else "",
                (r[5] or "")[:MESSAGE_CHARS] if failed else "",
                r[6],
            ),
        )
    db.execute(
        "INSERT OR IGNORE INTO versions (run_id, note, recorded) SELECT run_id, "
        "'recorded before code versions were kept', started FROM runs"
    )


class HistoryQueries:
    """Reads of the history (a mixin of `Store`)."""

    @property
    def db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def test_history(self, nodeid: str, limit: int = 20, before: float | None = None) -> list[dict[str, Any]]:
        """A test's entries, newest first, each with its run's code version (``commit``, ``changes``)."""
        sql = (
            "SELECT h.*, coalesce(v.commit_id, '') AS commit_id, coalesce(v.changes, '') AS changes, "
            "coalesce(v.note, 'no code version recorded') AS version_note FROM history h "
            "LEFT JOIN versions v USING (run_id) WHERE h.nodeid=?"
        )
        params: list[Any] = [nodeid]
        if before is not None:
            sql += " AND h.finished<?"
            params.append(before)
        sql += " ORDER BY h.finished DESC, h.attempt DESC LIMIT ?"
        params.append(limit)
        return [dict(r) for r in self.db.execute(sql, params)]

    def history_nodeids(self, query: str, limit: int = 20) -> list[str]:
        """Node ids in the history that contain ``query``."""
        if len(query) > MAX_ID_QUERY:  # no node id is this long, and SQLite refuses such LIKE patterns
            return []
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.db.execute(
            "SELECT DISTINCT nodeid FROM history WHERE nodeid LIKE ? ESCAPE '\\' ORDER BY nodeid LIMIT ?",
            (f"%{escaped}%", limit),
        )
        return [r[0] for r in rows]

    def history_runs(self, runs: int) -> list[str]:
        """The newest ``runs`` run ids the history knows, newest first."""
        rows = self.db.execute(
            "SELECT run_id, max(finished) AS last FROM history GROUP BY run_id ORDER BY last DESC LIMIT ?",
            (runs,),
        )
        return [r[0] for r in rows]

    def history_of_runs(self, run_ids: list[str]) -> list[dict[str, Any]]:
        """Every entry of these runs, with code versions: the input of `list_flaky`."""
        if not run_ids:
            return []
        marks = ",".join("?" * len(run_ids))
        rows = self.db.execute(
            "SELECT h.*, coalesce(v.commit_id, '') AS commit_id, coalesce(v.changes, '') AS changes "
            f"FROM history h LEFT JOIN versions v USING (run_id) WHERE h.run_id IN ({marks}) "
            "ORDER BY h.finished",
            run_ids,
        )
        return [dict(r) for r in rows]

    def code_version(self, run_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM versions WHERE run_id=?", (run_id,)).fetchone()
        return dict(row) if row else None
