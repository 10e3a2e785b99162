"""Reading the store: runs, tests, phases, failures, hangs, holds (a mixin of `Store`)."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterable
from typing import Any

from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import pid_alive

PHASE_ORDER = {"setup": 0, "call": 1, "teardown": 2}
FINAL_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
PROBLEM_OUTCOMES = ("failed", "error")
MAX_ID_QUERY = 10_000
"""Longest part of an id searched for with LIKE: SQLite refuses longer patterns, and no id is this long."""


class Queries:
    """Every read of the store. ``db`` is the calling thread's connection (see `Store.db`)."""

    @property
    def db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def refresh_liveness(self) -> None:
        raise NotImplementedError

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        self.refresh_liveness()
        sql = "SELECT * FROM runs ORDER BY started DESC, run_id DESC"
        rows = self.db.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ()).fetchall()
        return [self._run_dict(r) for r in rows]

    def run_ids(self, limit: int = 10) -> list[str]:
        return [
            r[0]
            for r in self.db.execute(
                "SELECT run_id FROM runs ORDER BY started DESC, run_id DESC LIMIT ?", (limit,)
            )
        ]

    def resolve_run(self, run_id: str | None) -> str | None:
        """``latest`` (or nothing) means the newest test run; a session's label means its newest
        session with that label (a process session's, such as "backend"); a unique prefix of an id
        is accepted too."""
        if not run_id or run_id == "latest":
            row = self.db.execute(
                "SELECT run_id FROM runs WHERE kind != 'process' ORDER BY started DESC, run_id DESC LIMIT 1"
            ).fetchone()
            return row[0] if row else None
        if self.db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
            return run_id
        row = self.db.execute(
            "SELECT run_id FROM runs WHERE label=? ORDER BY started DESC, run_id DESC LIMIT 1", (run_id,)
        ).fetchone()
        if row is not None:
            return str(row[0])
        if len(run_id) > MAX_ID_QUERY:  # no run id is this long (and SQLite refuses LIKE patterns over 50 KB)
            return None
        rows = self.db.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' LIMIT 2", (_like_prefix(run_id),)
        ).fetchall()
        return rows[0][0] if len(rows) == 1 else None

    def run(self, run_id: str) -> dict[str, Any] | None:
        self.refresh_liveness()
        row = self.db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return self._run_dict(row) if row else None

    def counts(self, run_id: str) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM tests WHERE run_id=? GROUP BY status", (run_id,))
        return {status: n for status, n in rows}

    def tests(self, run_id: str, outcomes: Iterable[str] | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM tests WHERE run_id=?"
        params: list[Any] = [run_id]
        wanted = list(outcomes or [])
        if wanted:
            sql += f" AND status IN ({','.join('?' * len(wanted))})"
            params += wanted
        sql += " ORDER BY COALESCE(started, finished), nodeid"
        return [dict(r) for r in self.db.execute(sql, params)]

    def tests_page(
        self, run_id: str, outcomes: Iterable[str], offset: int, limit: int | None
    ) -> tuple[list[dict[str, Any]], int]:
        """`tests` from ``offset``, at most ``limit`` (None: all), and how many there are in all."""
        wanted = list(outcomes)
        where = f"run_id=? AND status IN ({','.join('?' * len(wanted))})"
        total = self.db.execute(f"SELECT count(*) FROM tests WHERE {where}", (run_id, *wanted)).fetchone()[0]
        rows = self.db.execute(
            f"SELECT * FROM tests WHERE {where} ORDER BY COALESCE(started, finished), nodeid "
            "LIMIT ? OFFSET ?",
            (run_id, *wanted, -1 if limit is None else limit, offset),
        )
        return [dict(r) for r in rows], int(total)

    def test(self, run_id: str, nodeid: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM tests WHERE run_id=? AND nodeid=?", (run_id, nodeid)).fetchone()
        return dict(row) if row else None

    def find_tests(self, run_id: str, query: str, limit: int = 20) -> list[str]:
        """Node ids of the run that contain ``query`` (for a test given by part of its id)."""
        if len(query) > MAX_ID_QUERY:
            return []
        rows = self.db.execute(
            "SELECT nodeid FROM tests WHERE run_id=? AND nodeid LIKE ? ESCAPE '\\' ORDER BY nodeid LIMIT ?",
            (run_id, "%" + _like_escape(query) + "%", limit),
        )
        return [r[0] for r in rows]

    def phases(self, run_id: str, nodeid: str) -> list[dict[str, Any]]:
        rows = [
            dict(r)
            for r in self.db.execute("SELECT * FROM phases WHERE run_id=? AND nodeid=?", (run_id, nodeid))
        ]
        return sorted(rows, key=lambda r: PHASE_ORDER.get(r["phase"], 9))

    def problems(self, run_id: str) -> list[dict[str, Any]]:
        """Each failed or errored phase of the run, in execution order. A failed phase makes its test
        failed or errored (running until it ends): found from those tests (`tests_by_status`), not
        by reading every phase of a 100,000-test run."""
        rows = self.db.execute(
            "SELECT p.*, t.status AS test_status, t.worker FROM tests t "
            "JOIN phases p ON p.run_id = t.run_id AND p.nodeid = t.nodeid "
            "WHERE t.run_id=? AND t.status IN ('failed', 'error', 'running', 'xpassed', 'unknown') "
            "AND p.outcome='failed' ORDER BY p.finished",
            (run_id,),
        )
        return [dict(r) for r in rows]

    def holds(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Tests held for an agent (``--mcp-debug-break``), oldest first; ``resumed`` is None while held."""
        sql = "SELECT * FROM holds" + (" WHERE run_id=?" if run_id else "") + " ORDER BY held"
        return [dict(r) for r in self.db.execute(sql, (run_id,) if run_id else ())]

    def has_event(self, run_id: str, process: str, seq: int) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM events WHERE run_id=? AND process=? AND seq=?", (run_id, process, seq)
        ).fetchone()
        return row is not None

    def attempts(self, run_id: str, nodeid: str) -> list[dict[str, Any]]:
        """The attempts of a test that was run again (pytest-rerunfailures), first first; [] if once."""
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE run_id=? AND nodeid=? ORDER BY attempt", (run_id, nodeid)
        )
        return [dict(r) for r in rows]

    def hangs(self, run_id: str, nodeid: str | None = None) -> list[dict[str, Any]]:
        """Hang reports of a run (or of one test), in the order they were detected; ``report`` decoded."""
        sql = "SELECT * FROM hangs WHERE run_id=?" + (" AND nodeid=?" if nodeid is not None else "")
        rows = self.db.execute(
            sql + " ORDER BY detected", (run_id, nodeid) if nodeid is not None else (run_id,)
        )
        out = []
        for row in rows:
            hang = dict(row)
            hang["report"] = protocol.decode_hang_report(hang["report"])
            out.append(hang)
        return out

    def failures(
        self, run_id: str, nodeid: str | None = None, *, decoded: bool = True
    ) -> list[dict[str, Any]]:
        """Failure snapshots of a run (or of one test), in the order they happened (``decoded``: else
        each snapshot as its stored JSON, for `protocol.decode_snapshot` to read when it is shown)."""
        sql = (
            "SELECT * FROM failures WHERE run_id=?"
            + (" AND nodeid=?" if nodeid else "")
            + " ORDER BY finished"
        )
        rows = self.db.execute(sql, (run_id, nodeid) if nodeid else (run_id,)).fetchall()
        if not decoded:
            return [dict(r) for r in rows]
        return [{**dict(r), "snapshot": protocol.decode_snapshot(r["snapshot"])} for r in rows]

    def collection_errors(self, run_id: str) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in self.db.execute(
                "SELECT * FROM collection_errors WHERE run_id=? ORDER BY nodeid", (run_id,)
            )
        ]

    def processes(self, run_id: str) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in self.db.execute("SELECT * FROM processes WHERE run_id=? ORDER BY worker", (run_id,))
        ]

    def process_sessions(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Process sessions (`mcpdebug run`, `mcpdebug forward`, managed), newest first: the run's
        columns, the process's (``mode``, ``pid`` of the command, ``exit_code``, ...), ``restarts``
        and the lines and bytes stored."""
        self.refresh_liveness()
        rows = self.db.execute(
            "SELECT r.run_id, r.label, r.status AS run_status, r.host, r.pid AS runner_pid, r.started, "
            "r.finished, r.last_event, p.*, coalesce(o.lines, 0) AS lines, "
            "coalesce(o.bytes_stored, 0) AS bytes, coalesce(o.dropped_lines, 0) AS dropped_lines, "
            "(SELECT count(*) FROM process_states s WHERE s.run_id = r.run_id AND s.status = 'restarting') "
            "AS restarts FROM runs r JOIN process_sessions p USING (run_id) "
            "LEFT JOIN outputs o ON o.run_id = r.run_id AND o.unit = '' "
            + ("WHERE r.run_id=? " if run_id else "")
            + "ORDER BY r.started DESC, r.run_id DESC",
            (run_id,) if run_id else (),
        ).fetchall()
        sessions = []
        for row in rows:
            session = dict(row)
            session["command"] = json.loads(session["command"])
            session["capabilities"] = json.loads(session["capabilities"])
            if session["run_status"] == "crashed" and session["status"] == "running":
                session["status"] = "crashed"  # its runner died without a word (see refresh_liveness)
                session["message"] = session["message"] or "its runner process ended without reporting"
            sessions.append(session)
        return sessions

    def process_states(self, run_id: str) -> list[dict[str, Any]]:
        """A process session's state changes, oldest first."""
        return [
            dict(r)
            for r in self.db.execute("SELECT * FROM process_states WHERE run_id=? ORDER BY seq", (run_id,))
        ]

    def spool_offset(self, name: str) -> int:
        row = self.db.execute("SELECT offset FROM spool_files WHERE name=?", (name,)).fetchone()
        return int(row[0]) if row else 0

    def set_spool_offset(self, name: str, offset: int | None) -> None:
        if offset is None:
            self.db.execute("DELETE FROM spool_files WHERE name=?", (name,))
        else:
            self.db.execute(
                "INSERT INTO spool_files VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                "offset=excluded.offset",
                (name, offset),
            )

    def process_known(self, run_id: str, process: str) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM processes WHERE run_id=? AND process=?", (run_id, process)
        ).fetchone()
        return row is not None

    def process_done(self, run_id: str, process: str) -> bool:
        """Whether a process will send nothing more: it said goodbye, or it died on this host."""
        row = self.db.execute(
            "SELECT finished, pid, host FROM processes WHERE run_id=? AND process=?", (run_id, process)
        ).fetchone()
        if row is None:
            return False
        if row["finished"] is not None:
            return True
        return bool(row["host"] == socket.gethostname() and row["pid"] and not pid_alive(row["pid"]))

    def _run_dict(self, row: sqlite3.Row) -> dict[str, Any]:
        run = dict(row)
        run["args"] = json.loads(run["args"])
        run["pytest_counts"] = json.loads(run["pytest_counts"])
        run["counts"] = self.counts(run["run_id"])
        run["collection_errors"] = self.db.execute(
            "SELECT count(*) FROM collection_errors WHERE run_id=?", (run["run_id"],)
        ).fetchone()[0]
        return run


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_prefix(text: str) -> str:
    return _like_escape(text) + "%"
