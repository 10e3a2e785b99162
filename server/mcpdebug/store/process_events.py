"""How a process session's events change the store: its registration (where its label is assigned)
and its process's state changes. Each handler is safe in any arrival order, like those of `events`.

A process session is a run of kind ``process``: ``runs`` holds its label, command, status (its
process's), exit status, start and end; ``process_sessions`` what only a process has; its lines are
the run's output outside tests (unit "").
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from typing import Any, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import pid_alive

MAX_LABEL: Final = 64
PYTHONS: Final = ("python", "python3", "pypy", "pypy3")


def default_label(command: list[str], source: str = "") -> str:
    """The label of a session that asked for none: its program (``python -m app`` is ``app``,
    ``python server.py`` is ``server``), or the name of the file it forwards."""
    if source:
        return "stdin" if source == "-" else os.path.basename(source.rstrip("/")) or "forward"
    if not command:
        return "session"
    program = os.path.basename(command[0])
    rest = command[1:]
    if program.split(".")[0].rstrip("0123456789.") in PYTHONS and rest:
        if rest[0] == "-m" and len(rest) > 1:
            return rest[1]
        if not rest[0].startswith("-"):
            return os.path.splitext(os.path.basename(rest[0]))[0] or program
    return program or "session"


def clean_label(label: str) -> str:
    return " ".join(label.split())[:MAX_LABEL]


def assign_label(db: sqlite3.Connection, run_id: str, wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``, ... if a session that has not ended holds it.

    A session whose runner died on this host without saying so does not hold its label.
    """
    rows = db.execute(
        "SELECT label, host, pid FROM runs WHERE kind='process' AND finished IS NULL AND run_id != ? "
        "AND (label = ? OR substr(label, 1, ?) = ?)",
        (run_id, wanted, len(wanted) + 1, wanted + "-"),
    ).fetchall()
    here = socket.gethostname()
    taken = {r["label"] for r in rows if r["host"] != here or not r["pid"] or pid_alive(r["pid"])}
    if wanted not in taken:
        return wanted
    number = 2
    while f"{wanted}-{number}" in taken:
        number += 1
    return f"{wanted}-{number}"


def _ensure_session(db: sqlite3.Connection, run_id: str) -> None:
    db.execute("INSERT OR IGNORE INTO process_sessions (run_id) VALUES (?)", (run_id,))


def _session_started(db: sqlite3.Connection, e: protocol.SessionStarted) -> None:
    row = db.execute("SELECT kind, label FROM runs WHERE run_id=?", (e.run_id,)).fetchone()
    if row is not None and row["kind"] == "process" and row["label"]:
        label = row["label"]  # registered before (the same event replayed): keep what it was given
    else:
        wanted = clean_label(e.label) or clean_label(default_label(e.command, e.source))
        label = assign_label(db, e.run_id, wanted)
    db.execute(
        "UPDATE runs SET kind='process', label=?, args=?, cwd=?, rootdir=?, host=?, pid=? WHERE run_id=?",
        (label, json.dumps(e.command), e.cwd, e.cwd, e.host, e.pid, e.run_id),
    )
    _ensure_session(db, e.run_id)
    db.execute(
        "UPDATE process_sessions SET mode=?, requested=?, command=?, cwd=?, source=?, capabilities=?, "
        "restart=?, parent_run=?, parent_worker=? WHERE run_id=?",
        (
            e.mode,
            e.label,
            json.dumps(e.command),
            e.cwd,
            e.source,
            json.dumps(e.capabilities),
            e.restart,
            e.parent_run,
            e.parent_worker,
            e.run_id,
        ),
    )


def _process_status(db: sqlite3.Connection, e: protocol.ProcessStatus) -> None:
    _ensure_session(db, e.run_id)
    db.execute(
        "INSERT OR IGNORE INTO process_states VALUES (?, ?, ?, ?, ?, ?, ?)",
        (e.run_id, e.seq, e.ts, e.status, e.pid, e.exit_code, e.message),
    )
    exited = e.ts if e.status in ("stopped", "crashed") else None
    newer = db.execute(
        "UPDATE process_sessions SET status=?, status_seq=?, pid=coalesce(?, pid), exit_code=?, message=?, "
        "exited=? WHERE run_id=? AND status_seq < ?",
        (e.status, e.seq, e.pid, e.exit_code, e.message, exited, e.run_id, e.seq),
    ).rowcount
    if newer:
        db.execute(
            "UPDATE runs SET status=?, exit_status=? WHERE run_id=?", (e.status, e.exit_code, e.run_id)
        )
    if e.ended:  # the last word, whenever it arrives
        db.execute("UPDATE runs SET finished=?, duration=? - started WHERE run_id=?", (e.ts, e.ts, e.run_id))


PROCESS_HANDLERS: dict[type, Any] = {
    protocol.SessionStarted: _session_started,
    protocol.ProcessStatus: _process_status,
}
