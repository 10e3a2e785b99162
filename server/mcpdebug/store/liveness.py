"""Which runs are dead: a run whose controlling process is gone will never finish, so it is crashed."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import time

from mcpdebug.store.shards import role
from pytest_mcpdebug.folder import pid_alive

REMOTE_SILENCE = 3600.0
"""Seconds without any event of a run from another host after which it is taken for crashed."""


class Liveness:
    """Marking runs crashed, and running again (a mixin of `Store`)."""

    @property
    def db(self) -> sqlite3.Connection:
        raise NotImplementedError

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def refresh_liveness(self) -> None:
        """Mark runs that will never finish as crashed: their controlling process is gone.

        Gone means it said goodbye without finishing the run, or it died on this host, or (on another
        host, where no pid can be checked) nothing of the run arrived for `REMOTE_SILENCE`: a spool
        copied from a CI machine whose run crashed. The controlling process is the run's own pid once
        ``run_started`` is stored; before that (a run killed during start-up, or one whose start is
        lost), every process of the run must be gone.
        """
        host = socket.gethostname()
        rows = self.db.execute(
            "SELECT r.run_id, r.pid AS run_pid, r.host AS run_host, max(r.last_event, r.stored) AS seen, "
            "p.worker, p.pid, p.host, p.finished "
            "FROM runs r LEFT JOIN processes p USING (run_id) WHERE r.status='running'"
        ).fetchall()
        runs: dict[str, list[sqlite3.Row]] = {}
        for row in rows:
            runs.setdefault(row["run_id"], []).append(row)
        silent = time.time() - REMOTE_SILENCE
        dead = [run_id for run_id, procs in runs.items() if _controller_gone(procs, host, silent)]
        if dead:
            self.mark_crashed(dead)

    def mark_crashed(self, run_ids: list[str]) -> None:
        with self.transaction() as db:
            db.executemany(
                "UPDATE runs SET status='crashed' WHERE run_id=? AND status='running'",
                [(r,) for r in run_ids],
            )

    def connection_closed(self, run_id: str, process: str) -> None:
        """A process's connection ended without its goodbye: if it ran the run from another host, where
        its pid cannot be checked, the run is taken for crashed (until it connects again)."""
        row = self.db.execute(
            "SELECT p.worker, p.host, p.finished, r.pid AS run_pid, p.pid FROM processes p "
            "JOIN runs r USING (run_id) WHERE p.run_id=? AND p.process=?",
            (run_id, process),
        ).fetchone()
        if row is None or row["finished"] is not None:
            return
        controls = role(row["worker"]) in ("main", "controller") or (
            row["run_pid"] and row["run_pid"] == row["pid"]
        )
        local = row["host"] == socket.gethostname()
        if controls and (not local or not pid_alive(row["pid"] or 0)):
            self.mark_crashed([run_id])

    def connection_opened(self, run_id: str) -> None:
        """A process of the run is back (it had lost the server, not died): it is running again."""
        self.db.execute("UPDATE runs SET status='running' WHERE run_id=? AND status='crashed'", (run_id,))


def _controller_gone(procs: list[sqlite3.Row], host: str, silent: float) -> bool:
    first = procs[0]
    controllers = [p for p in procs if role(p["worker"] or "") in ("main", "controller")]
    if first["run_pid"] and not controllers:  # its start is stored, its process events are not
        if first["run_host"] != host:
            return bool(first["seen"] < silent)
        return not pid_alive(first["run_pid"])
    watched = controllers or [p for p in procs if p["worker"] is not None]
    if not watched and not first["run_pid"]:
        return True  # no process of it was ever heard of: only the dump of a dead one, say

    def gone(p: sqlite3.Row) -> bool:
        if p["finished"] is not None:
            return True
        if p["host"] == host:
            return bool(p["pid"]) and not pid_alive(p["pid"])
        return bool(first["seen"] < silent)

    return all(gone(p) for p in watched)
