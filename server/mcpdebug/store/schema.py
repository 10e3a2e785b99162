"""The store's tables, and the migration of stores written by older versions."""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

from mcpdebug.store.shards import SCHEMA as SHARDS_SCHEMA
from pytest_mcpdebug import protocol

if TYPE_CHECKING:
    from mcpdebug.store.output_files import Outputs

SCHEMA_VERSION = 4

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL DEFAULT 'pytest',
    label TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    args TEXT NOT NULL DEFAULT '[]',
    rootdir TEXT NOT NULL DEFAULT '',
    cwd TEXT NOT NULL DEFAULT '',
    python TEXT NOT NULL DEFAULT '',
    pytest_version TEXT NOT NULL DEFAULT '',
    plugin_version TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER,
    workers INTEGER NOT NULL DEFAULT 0,
    started REAL NOT NULL,
    finished REAL,
    duration REAL,
    exit_status INTEGER,
    collected INTEGER,
    pytest_counts TEXT NOT NULL DEFAULT '{}',
    last_event REAL NOT NULL,
    bytes INTEGER NOT NULL DEFAULT 0,
    stored REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS processes (
    run_id TEXT NOT NULL,
    process TEXT NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    pid INTEGER,
    host TEXT NOT NULL DEFAULT '',
    started REAL,
    finished REAL,
    PRIMARY KEY (run_id, process)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    process TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (run_id, process, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tests (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    file TEXT NOT NULL DEFAULT '',
    line INTEGER,
    status TEXT NOT NULL DEFAULT 'running',
    started REAL,
    finished REAL,
    duration REAL,
    message TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, nodeid)
);
CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    phase TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration REAL NOT NULL,
    finished REAL NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    longrepr TEXT NOT NULL DEFAULT '',
    wasxfail TEXT,
    PRIMARY KEY (run_id, nodeid, phase)
);
CREATE TABLE IF NOT EXISTS collection_errors (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    message TEXT NOT NULL,
    longrepr TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, nodeid)
);
CREATE TABLE IF NOT EXISTS failures (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    phase TEXT NOT NULL,
    finished REAL NOT NULL,
    snapshot TEXT NOT NULL,
    PRIMARY KEY (run_id, nodeid, phase)
);
CREATE TABLE IF NOT EXISTS holds (
    run_id TEXT NOT NULL,
    session TEXT NOT NULL,
    nodeid TEXT NOT NULL DEFAULT '',
    worker TEXT NOT NULL DEFAULT '',
    process TEXT NOT NULL DEFAULT '',
    phase TEXT NOT NULL DEFAULT '',
    held REAL,
    timeout REAL NOT NULL DEFAULT 0,
    resumed REAL,
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, session)
);
CREATE TABLE IF NOT EXISTS hangs (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    phase TEXT NOT NULL DEFAULT '',
    worker TEXT NOT NULL DEFAULT '',
    detected REAL NOT NULL,
    kind TEXT NOT NULL,
    summary TEXT NOT NULL,
    report TEXT NOT NULL,
    PRIMARY KEY (run_id, nodeid)
);
CREATE TABLE IF NOT EXISTS attempts (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    duration REAL NOT NULL DEFAULT 0,
    finished REAL NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    phase TEXT NOT NULL DEFAULT '',
    longrepr TEXT NOT NULL DEFAULT '',
    hang TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, nodeid, attempt)
);
CREATE TABLE IF NOT EXISTS spool_files (
    name TEXT PRIMARY KEY,
    offset INTEGER NOT NULL DEFAULT 0
);
-- Process sessions (`mcpdebug run`, `mcpdebug forward`, managed processes): runs of kind 'process'
-- whose output is their unit "" and whose process's state changes are kept in `process_states`.
CREATE TABLE IF NOT EXISTS process_sessions (
    run_id TEXT PRIMARY KEY,
    mode TEXT NOT NULL DEFAULT 'run',
    requested TEXT NOT NULL DEFAULT '',
    command TEXT NOT NULL DEFAULT '[]',
    cwd TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    capabilities TEXT NOT NULL DEFAULT '[]',
    restart TEXT NOT NULL DEFAULT 'no',
    parent_run TEXT NOT NULL DEFAULT '',
    parent_worker TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    status_seq INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    exit_code INTEGER,
    message TEXT NOT NULL DEFAULT '',
    exited REAL
);
CREATE TABLE IF NOT EXISTS process_states (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    status TEXT NOT NULL,
    pid INTEGER,
    exit_code INTEGER,
    message TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started);
