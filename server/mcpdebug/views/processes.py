"""Process sessions as an agent or a terminal sees them: the list in `list_sessions`, one session's
state, the reply of `start_process`, and the service lines a failing test's report shows.

A session is ``disconnected`` when it has not ended but its runner is not connected to this server
(the server restarted, or the runner cannot reach it): its lines are spooled meanwhile and arrive
when it reconnects.
"""

from __future__ import annotations

import datetime as dt
import shlex
import time
from typing import Any, Final

from mcpdebug.store import Store
from mcpdebug.views import logs as logs_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from mcpdebug.views.calls import call
from mcpdebug.views.output_window import LINE_CHARS
from mcpdebug.views.time_text import seconds, when

STARTUP_LINES: Final = 20
"""Lines of a new process's output in `start_process`'s reply (seed 003's default window)."""
SERVICE_LINES: Final = 20
"""Lines of process sessions shown with a failing test, from the seconds it ran."""
SETTLE: Final = 0.5
"""Seconds after a test's end whose service lines still belong to it (a response written late)."""


def iso(ts: float | None) -> str | None:
    return dt.datetime.fromtimestamp(ts).isoformat(timespec="milliseconds") if ts else None


def status(session: dict[str, Any], connected: set[str] | None) -> str:
    """running, stopped, crashed, restarting, or disconnected (``connected``: None if unknown)."""
    if session["finished"] is None and connected is not None and session["run_id"] not in connected:
        return "disconnected"
    return str(session["status"])


def command_text(session: dict[str, Any]) -> str:
    if session["mode"] == "forward":
        return "stdin" if session["source"] == "-" else session["source"]
    return shlex.join(session["command"])


def exit_text(code: int | None) -> str:
    if code is None:
        return "-"
    if code < 0:
        from mcpdebug.processes.child import returncode_text

        return returncode_text(code)
    return f"exit status {code}"


def row(session: dict[str, Any], connected: set[str] | None) -> dict[str, Any]:
    """What a typed reply says about a session (seed 004's session fields)."""
    return {
        "label": session["label"],
        "run_id": session["run_id"],
        "mode": session["mode"],
        "status": status(session, connected),
        "pid": session["pid"] if session["mode"] != "forward" else None,
        "exit_code": session["exit_code"],
        "command": session["command"],
        "source": session["source"] or None,
        "cwd": session["cwd"],
        "restart": session["restart"],
        "restarts": session["restarts"],
        "started": iso(session["started"]),
        "exited": iso(session["exited"]),
        "ended": iso(session["finished"]),
        "lines": session["lines"],
        "bytes": session["bytes"],
        "message": session["message"],
        "test_run": session["parent_run"] or None,
    }


def line(session: dict[str, Any], connected: set[str] | None) -> str:
    state = status(session, connected)
    text = f"- {session['label']}  [{session['mode']}] {state}"
    if session["pid"] and session["mode"] != "forward":
        text += f", pid {session['pid']}"
    if session["message"] and state in ("crashed", "stopped", "restarting"):
        text += f" ({session['message']})"
    elif session["exit_code"] is not None:
        text += f", last exit: {exit_text(session['exit_code'])}"
    text += f"; started {when(session['started'])}"
    if session["exited"]:
        text += f", exited {when(session['exited'])}"
    text += f"; {session['lines']} lines, {_size(session['bytes'])} stored"
    if session["restart"] != "no" or session["restarts"]:
        text += f"; restart={session['restart']}, {session['restarts']} restart(s)"
    text += f"\n    {command_text(session)}  (cwd {session['cwd'] or '-'}; run id {session['run_id']})"
    if session["parent_run"]:
        text += f"\n    started by a test of run {session['parent_run']}"
    return text


def sessions_text(sessions: list[dict[str, Any]], connected: set[str] | None) -> str:
    if not sessions:
        return ""
    live = sum(1 for s in sessions if s["finished"] is None)
    lines = [
        f"Process sessions ({len(sessions)}, {live} not ended), newest first: get_logs(labels=[...]) "
        "reads them, control_process and send_stdin act on them"
    ]
    lines += [line(s, connected) for s in sessions]
    return "\n".join(lines)


def find(store: Store, label: str) -> dict[str, Any]:
    """A process session by label (its newest session) or run id."""
    run_id = store.resolve_run(label) if label else None
    found = store.process_sessions(run_id) if run_id else []
    if found:
        return found[0]
    known = list(dict.fromkeys(s["label"] for s in store.process_sessions()))[:20]
    raise lookup.NotFound(
        f"No process session {lookup.quoted(label)}. "
        + (f"Process sessions: {', '.join(known)}. " if known else "There are no process sessions yet. ")
        + "Start one with start_process(command=...), or `mcpdebug run --label NAME -- COMMAND` in a "
        "shell; list_sessions lists them."
    )


def startup_output(store: Store, session: dict[str, Any]) -> str:
    """The last lines of a session's output so far, with seed 003's truncation footer."""
    run = lookup.run(store, session["run_id"])
    if not session["lines"]:
        return "(no output yet) " + call("get_logs", labels=[session["label"]])
    shown = min(STARTUP_LINES, session["lines"])
    return output_view.get_output(store, run, None, start=-shown, end=-1, keep_end=True).text


def summary(store: Store, run: dict[str, Any]) -> str:
    """A process session as `get_run_summary` and the run resource show it: its state and last lines."""
    session = find(store, run["run_id"])
    headline = f"Process session {session['label']} ({session['mode']}): {session['status']}"
    return report(session, None, startup_output(store, session), headline)


def report(session: dict[str, Any], connected: set[str] | None, output: str, headline: str) -> str:
    """A session's state and output as one text (start_process, control_process)."""
    return "\n".join([headline, line(session, connected), "", output])


def service_lines(store: Store, run_id: str, nodeid: str, start: float, end: float | None) -> str:
    """Lines process sessions wrote while a test ran (its last `SERVICE_LINES`), "" if none did.

    Sessions started by the test run (``MCPDEBUG_PARENT_RUN``) and any other session alive then:
    the service an integration test talks to is usually one of them.
    """
    end = (end if end is not None else time.time()) + SETTLE
    candidates = [
        s
        for s in store.process_sessions()
        if s["parent_run"] == run_id or (s["started"] <= end and (s["finished"] or end) >= start)
    ]
    entries: list[tuple[float, str, str, str]] = []
    for session in candidates:
        for ts, _, _, _, _, stream, text in logs_view.session_lines(
            store, session["run_id"], SERVICE_LINES, start, "both", None, until=end
        ):
            entries.append((ts, session["label"], stream, text))
    if not entries:
        return ""
    entries.sort()
    shown = entries[-SERVICE_LINES:]
    labels = list(dict.fromkeys(label for _, label, _, _ in entries))
    lines = [
        f"--- process sessions during this test ({', '.join(labels)}): "
        f"{'last ' if len(entries) > len(shown) else ''}{len(shown)} lines written while it ran ---"
    ]
    for ts, label, stream, text in shown:
        text = text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " [...]"
        lines.append(f"{iso(ts)} [{label}] {stream}| {text}")
    lines.append(
        f"(all of them: {call('get_logs', labels=[*labels, run_id], since=iso(start))}; {nodeid} "
        f"ran from {iso(start)} for {seconds(end - SETTLE - start)})"
    )
    return "\n".join(lines)


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
