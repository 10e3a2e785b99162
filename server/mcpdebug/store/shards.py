"""A run recorded in parts: CI shards sharing one run id, each with its own controlling process.

Each shard's controlling process sends the run's start, its collection and its finish, and with its
code version what it ran in (environment, CI job, machine). The run's own row keeps what one process says;
a `shards` row per label keeps each shard's, and once a run has more than one shard its row is their
sum (`aggregate`): tests collected, counts, one exit status, finished once every shard is.

An unlabelled run has one shard, labelled "": a store written before shards existed has none, and
every read falls back to the run's own row (`Shards.shards`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from pytest_mcpdebug import protocol

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS shards (
    run_id TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    process TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER,
    args TEXT NOT NULL DEFAULT '[]',
    started REAL,
    finished REAL,
    duration REAL,
    exit_status INTEGER,
    collected INTEGER,
    counts TEXT NOT NULL DEFAULT '{}',
    workers INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'running',
    environment TEXT NOT NULL DEFAULT '{}',
    ci TEXT NOT NULL DEFAULT '{}',
    machine TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, label)
);
"""
COLUMNS: Final = (
    "run_id", "label", "process", "host", "pid", "args", "started", "finished", "duration",
    "exit_status", "collected", "counts", "workers", "status", "environment", "ci", "machine",
)  # fmt: skip


def role(worker: str) -> str:
    """``main``, ``controller`` or ``gw0`` of a worker's recorded name (``linux-3:gw0`` in a shard)."""
    return worker.rpartition(":")[2]


# Events -------------------------------------------------------------------------------------------


def _ensure(db: sqlite3.Connection, run_id: str, label: str) -> None:
    db.execute("INSERT OR IGNORE INTO shards (run_id, label) VALUES (?, ?)", (run_id, label))


def run_started(db: sqlite3.Connection, e: protocol.RunStarted) -> None:
    _ensure(db, e.run_id, e.shard)
    db.execute(
        "UPDATE shards SET process=?, host=?, pid=?, args=?, started=?, workers=? WHERE run_id=? AND label=?",
        (e.process, e.host, e.pid, json.dumps(e.args), e.ts, e.workers, e.run_id, e.shard),
    )
    aggregate(db, e.run_id)


def collection_finished(db: sqlite3.Connection, e: protocol.CollectionFinished) -> None:
    label = _label_of(db, e.run_id, e.process)
    if label is not None:
        db.execute("UPDATE shards SET collected=? WHERE run_id=? AND label=?", (e.count, e.run_id, label))
        aggregate(db, e.run_id)


def run_finished(db: sqlite3.Connection, e: protocol.RunFinished) -> None:
    label = _label_of(db, e.run_id, e.process)
    if label is None:
        return
    status = "interrupted" if e.exit_status == 2 else "finished"
    db.execute(
        "UPDATE shards SET finished=?, duration=?, exit_status=?, counts=?, status=? "
        "WHERE run_id=? AND label=?",
        (e.ts, e.duration, e.exit_status, json.dumps(e.counts), status, e.run_id, label),
    )
    aggregate(db, e.run_id)


def code_version(db: sqlite3.Connection, e: protocol.CodeVersion) -> None:
    """What the shard ran in: its environment, CI job and machine."""
    if not e.environment and not e.ci and not e.machine:
        return  # a plugin from before they were sent
    _ensure(db, e.run_id, e.shard)
    db.execute(
        "UPDATE shards SET environment=?, ci=?, machine=? WHERE run_id=? AND label=?",
        (json.dumps(e.environment), json.dumps(e.ci), json.dumps(e.machine), e.run_id, e.shard),
    )


def _label_of(db: sqlite3.Connection, run_id: str, process: str) -> str | None:
    """The shard whose controlling process this is; a single unlabelled shard if its start is not
    stored yet (a run's events may arrive in any order: its finish updates it once it is)."""
    row = db.execute("SELECT label FROM shards WHERE run_id=? AND process=?", (run_id, process)).fetchone()
    if row is not None:
        return str(row[0])
    rows = db.execute("SELECT label FROM shards WHERE run_id=?", (run_id,)).fetchall()
    return None if len(rows) > 1 else ""


def aggregate(db: sqlite3.Connection, run_id: str) -> None:
    """A run of several shards: its row becomes their sum (what one shard says is left as it is)."""
    rows = db.execute(
        "SELECT started, finished, exit_status, collected, counts, workers, status, host FROM shards "
        "WHERE run_id=? AND started IS NOT NULL",
        (run_id,),
    ).fetchall()
    if len(rows) < 2:
        return
    done = all(r["finished"] is not None for r in rows)
    counts: dict[str, int] = {}
    for r in rows:
        for outcome, n in json.loads(r["counts"]).items():
            counts[outcome] = counts.get(outcome, 0) + int(n)
    started = min(r["started"] for r in rows)
    finished = max(r["finished"] for r in rows) if done else None
    exit_status = combined_exit([r["exit_status"] for r in rows]) if done else None
    collected = [r["collected"] for r in rows if r["collected"] is not None]
    status = ("interrupted" if exit_status == 2 else "finished") if done else "running"
    db.execute(
        "UPDATE runs SET status=CASE WHEN status='killed' THEN status "
        "WHEN status='crashed' AND ?='running' THEN status ELSE ? END, finished=?, duration=?, "
        "exit_status=?, collected=?, pytest_counts=?, workers=?, host=? WHERE run_id=?",
        (
            status,
            status,
            finished,
            finished - started if finished is not None else None,
            exit_status,
            sum(collected) if collected else None,
            json.dumps(counts),
            sum(r["workers"] for r in rows),
            ", ".join(sorted({r["host"] for r in rows if r["host"]})),
            run_id,
        ),
    )


def combined_exit(statuses: list[int | None]) -> int | None:
    """One pytest exit status for shards': the worst of them (1 failed < 2 interrupted < 3 internal
    < 4 usage), 0 when each passed or collected nothing (5), 5 when none collected anything."""
    known = [s for s in statuses if s is not None]
    if not known:
        return None
    bad = [s for s in known if s not in (0, 5)]
    if bad:
        return max(bad)
    return 0 if 0 in known else 5


# Reading ------------------------------------------------------------------------------------------


class ShardQueries:
    """Reading a run's shards (a mixin of `Store`)."""

    @property
    def db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def shards(self, run_id: str) -> list[dict[str, Any]]:
        """The run's shards, by label: each one's host, outcome counts, exit status, environment, CI
        job and machine (decoded); [] for a run stored before shards were (its row says it all)."""
        rows = self.db.execute("SELECT * FROM shards WHERE run_id=? ORDER BY label", (run_id,)).fetchall()
        out = []
        for row in rows:
            shard = dict(row)
            shard.setdefault("machine", "{}")  # a read-only store from before machines were kept
            for key in ("args", "counts", "environment", "ci", "machine"):
                shard[key] = json.loads(shard[key])
            out.append(shard)
        return out

    def shard_tests(self, run_id: str) -> dict[str, int]:
        """Tests each shard ran, by label (from their workers' names: ``linux-3:gw0``)."""
        rows = self.db.execute(
            "SELECT worker, count(*) FROM tests WHERE run_id=? GROUP BY worker", (run_id,)
        ).fetchall()
        counted: dict[str, int] = {}
        for worker, n in rows:
            label = worker.rpartition(":")[0]
            counted[label] = counted.get(label, 0) + int(n)
        return counted