CREATE INDEX IF NOT EXISTS runs_by_label ON runs (label);
-- A run's counts by outcome (every summary): a scan of this index, not of 100,000 tests' rows.
CREATE INDEX IF NOT EXISTS tests_by_status ON tests (run_id, status);
-- Captured output: one row per unit (a test, or a process's output outside tests), one per segment.
CREATE TABLE IF NOT EXISTS outputs (
    run_id TEXT NOT NULL,
    unit TEXT NOT NULL,
    id INTEGER NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    lines INTEGER NOT NULL DEFAULT 0,
    stream_lines TEXT NOT NULL DEFAULT '{}',
    bytes_written INTEGER NOT NULL DEFAULT 0,
    bytes_stored INTEGER NOT NULL DEFAULT 0,
    head_bytes INTEGER NOT NULL DEFAULT 0,
    tail_block INTEGER NOT NULL DEFAULT 0,
    dropped_lines INTEGER NOT NULL DEFAULT 0,
    dropped_bytes INTEGER NOT NULL DEFAULT 0,
    first_ts REAL,
    last_ts REAL,
    PRIMARY KEY (run_id, unit)
);
CREATE UNIQUE INDEX IF NOT EXISTS outputs_by_id ON outputs (run_id, id);
CREATE TABLE IF NOT EXISTS segments (
    run_id TEXT NOT NULL,
    unit_id INTEGER NOT NULL,
    first INTEGER NOT NULL,
    count INTEGER NOT NULL,
    stream TEXT NOT NULL,
    stream_first INTEGER NOT NULL,
    phase TEXT NOT NULL DEFAULT '',
    ts REAL NOT NULL,
    times BLOB,
    block INTEGER NOT NULL DEFAULT 0,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (run_id, unit_id, first)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS segments_by_stream ON segments (run_id, unit_id, stream, stream_first);
-- Flaky history: one row per test and run (per attempt of a rerun test) and each run's code version.
-- Retention deletes runs, never these rows: a test's history outlives its runs' output.
CREATE TABLE IF NOT EXISTS history (
    nodeid TEXT NOT NULL,
    run_id TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    outcome TEXT NOT NULL,
    duration REAL NOT NULL DEFAULT 0,
    finished REAL NOT NULL,
    phase TEXT NOT NULL DEFAULT '',
    digest TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    worker TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (nodeid, run_id, attempt)
);
CREATE INDEX IF NOT EXISTS history_by_run ON history (run_id);
CREATE TABLE IF NOT EXISTS versions (
    run_id TEXT PRIMARY KEY,
    commit_id TEXT NOT NULL DEFAULT '',
    changes TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    recorded REAL NOT NULL
);
-- Per-test coverage data files (--mcp-debug-coverage) and value traces (trace_test) of a run.
CREATE TABLE IF NOT EXISTS coverage_files (
    run_id TEXT NOT NULL,
    process TEXT NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    path TEXT NOT NULL,
    tests INTEGER NOT NULL DEFAULT 0,
    files INTEGER NOT NULL DEFAULT 0,
    combined INTEGER NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT '',
    recorded REAL NOT NULL,
    PRIMARY KEY (run_id, process)
);
CREATE TABLE IF NOT EXISTS traces (
    run_id TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    recorded REAL NOT NULL,
    lines INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0,
    dropped INTEGER NOT NULL DEFAULT 0,
    trace TEXT NOT NULL,
    PRIMARY KEY (run_id, nodeid)
);
CREATE INDEX IF NOT EXISTS traces_by_test ON traces (nodeid, recorded);
-- What the dynamic localizer (`localize`) found for a run's failures: the newest one counts.
CREATE TABLE IF NOT EXISTS localizations (
    run_id TEXT NOT NULL,
    process TEXT NOT NULL,
    recorded REAL NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (run_id, process)
);
"""
    + SHARDS_SCHEMA
)


def schema_version(db: sqlite3.Connection) -> int | None:
    """The schema a database was written with; None for a new database."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone():
        return None
    row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    return int(row[0]) if row else None


def migrate(db: sqlite3.Connection, outputs: Outputs, version: int) -> None:
    """Bring a store of schema ``version`` up to `SCHEMA_VERSION`, in the caller's transaction.

    Schema 1 kept each phase's output in columns of `phases`: it moves into output files. Schema 3
    added the flaky history (filled from the stored tests), coverage files and value traces; schema 4
    each shard's machine (CPUs, encodings, user: `recording.machine`)."""
    if version < 2:
        db.execute("ALTER TABLE runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0")
        db.execute("ALTER TABLE runs ADD COLUMN stored REAL NOT NULL DEFAULT 0")
        db.execute("UPDATE runs SET stored=?", (time.time(),))
        rows = db.execute(
            "SELECT p.run_id, p.nodeid, p.phase, p.finished, p.stdout, p.stderr, p.log, "
            "t.worker FROM phases p LEFT JOIN tests t USING (run_id, nodeid) "
            "ORDER BY p.run_id, p.nodeid, p.finished"
        ).fetchall()
        numbers: dict[tuple[str, str], dict[str, int]] = {}
        for r in rows:
            counters = numbers.setdefault((r["run_id"], r["nodeid"]), {})
            for stream in ("stdout", "stderr", "log"):
                text = (r[stream] or "").rstrip("\n")
                if not text:
                    continue
                count = text.count("\n") + 1
                first = counters.get("", 0) + 1
                stream_first = counters.get(stream, 0) + 1
                outputs.append(
                    db,
                    protocol.Output(
                        run_id=r["run_id"],
                        process="migrated",
                        seq=0,
                        ts=r["finished"],
                        nodeid=r["nodeid"],
                        worker=r["worker"] or "",
                        phase=r["phase"],
                        stream=stream,
                        first=first,
                        stream_first=stream_first,
                        count=count,
                        text=text,
                    ),
                )
                counters[""] = first + count - 1
                counters[stream] = stream_first + count - 1
        for column in ("stdout", "stderr", "log"):
            db.execute(f"ALTER TABLE phases DROP COLUMN {column}")
        db.execute(
            "UPDATE runs SET bytes = (SELECT coalesce(sum(bytes_stored), 0) FROM outputs o "
            "WHERE o.run_id = runs.run_id)"
        )
    if version < 3:  # the history starts with the runs already stored
        from mcpdebug.store.history import backfill

        backfill(db)
    if version < 4 and "machine" not in {r[1] for r in db.execute("PRAGMA table_info(shards)")}:
        # (a store from before shards has the table new, made by SCHEMA, with its machine column)
        db.execute("ALTER TABLE shards ADD COLUMN machine TEXT NOT NULL DEFAULT '{}'")
    db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))
