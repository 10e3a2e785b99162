"""The embedded store: one SQLite database (WAL) in the `.mcpdebug/` folder.

Only the server and the CLI write it, and both write only through `apply`, which is idempotent:
an event whose ``(run_id, process, seq)`` is already stored changes nothing. Handlers also tolerate
any arrival order (a worker's test events may arrive before the controller's ``run_started``; a
spool replayed late may deliver ``test_started`` after ``test_finished``).
"""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_mcpdebug import protocol
from pytest_mcpdebug.layout import SPOOL_DIR, STORE_FILE, ensure_dir, pid_alive
from pytest_mcpdebug.limits import Limits

from . import outstore
from .outstore import Outputs, unit_key

SCHEMA_VERSION = 2
EVENT_BYTES = 200
"""What a stored event costs, roughly (its rows and indexes), for the store-size limit."""

log = logging.getLogger("mcpdebug.store")

_SCHEMA = (
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
CREATE TABLE IF NOT EXISTS spool_files (
    name TEXT PRIMARY KEY,
    offset INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started);
"""
    + outstore.SCHEMA
)

PHASE_ORDER = {"setup": 0, "call": 1, "teardown": 2}
FINAL_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
PROBLEM_OUTCOMES = ("failed", "error")


class StoreError(Exception):
    """A store that cannot be opened or used; the message says what to do."""


class Store:
    """The store of one `.mcpdebug/` folder.

    Each thread gets its own SQLite connection (tools run in worker threads while the event loop
    ingests): WAL lets readers see a consistent snapshot while one writer commits.
    """

    def __init__(self, directory: Path, *, create: bool = True, limits: Limits | None = None) -> None:
        self.dir = directory
        self.limits = limits or Limits()
        path = directory / STORE_FILE
        if not create and not path.exists() and not (directory / SPOOL_DIR).is_dir():
            raise StoreError(
                f"no recorded runs in {directory} (no {STORE_FILE}); record one with `pytest --mcp-debug`"
            )
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._known_runs: set[str] = set()
        self.outputs = Outputs(directory, self.limits)
        try:
            ensure_dir(directory)
            db = self.db
            fresh = not db.execute("SELECT 1 FROM sqlite_master WHERE name='runs'").fetchone()
            if fresh:
                db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # lets eviction give space back
            version = self._schema_version(db)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} was written by a newer pytest-mcpdebug (schema {version}); "
                    "upgrade pytest-mcpdebug to read it"
                )
            db.executescript(_SCHEMA)
            if version is None:
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif version < SCHEMA_VERSION:
                self._migrate(version)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from exc

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            with self._connections_lock:
                self._connections.append(db)
        return db

    def close(self) -> None:
        with self._connections_lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @staticmethod
    def _schema_version(db: sqlite3.Connection) -> int | None:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone():
            return None
        row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        return int(row[0]) if row else None

    def _migrate(self, version: int) -> None:
        """Schema 1 kept each phase's output in columns of `phases`: move it into output files."""
        with self.transaction() as db:
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
                        self.outputs.append(
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
            db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))

    # Writing --------------------------------------------------------------------------------------

    def apply(self, events: Iterable[protocol.Event]) -> int:
        """Store a batch of events in one transaction; returns how many were new."""
        new = 0
        span: dict[str, tuple[float, float]] = {}  # run -> (first, last) timestamp of its new events
        grown: dict[str, int] = {}  # run -> bytes its new events add to the store
        created: set[str] = set()
        finished = False
        with self.transaction() as db:
            for event in events:
                cur = db.execute(
                    "INSERT OR IGNORE INTO events VALUES (?, ?, ?)", (event.run_id, event.process, event.seq)
                )
                if cur.rowcount:
                    new += 1
                    first, last = span.get(event.run_id, (event.ts, event.ts))
                    span[event.run_id] = (min(first, event.ts), max(last, event.ts))
                    if event.run_id not in self._known_runs and event.run_id not in created:
                        _touch_run(db, event.run_id, event.ts, event.ts)  # handlers UPDATE this row
                        created.add(event.run_id)
                    size = EVENT_BYTES
                    if isinstance(event, protocol.Output):
                        size += self.outputs.append(db, event)
                    else:
                        _HANDLERS[type(event)](db, event)
                        if isinstance(event, protocol.TestFinished):
                            self.outputs.finish(db, event.run_id, event.nodeid)
                        elif isinstance(event, protocol.ProcessFinished):
                            self._finish_process_output(db, event)
                        elif isinstance(event, protocol.RunFinished):
                            finished = True
                    grown[event.run_id] = grown.get(event.run_id, 0) + size
            for run_id, (first, last) in span.items():
                _touch_run(db, run_id, first, last, grown.get(run_id, 0))
        self._known_runs |= created  # only once committed
        if created or finished:
            self.enforce_retention()
        return new

    def _finish_process_output(self, db: sqlite3.Connection, e: protocol.Event) -> None:
        row = db.execute(
            "SELECT worker FROM processes WHERE run_id=? AND process=?", (e.run_id, e.process)
        ).fetchone()
        if row is not None:
            self.outputs.finish(db, e.run_id, unit_key("", row["worker"]))

    # Retention --------------------------------------------------------------------------------------

    def enforce_retention(self, now: float | None = None) -> list[str]:
        """Evict the oldest runs beyond the limits (count, total size, age); returns their ids.

        A run still recording is kept unless it is older than the age limit (it may be a run whose
        process died long ago). Age counts from the run's last event or from when this store last
        received some of it, whichever is later: a CI run's spool opened a month later is kept.
        """
        now = time.time() if now is None else now
        limits = self.limits
        rows = self.db.execute(
            "SELECT run_id, status, max(last_event, stored) AS seen, bytes FROM runs "
            "ORDER BY started DESC, run_id DESC"
        ).fetchall()
        evict: list[str] = []
        total = 0
        kept = 0
        for row in rows:
            old = row["seen"] < now - limits.max_age
            total += row["bytes"]
            over = kept >= limits.max_runs or total > limits.max_store_size
            if old or (over and row["status"] != "running" and kept > 0):
                evict.append(row["run_id"])
                total -= row["bytes"]
            else:
                kept += 1
        if evict:
            self.delete_runs(evict)
            log.info("evicted %d old run(s): %s", len(evict), ", ".join(evict))
        return evict

    def delete_runs(self, run_ids: list[str]) -> None:
        with self.transaction() as db:
            for table in (
                "runs",
                "processes",
                "events",
                "tests",
                "phases",
                "collection_errors",
                "failures",
                "holds",
                "hangs",
            ):
                db.executemany(f"DELETE FROM {table} WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM outputs WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM segments WHERE run_id=?", [(r,) for r in run_ids])
        for run_id in run_ids:
            self.outputs.delete_run(run_id)
            self._known_runs.discard(run_id)
            (self.dir / "processes" / f"{run_id}.log").unlink(missing_ok=True)  # run_tests's terminal output
        self.db.execute("PRAGMA incremental_vacuum")

    # Reading --------------------------------------------------------------------------------------

    def refresh_liveness(self) -> None:
        """Mark runs whose controlling process died on this host without finishing as crashed."""
        host = socket.gethostname()
        rows = self.db.execute(
            "SELECT run_id, pid FROM runs WHERE status='running' AND host=?", (host,)
        ).fetchall()
        dead = [r["run_id"] for r in rows if r["pid"] and not pid_alive(r["pid"])]
        if dead:
            with self.transaction() as db:
                db.executemany(
                    "UPDATE runs SET status='crashed' WHERE run_id=? AND status='running'",
                    [(r,) for r in dead],
                )

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
        """``latest`` (or nothing) means the newest run; a unique prefix of an id is accepted too."""
        if not run_id or run_id == "latest":
            row = self.db.execute(
                "SELECT run_id FROM runs ORDER BY started DESC, run_id DESC LIMIT 1"
            ).fetchone()
            return row[0] if row else None
        if self.db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
            return run_id
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

    def test(self, run_id: str, nodeid: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM tests WHERE run_id=? AND nodeid=?", (run_id, nodeid)).fetchone()
        return dict(row) if row else None

    def find_tests(self, run_id: str, query: str, limit: int = 20) -> list[str]:
        """Node ids of the run that contain ``query`` (for a test given by part of its id)."""
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
        """Each failed or errored phase of the run, in execution order."""
        rows = self.db.execute(
            "SELECT p.*, t.status AS test_status, t.worker FROM phases p "
            "JOIN tests t ON t.run_id = p.run_id AND t.nodeid = p.nodeid "
            "WHERE p.run_id=? AND p.outcome='failed' ORDER BY p.finished",
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

    def failures(self, run_id: str, nodeid: str | None = None) -> list[dict[str, Any]]:
        """Failure snapshots of a run (or of one test), in the order they happened."""
        sql = (
            "SELECT * FROM failures WHERE run_id=?"
            + (" AND nodeid=?" if nodeid else "")
            + " ORDER BY finished"
        )
        rows = self.db.execute(sql, (run_id, nodeid) if nodeid else (run_id,)).fetchall()
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


# Event handlers: one per event type; each must be safe in any arrival order. -----------------------


def _touch_run(db: sqlite3.Connection, run_id: str, first: float, last: float, grown: int = 0) -> None:
    """Create the run's row if this is its first event; widen its [started, last_event] span."""
    db.execute(
        "INSERT INTO runs (run_id, started, last_event, bytes, stored) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(run_id) DO UPDATE SET last_event=max(last_event, excluded.last_event), "
        "started=min(started, excluded.started), bytes=bytes+excluded.bytes, stored=excluded.stored",
        (run_id, first, last, grown, time.time()),
    )


def _run_started(db: sqlite3.Connection, e: protocol.RunStarted) -> None:
    db.execute(
        "UPDATE runs SET label=?, args=?, rootdir=?, cwd=?, python=?, pytest_version=?, plugin_version=?, "
        "host=?, pid=?, workers=? WHERE run_id=?",
        (
            e.label,
            json.dumps(e.args),
            e.rootdir,
            e.cwd,
            e.python,
            e.pytest_version,
            e.plugin_version,
            e.host,
            e.pid,
            e.workers,
            e.run_id,
        ),
    )


def _process_started(db: sqlite3.Connection, e: protocol.ProcessStarted) -> None:
    db.execute(
        "INSERT INTO processes (run_id, process, worker, pid, host, started) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT DO UPDATE SET worker=excluded.worker, pid=excluded.pid, host=excluded.host, "
        "started=excluded.started",
        (e.run_id, e.process, e.worker, e.pid, e.host, e.ts),
    )


def _collection_finished(db: sqlite3.Connection, e: protocol.CollectionFinished) -> None:
    db.execute("UPDATE runs SET collected=? WHERE run_id=?", (e.count, e.run_id))


def _collection_error(db: sqlite3.Connection, e: protocol.CollectionError) -> None:
    db.execute(
        "INSERT OR REPLACE INTO collection_errors VALUES (?, ?, ?, ?)",
        (e.run_id, e.nodeid, e.message, e.longrepr),
    )


def _ensure_test(db: sqlite3.Connection, run_id: str, nodeid: str, worker: str, ts: float) -> None:
    db.execute(
        "INSERT OR IGNORE INTO tests (run_id, nodeid, worker, started) VALUES (?, ?, ?, ?)",
        (run_id, nodeid, worker, ts),
    )


def _test_started(db: sqlite3.Connection, e: protocol.TestStarted) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts)
    db.execute(
        "UPDATE tests SET file=?, line=?, worker=?, started=? WHERE run_id=? AND nodeid=?",
        (e.file, e.line, e.worker, e.ts, e.run_id, e.nodeid),
    )


def _phase_finished(db: sqlite3.Connection, e: protocol.PhaseFinished) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts - e.duration)
    db.execute(
        "INSERT OR REPLACE INTO phases (run_id, nodeid, phase, outcome, duration, finished, message, "
        "longrepr, wasxfail) VALUES (?,?,?,?,?,?,?,?,?)",
        (e.run_id, e.nodeid, e.when, e.outcome, e.duration, e.ts, e.message, e.longrepr, e.wasxfail),
    )


