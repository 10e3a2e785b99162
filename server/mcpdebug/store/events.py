"""How each event changes the tables: one handler per event type, each safe in any arrival order.

A worker's test events may arrive before the controller's ``run_started``; a spool replayed late may
deliver ``test_started`` after ``test_finished``: handlers insert what is missing and never assume
an order.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from mcpdebug.store import diagnosis, history, shards
from mcpdebug.store.process_events import PROCESS_HANDLERS
from pytest_mcpdebug import protocol


def touch_run(db: sqlite3.Connection, run_id: str, first: float, last: float, grown: int = 0) -> None:
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
        "host=?, pid=?, workers=?, kind=? WHERE run_id=?",
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
            e.kind,
            e.run_id,
        ),
    )
    shards.run_started(db, e)


def _process_started(db: sqlite3.Connection, e: protocol.ProcessStarted) -> None:
    db.execute(
        "INSERT INTO processes (run_id, process, worker, pid, host, started) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT DO UPDATE SET worker=excluded.worker, pid=excluded.pid, host=excluded.host, "
        "started=excluded.started",
        (e.run_id, e.process, e.worker, e.pid, e.host, e.ts),
    )


def _collection_finished(db: sqlite3.Connection, e: protocol.CollectionFinished) -> None:
    db.execute("UPDATE runs SET collected=? WHERE run_id=?", (e.count, e.run_id))
    shards.collection_finished(db, e)


def _collection_error(db: sqlite3.Connection, e: protocol.CollectionError) -> None:
    db.execute(
        "INSERT OR REPLACE INTO collection_errors VALUES (?, ?, ?, ?)",
        (e.run_id, e.nodeid, e.message, e.longrepr),
    )


def _ensure_test(
    db: sqlite3.Connection,
    run_id: str,
    nodeid: str,
    worker: str,
    ts: float,
    file: str = "",
    line: int | None = None,
) -> None:
    db.execute(
        "INSERT OR IGNORE INTO tests (run_id, nodeid, worker, started, file, line) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, nodeid, worker, ts, file, line),
    )


def _test_started(db: sqlite3.Connection, e: protocol.TestStarted) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts)
    db.execute(
        "UPDATE tests SET file=?, line=?, worker=?, started=? WHERE run_id=? AND nodeid=?",
        (e.file, e.line, e.worker, e.ts, e.run_id, e.nodeid),
    )


def _phase_finished(db: sqlite3.Connection, e: protocol.PhaseFinished) -> None:
    _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts - e.duration)
    history.record_failed_phase(db, e)
    db.execute(
        "INSERT OR REPLACE INTO phases (run_id, nodeid, phase, outcome, duration, finished, message, "
        "longrepr, wasxfail) VALUES (?,?,?,?,?,?,?,?,?)",
        (e.run_id, e.nodeid, e.when, e.outcome, e.duration, e.ts, e.message, e.longrepr, e.wasxfail),
    )


def _test_finished(db: sqlite3.Connection, e: protocol.TestFinished) -> None:
    history.record_test(db, e)
    if e.passed_phases:
        db.executemany(
            "INSERT INTO phases (run_id, nodeid, phase, outcome, duration, finished) "
            "VALUES (?, ?, ?, 'passed', ?, ?) ON CONFLICT DO UPDATE SET outcome='passed', "
            "duration=excluded.duration, finished=excluded.finished, message='', longrepr='' "
            "WHERE phases.outcome='rerun'",
            [(e.run_id, e.nodeid, p.when, p.duration, p.finished) for p in e.passed_phases],
        )
    if e.attempt > 1 or e.outcome == "rerun":
        _attempt(db, e)
    if e.outcome == "rerun":  # run again: the test's own row waits for its last attempt, whatever the order
        _ensure_test(db, e.run_id, e.nodeid, e.worker, e.ts - e.duration, e.file, e.line)
        return
    # A test that ended within a tick of its start sent no `TestStarted`: this creates its row.
    db.execute(
        "INSERT INTO tests (run_id, nodeid, worker, started, file, line, status, finished, duration, "
        "message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET status=excluded.status, "
        "finished=excluded.finished, duration=excluded.duration, message=excluded.message, "
        "worker=excluded.worker",
        (
            e.run_id,
            e.nodeid,
            e.worker,
            e.ts - e.duration,
            e.file,
            e.line,
            e.outcome,
            e.ts,
            e.duration,
            e.message,
        ),
    )


def _attempt(db: sqlite3.Connection, e: protocol.TestFinished) -> None:
    """One attempt of a rerun test, with its failure and hang as stored when it ended (a process's
    events arrive in order: the attempt's phases came just before, the next attempt's after)."""
    started = e.ts - e.duration - 1.0
    failed = db.execute(
        "SELECT phase, longrepr FROM phases WHERE run_id=? AND nodeid=? AND outcome IN ('failed', 'rerun') "
        "AND finished>=? ORDER BY finished DESC LIMIT 1",
        (e.run_id, e.nodeid, started),
    ).fetchone()
    hang = db.execute(
        "SELECT summary FROM hangs WHERE run_id=? AND nodeid=? AND detected>=?", (e.run_id, e.nodeid, started)
    ).fetchone()
    db.execute(
        "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.run_id,
            e.nodeid,
            e.attempt,
            e.outcome,
            e.duration,
            e.ts,
            e.message,
            failed[0] if failed else "",
            failed[1] if failed else "",
            hang[0] if hang else "",
        ),
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
    # A dead process's dump with nothing past its header says only that the process ended during the
    # test ("crashed"): what the process itself said before it went (a SIGTERM's stop, a hang) stays.
    verb = "INSERT OR IGNORE" if e.report.kind == "crashed" else "INSERT OR REPLACE"
    db.execute(
        f"{verb} INTO hangs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
    status = (
        "interrupted" if e.exit_status == 2 else "finished"
    )  # pytest's exit status 2; a script's is its own
    db.execute(
        "UPDATE runs SET status=CASE WHEN status='killed' THEN 'killed' WHEN kind='debug' THEN 'finished' "
        "ELSE ? END, finished=?, duration=?, exit_status=?, pytest_counts=? WHERE run_id=?",
        (status, e.ts, e.duration, e.exit_status, json.dumps(e.counts), e.run_id),
    )
    shards.run_finished(db, e)


def _code_version(db: sqlite3.Connection, e: protocol.CodeVersion) -> None:
    history.record_version(db, e)
    shards.code_version(db, e)


def _process_finished(db: sqlite3.Connection, e: protocol.ProcessFinished) -> None:
    db.execute(
        "INSERT INTO processes (run_id, process, finished) VALUES (?, ?, ?) "
        "ON CONFLICT DO UPDATE SET finished=excluded.finished",
        (e.run_id, e.process, e.ts),
    )


HANDLERS: dict[type, Any] = {
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
    protocol.CodeVersion: _code_version,
    protocol.CoverageRecorded: diagnosis.record_coverage,
    protocol.ValueTrace: diagnosis.record_trace,
    protocol.Localization: diagnosis.record_localization,
    **PROCESS_HANDLERS,
}
