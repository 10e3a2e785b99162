"""The embedded store: one SQLite database (WAL) in the `.mcpdebug/` folder.

Only the server and the CLI write it, and both write only through `apply`, which is idempotent:
an event whose ``(run_id, process, seq)`` is already stored changes nothing. Handlers also tolerate
any arrival order (a worker's test events may arrive before the controller's ``run_started``; a
spool replayed late may deliver ``test_started`` after ``test_finished``).
"""

from __future__ import annotations

import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mcpdebug.store.events import HANDLERS, touch_run
from mcpdebug.store.output_files import Outputs, safe_name, unit_key
from mcpdebug.store.queries import Queries
from mcpdebug.store.schema import SCHEMA, SCHEMA_VERSION, migrate, schema_version
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import SPOOL_DIR, STORE_FILE, FolderError, ensure_dir, pid_alive
from pytest_mcpdebug.limits import Limits

EVENT_BYTES = 200
"""What a stored event costs, roughly (its rows and indexes), for the store-size limit."""

log = logging.getLogger("mcpdebug.store")


class StoreError(Exception):
    """A store that cannot be opened or used; the message says what to do."""


class Store(Queries):
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
            version = schema_version(db)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} was written by a newer pytest-mcpdebug (schema {version}); "
                    "upgrade pytest-mcpdebug to read it"
                )
            db.executescript(SCHEMA)
            if version is None:
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif version < SCHEMA_VERSION:
                with self.transaction() as tx:
                    migrate(tx, self.outputs, version)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from exc
        except FolderError as exc:
            raise StoreError(str(exc)) from None

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
                        touch_run(db, event.run_id, event.ts, event.ts)  # handlers UPDATE this row
                        created.add(event.run_id)
                    size = EVENT_BYTES
                    if isinstance(event, protocol.Output):
                        size += self.outputs.append(db, event)
                    else:
                        HANDLERS[type(event)](db, event)
                        if isinstance(event, protocol.TestFinished):
                            self.outputs.finish(db, event.run_id, event.nodeid)
                        elif isinstance(event, protocol.ProcessFinished):
                            self._finish_process_output(db, event)
                        elif isinstance(event, protocol.RunFinished):
                            finished = True
                    grown[event.run_id] = grown.get(event.run_id, 0) + size
            for run_id, (first, last) in span.items():
                touch_run(db, run_id, first, last, grown.get(run_id, 0))
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
                "attempts",
            ):
                db.executemany(f"DELETE FROM {table} WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM outputs WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM segments WHERE run_id=?", [(r,) for r in run_ids])
        for run_id in run_ids:
            self.outputs.delete_run(run_id)
            self._known_runs.discard(run_id)
            # run_tests's terminal output
            (self.dir / "processes" / f"{safe_name(run_id)}.log").unlink(missing_ok=True)
        self.db.execute("PRAGMA incremental_vacuum")

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