def _test_finished(db: sqlite3.Connection, e: protocol.TestFinished) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts - e.duration)
    if e.passed_phases:
        db.executemany(
            "INSERT OR IGNORE INTO phases (run_id, nodeid, phase, outcome, duration, finished) "
            "VALUES (?, ?, ?, 'passed', ?, ?)",
            [(e.run_id, e.nodeid, p.when, p.duration, p.finished) for p in e.passed_phases],
        )
    db.execute(
        "UPDATE tests SET status=?, finished=?, duration=?, message=?, worker=? WHERE run_id=? AND nodeid=?",
        (e.outcome, e.ts, e.duration, e.message, e.worker, e.run_id, e.nodeid),
    )


def _failure_snapshot(db: sqlite3.Connection, e: protocol.FailureSnapshot) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts)
    db.execute(
        "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)",
        (e.run_id, e.nodeid, e.when, e.ts, protocol.encode_value(e.snapshot)),
    )


def _held(db: sqlite3.Connection, e: protocol.Held) -> None:
    db.execute(
        "INSERT INTO holds (run_id, session, nodeid, worker, process, phase, held, timeout) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET nodeid=excluded.nodeid, "
        "worker=excluded.worker, process=excluded.process, phase=excluded.phase, held=excluded.held, "
        "timeout=excluded.timeout",
        (e.run_id, e.session, e.nodeid, e.worker, e.process, e.when, e.ts, e.timeout),
    )


