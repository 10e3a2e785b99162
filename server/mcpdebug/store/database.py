"""The embedded store: one SQLite database (WAL) in the `.mcpdebug/` folder.

Only the server and the CLI write it, and both write only through `apply`, which is idempotent:
an event whose ``(run_id, process, seq)`` is already stored changes nothing. Handlers also tolerate
any arrival order (a worker's test events may arrive before the controller's ``run_started``; a
spool replayed late may deliver ``test_started`` after ``test_finished``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mcpdebug.names import StoreError
from mcpdebug.store import recovery
from mcpdebug.store.diagnosis import DiagnosisQueries
from mcpdebug.store.events import HANDLERS, touch_run
from mcpdebug.store.history import HistoryQueries
from mcpdebug.store.liveness import Liveness
from mcpdebug.store.output_files import OUTPUT_DIR, Outputs, safe_name, unit_key
from mcpdebug.store.queries import Queries
from mcpdebug.store.schema import SCHEMA, SCHEMA_VERSION, migrate, schema_version
from mcpdebug.store.shards import ShardQueries
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import (
    SPOOL_DIR,
    STORE_FILE,
    FolderError,
    coverage_file,
    coverage_parts,
    ensure_dir,
)
from pytest_mcpdebug.limits import Limits

EVENT_BYTES = 200
"""What a stored event costs, roughly (its rows and indexes), for the store-size limit."""

log = logging.getLogger("mcpdebug.store")


class Store(Liveness, Queries, HistoryQueries, DiagnosisQueries, ShardQueries):
    """The store of one `.mcpdebug/` folder.

    Each thread gets its own SQLite connection (tools run in worker threads while the event loop
    ingests): WAL lets readers see a consistent snapshot while one writer commits.
    """

    def __init__(self, directory: Path, *, create: bool = True, limits: Limits | None = None) -> None:
        self.dir = directory
        self.limits = limits or Limits()
        path = directory / STORE_FILE
        if not create and not path.exists() and not (directory / SPOOL_DIR).is_dir():
            from pytest_mcpdebug.commands import program

            raise StoreError(
                f"no recorded runs in {directory} (no {STORE_FILE}); record one with "
                f"`{program('pytest')} --mcp-debug`"
            )
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._reopen_lock = threading.Lock()
        self._generation = 0
        self._known_runs: set[str] = set()
        self.outputs = Outputs(directory, self.limits)
        self.read_only = False
        self._uri: str | None = None
        self.rebuild: tuple[str, Path | None] | None = None
        """(what happened, the folder it was set aside in) of a store replaced by a fresh one, until the
        ingest layer has rebuilt it from what still exists (`mcpdebug.ingest.recovery`)."""
        try:
            try:
                self._prepare()
            except sqlite3.DatabaseError as exc:
                if recovery.is_corruption(exc):
                    self._start_afresh(f"was corrupted ({exc})")
                elif recovery.is_read_only(exc) and path.exists():
                    self._open_read_only()
                else:
                    raise
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from exc
        except FolderError as exc:
            raise StoreError(str(exc)) from None
        self._identity = recovery.identity(path)

    def _prepare(self) -> None:
        """Create or upgrade the tables."""
        ensure_dir(self.dir)
        db = self.db
        fresh = not db.execute("SELECT 1 FROM sqlite_master WHERE name='runs'").fetchone()
        if fresh:
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # lets eviction give space back
        version = schema_version(db)
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer pytest-mcpdebug (schema {version}); "
                "upgrade pytest-mcpdebug to read it"
            )
        db.executescript(SCHEMA)
        if version is None:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif version < SCHEMA_VERSION:
            with self.transaction() as tx:
                migrate(tx, self.outputs, version)

    def _open_read_only(self) -> None:
        """Read what a store holds that this process may not write (a CI artifact, a shared folder)."""
        self._drop_connections()
        self.read_only = True
        for immutable in (False, True):  # without the right to make its lock file: read it as a snapshot
            self._uri = recovery.read_only_uri(self.path, immutable=immutable)
            try:
                self.db.execute("SELECT count(*) FROM runs").fetchone()
                return
            except sqlite3.OperationalError:
                self._drop_connections()
        raise StoreError(f"cannot read the store {self.path}: it is read-only and SQLite cannot open it")

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection (a new one after the store file was replaced)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None and self._local.generation == self._generation:
            return db
        if self._uri is not None:
            db = sqlite3.connect(
                self._uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
        else:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        self._local.db, self._local.generation = db, self._generation
        with self._connections_lock:
            self._connections.append(db)
        return db

    # Surviving a damaged store ----------------------------------------------------------------------

    def check(self) -> bool:
        """Whether the store file is still the one opened (a stat); if it was deleted or replaced
        meanwhile, keep what the open connection still reads and carry on with a new file."""
        if self.read_only or recovery.identity(self.path) == self._identity:
            return False
        with self._reopen_lock:
            if recovery.identity(self.path) == self._identity:
                return False  # another thread did it
            target = self.path.with_name(f".{self.path.name}.rescued")
            try:  # the deleted file is still open: copy it out whole
                target.unlink(missing_ok=True)
                self.db.execute("VACUUM INTO ?", (str(target),))
            except sqlite3.Error as exc:
                log.warning("cannot copy the deleted store out (%s): starting a new one", exc)
                self._start_afresh("was deleted or replaced while in use")
            else:
                self._drop_connections()
                os.replace(target, self.path)
                self._generation += 1
                log.warning("mcpdebug: warning: %s was deleted while in use; its content was kept", self.path)
            self._identity = recovery.identity(self.path)
        return True

    def recover(self, exc: BaseException) -> bool:
        """After an error of SQLite: if it says the file is corrupted, set it aside and carry on with a
        fresh store (rebuilt by the ingest layer). False: not a corruption, nothing done."""
        if not recovery.is_corruption(exc) or self.read_only:
            return False
        with self._reopen_lock:
            self._start_afresh(f"was found corrupted ({exc})")
            self._identity = recovery.identity(self.path)
        return True

    def _start_afresh(self, what: str) -> None:
        self._drop_connections()
        self._generation += 1
        self._known_runs = set()
        folder: Path | None = None
        if self.path.exists() or (self.dir / OUTPUT_DIR).exists():
            folder = recovery.set_aside(self.path)
        self.rebuild = (what, folder)
        self._prepare()

    def _drop_connections(self) -> None:
        with self._connections_lock:
            for db in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
            self._connections.clear()
        self._local = threading.local()

    def close(self) -> None:
        self._drop_connections()

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
        """Store a batch of events in one transaction; returns how many were new.

        A store file deleted or corrupted under us is replaced first (see `check`, `recover`), so the
        batch is stored all the same."""
        batch = list(events)
        self.check()
        try:
            return self._apply(batch)
        except sqlite3.DatabaseError as exc:
            if not self.recover(exc):
                raise
            return self._apply(batch)

    def _apply(self, events: list[protocol.Event]) -> int:
        span: dict[str, tuple[float, float]] = {}  # run -> (first, last) timestamp of its new events
        grown: dict[str, int] = {}  # run -> bytes its new events add to the store
        created: set[str] = set()
        finished = False
        with self.transaction() as db, self.outputs.batch():
            fresh = _unstored(db, events)
            self.outputs.look_up(db, fresh)
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?)", [(e.run_id, e.process, e.seq) for e in fresh]
            )
            for event in fresh:
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
            self.outputs.flush_index()
        self._known_runs |= created  # only once committed
        if created or finished:
            self.enforce_retention()
        return len(fresh)

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
                "coverage_files",  # not history or versions: the flaky history outlives its runs
                "traces",
                "localizations",
                "process_sessions",
                "process_states",
                "shards",
            ):
                db.executemany(f"DELETE FROM {table} WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM outputs WHERE run_id=?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM segments WHERE run_id=?", [(r,) for r in run_ids])
        for run_id in run_ids:
            self.outputs.delete_run(run_id)
            self._known_runs.discard(run_id)
            coverage_file(self.dir, run_id).unlink(missing_ok=True)
            shutil.rmtree(coverage_parts(self.dir, run_id), ignore_errors=True)
            # run_tests's terminal output
            (self.dir / "processes" / f"{safe_name(run_id)}.log").unlink(missing_ok=True)
        self.db.execute("PRAGMA incremental_vacuum")

    def mark_recovered(self, run_id: str, tests: list[tuple[str, str]]) -> None:
        """A run rebuilt from its output files alone: its tests' outcomes are unknown."""
        with self.transaction() as db:
            db.execute(
                "UPDATE runs SET status='recovered', label='(recovered from output files after the store "
                "was damaged; outcomes unknown)' WHERE run_id=?",
                (run_id,),
            )
            db.executemany(
                "INSERT OR IGNORE INTO tests (run_id, nodeid, worker, status) VALUES (?, ?, ?, 'unknown')",
                [(run_id, nodeid, worker) for nodeid, worker in tests],
            )


def _unstored(db: sqlite3.Connection, events: list[protocol.Event]) -> list[protocol.Event]:
    """The events of a batch not stored yet (each once), in their order: the stored ones are read a
    process's range at a time, not an event at a time."""
    ranges: dict[tuple[str, str], tuple[int, int]] = {}
    for e in events:
        low, high = ranges.get((e.run_id, e.process), (e.seq, e.seq))
        ranges[(e.run_id, e.process)] = (min(low, e.seq), max(high, e.seq))
    seen: set[tuple[str, str, int]] = set()
    for (run_id, process), (low, high) in ranges.items():
        seen.update(
            (run_id, process, seq)
            for (seq,) in db.execute(
                "SELECT seq FROM events WHERE run_id=? AND process=? AND seq BETWEEN ? AND ?",
                (run_id, process, low, high),
            )
        )
    fresh = []
    for e in events:
        key = (e.run_id, e.process, e.seq)
        if key not in seen:
            seen.add(key)
            fresh.append(e)
    return fresh
