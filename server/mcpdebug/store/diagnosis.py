"""Where a run's per-test coverage is, and the value traces of its tests: handlers and reads.

Coverage stays in the coverage.py data files the test processes wrote (`pytest_mcpdebug.coverage.data`
reads them); the store keeps which files a run has. A trace is stored as it was sent.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from mcpdebug.store.queries import MAX_ID_QUERY
from pytest_mcpdebug import protocol

_trace_decoder = msgspec.json.Decoder(protocol.Trace)
_localization_decoder = msgspec.json.Decoder(protocol.Localization)


def record_coverage(db: sqlite3.Connection, e: protocol.CoverageRecorded) -> None:
    db.execute(
        "INSERT OR REPLACE INTO coverage_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (e.run_id, e.process, e.worker, e.path, e.tests, e.files, int(e.combined), e.note, e.ts),
    )


def record_trace(db: sqlite3.Connection, e: protocol.ValueTrace) -> None:
    db.execute(
        "INSERT OR REPLACE INTO traces VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.run_id,
            e.nodeid,
            e.worker,
            e.outcome,
            e.ts,
            e.trace.lines,
            len(e.trace.steps),
            e.trace.dropped,
            protocol.encode_value(e.trace),
        ),
    )


def record_localization(db: sqlite3.Connection, e: protocol.Localization) -> None:
    db.execute(
        "INSERT OR REPLACE INTO localizations VALUES (?, ?, ?, ?)",
        (e.run_id, e.process, e.ts, protocol.encode_value(e)),
    )


class DiagnosisQueries:
    """Reads of coverage files and traces (a mixin of `Store`)."""

    @property
    def db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def coverage_files(self, run_id: str) -> list[dict[str, Any]]:
        """The run's coverage data files as announced: the combined one first."""
        rows = self.db.execute(
            "SELECT * FROM coverage_files WHERE run_id=? ORDER BY combined DESC, process", (run_id,)
        )
        return [dict(r) for r in rows]

    def trace(self, run_id: str | None, nodeid: str) -> dict[str, Any] | None:
        """A test's trace in ``run_id``, or its newest trace (``run_id`` None); ``trace`` decoded."""
        if run_id is None:
            row = self.db.execute(
                "SELECT * FROM traces WHERE nodeid=? ORDER BY recorded DESC LIMIT 1", (nodeid,)
            ).fetchone()
        else:
            row = self.db.execute(
                "SELECT * FROM traces WHERE run_id=? AND nodeid=?", (run_id, nodeid)
            ).fetchone()
        if row is None:
            return None
        found = dict(row)
        found["trace"] = _trace_decoder.decode(found["trace"])
        return found

    def localization(self, run_id: str) -> protocol.Localization | None:
        """The newest result of the dynamic localizer for the run's failures, if it ran."""
        row = self.db.execute(
            "SELECT result FROM localizations WHERE run_id=? ORDER BY recorded DESC LIMIT 1", (run_id,)
        ).fetchone()
        return None if row is None else _localization_decoder.decode(row[0])

    def traced_tests(self, query: str, limit: int = 20) -> list[str]:
        """Node ids with a trace that contain ``query``."""
        if len(query) > MAX_ID_QUERY:  # no node id is this long, and SQLite refuses such LIKE patterns
            return []
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.db.execute(
            "SELECT DISTINCT nodeid FROM traces WHERE nodeid LIKE ? ESCAPE '\\' ORDER BY nodeid LIMIT ?",
            (f"%{escaped}%", limit),
        )
        return [r[0] for r in rows]