def _resumed(db: sqlite3.Connection, e: protocol.Resumed) -> None:
    db.execute(
        "INSERT INTO holds (run_id, session, resumed, reason) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO UPDATE SET resumed=excluded.resumed, reason=excluded.reason",
        (e.run_id, e.session, e.ts, e.reason),
    )


def _hang(db: sqlite3.Connection, e: protocol.HangDetected) -> None:
    if e.nodeid:
        _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts)
    db.execute(
        "INSERT OR REPLACE INTO hangs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.run_id,
            e.nodeid,
            e.when,
            e.worker,
            e.ts,
            e.report.kind,
            e.report.summary,
            protocol.encode_value(e.report),
        ),
    )
    if e.report.kind == "killed":  # stopped from outside (SIGTERM, SIGINT, the session timeout)
        db.execute("UPDATE runs SET status='killed' WHERE run_id=?", (e.run_id,))


def _run_finished(db: sqlite3.Connection, e: protocol.RunFinished) -> None:
    status = "interrupted" if e.exit_status == 2 else "finished"
    db.execute(
        "UPDATE runs SET status=CASE status WHEN 'killed' THEN 'killed' ELSE ? END, finished=?, duration=?, "
        "exit_status=?, pytest_counts=? WHERE run_id=?",
        (status, e.ts, e.duration, e.exit_status, json.dumps(e.counts), e.run_id),
    )


def _process_finished(db: sqlite3.Connection, e: protocol.ProcessFinished) -> None:
    db.execute(
        "INSERT INTO processes (run_id, process, finished) VALUES (?, ?, ?) "
        "ON CONFLICT DO UPDATE SET finished=excluded.finished",
        (e.run_id, e.process, e.ts),
    )


_HANDLERS: dict[type, Any] = {
    protocol.RunStarted: _run_started,
    protocol.ProcessStarted: _process_started,
    protocol.CollectionFinished: _collection_finished,
    protocol.CollectionError: _collection_error,
    protocol.TestStarted: _test_started,
    protocol.PhaseFinished: _phase_finished,
    protocol.TestFinished: _test_finished,
    protocol.FailureSnapshot: _failure_snapshot,
    protocol.Held: _held,
    protocol.Resumed: _resumed,
    protocol.HangDetected: _hang,
    protocol.RunFinished: _run_finished,
    protocol.ProcessFinished: _process_finished,
}
