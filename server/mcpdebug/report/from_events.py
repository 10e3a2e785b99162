"""Seed 000's session and state entries for what arrives over the ingest WebSocket.

Called by the ingest (`IngestServer._ingest`, in its worker thread, after the events are stored) with
each batch: a run or process session starting and ending, a test held at its failure or hang and
resumed, a process session's state changes, and (at ``debug`` level) what a run's tests wrote.
Runs replayed from spool files are history, not activity, and are not logged.
"""

from __future__ import annotations

import logging
from typing import Any

from mcpdebug.report import entries
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

_RUNNING = frozenset({"running", "started", "restarted", "starting"})


def ingested(store: Store, events: list[protocol.Event]) -> None:
    """Log what ``events`` change about sessions; never raises (the log must not cost an event)."""
    if not entries.SESSION.isEnabledFor(logging.INFO):
        return  # no log open (or one at warning level): nothing to write
    if not entries.OUTPUT.isEnabledFor(logging.DEBUG) and not any(type(e) in _NOTABLE for e in events):
        return
    for event in events:
        handler = _NOTABLE.get(type(event))
        try:
            if handler is not None:
                handler(store, event)
            elif isinstance(event, protocol.Output) and entries.OUTPUT.isEnabledFor(logging.DEBUG):
                entries.debug_output(event.run_id, event.stream, event.as_text(), level=logging.DEBUG)
        except Exception:  # a log entry is never worth an ingest error
            logging.getLogger("mcpdebug.report").debug("cannot log %s", type(event).__name__, exc_info=True)


def _run_started(store: Store, event: Any) -> None:
    name = event.label or " ".join(["pytest", *event.args])[:120]
    kind = "debug" if event.kind == "debug" else "run"
    entries.session_created(
        event.run_id,
        name,
        kind,
        started=event.ts,
        pythonPath=event.python,
        args=list(event.args),
        host=event.host,
        pid=event.pid,
        workers=event.workers,
    )


def _run_finished(store: Store, event: Any) -> None:
    entries.session_closed(
        event.run_id,
        "finished",
        ended=event.ts,
        exitStatus=event.exit_status,
        counts=dict(event.counts),
    )


def _session_started(store: Store, event: Any) -> None:
    entries.session_created(
        event.run_id,
        event.label or event.run_id,
        "process",
        started=event.ts,
        mode=event.mode,
        command=list(event.command),
        pid=event.pid,
        pythonPath=None,
    )


def _process_status(store: Store, event: Any) -> None:
    state = "running" if event.status in _RUNNING and not event.ended else "stopped"
    entries.debug_state(
        event.run_id,
        state,
        reason=event.status,
        pid=event.pid,
        exitCode=event.exit_code,
        detail=event.message or None,
    )
    if event.ended:
        entries.session_closed(event.run_id, event.status, ended=event.ts, exitCode=event.exit_code)


def _held(store: Store, event: Any) -> None:
    entries.session_created(
        event.session,
        event.nodeid,
        "held",
        started=event.ts,
        pythonPath=(store.run(event.run_id) or {}).get("python"),
        runId=event.run_id,
        worker=event.worker,
        phase=event.when,
    )
    entries.debug_state(
        event.session,
        "paused",
        reason=event.reason,
        location=_location(store, event.run_id, event.nodeid, event.reason),
        thread_id=None,
        runId=event.run_id,
    )


def _resumed(store: Store, event: Any) -> None:
    entries.debug_state(
        event.session, "running" if event.reason == "continue" else "stopped", reason=event.reason
    )
    entries.session_closed(event.session, event.reason, ended=event.ts)


def _location(store: Store, run_id: str, nodeid: str, reason: str) -> dict[str, Any]:
    """Where a held test stopped: its failure's raising frame of this project, or where it hangs."""
    file, _, rest = nodeid.partition("::")
    where: dict[str, Any] = {"file": file, "line": None, "function": rest.split("::")[-1] or None}
    if reason == "hang":
        hangs = store.hangs(run_id, nodeid)
        if hangs and hangs[-1]["report"].file:
            report = hangs[-1]["report"]
            return {"file": report.file, "line": report.line, "function": report.function}
        return where
    failures = store.failures(run_id, nodeid)
    if failures:
        frames = [f for f in failures[-1]["snapshot"].frames if not f.library]
        if frames:
            return {"file": frames[0].file, "line": frames[0].line, "function": frames[0].function}
    return where


_NOTABLE: dict[type, Any] = {
    protocol.RunStarted: _run_started,
    protocol.RunFinished: _run_finished,
    protocol.SessionStarted: _session_started,
    protocol.ProcessStatus: _process_status,
    protocol.Held: _held,
    protocol.Resumed: _resumed,
}
