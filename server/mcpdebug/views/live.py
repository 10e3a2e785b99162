"""Replies of the live tools (a test held at its failure) and of run_tests / wait_for_stop.

Inspection replies keep the shapes of the stored ones (`snapview`): the held process computes them
from its live frames, this module adds the session and bounds them. Stop and finish summaries say
what happened and which call comes next.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from msgspec.structs import replace

from mcpdebug.live.sessions import LiveSession, Sessions
from mcpdebug.processes.test_runs import ManagedRun, Outcome
from mcpdebug.replies import Data, Evaluation, HeldSession, RunState, Scopes, SourceContext, Stack, Variables
from mcpdebug.store import Store
from mcpdebug.views import failure as failure_view
from mcpdebug.views import hang as hang_view
from mcpdebug.views import import_problem, lookup, time_text
from mcpdebug.views import runs as runs_view
from mcpdebug.views.calls import call
from mcpdebug.views.frames import source_context
from pytest_mcpdebug.protocol import SnapshotVar

INSPECT_REPLIES: dict[str, type[Data]] = {
    "stack": Stack,
    "scopes": Scopes,
    "variables": Variables,
    "locals": Variables,
    "evaluate": Evaluation,
}


async def inspect(sessions: Sessions, session_id: str, command: str, **arguments: Any) -> Any:
    """The held process's answer to ``command``, typed as the stored-snapshot tools' replies."""
    result = await sessions.request(session_id, command, arguments)
    return INSPECT_REPLIES[command].model_validate({"session": session_id, **result})


async def source(
    sessions: Sessions, store: Store, session_id: str, file: str, line: int, lines_context: int
) -> SourceContext:
    if sessions.is_local(session_id):  # a debug session: its folder and the files of its stop
        where = await sessions.request(session_id, "files", {})
        return source_context(where["root"], where["files"], file, line, lines_context)
    session = sessions.get(session_id)
    stack = await sessions.request(session_id, "stack", {"include_library": True})
    run = await asyncio.to_thread(store.run, session.run_id)
    files = [f["file"] for f in stack.get("stackFrames", [])]
    return source_context(run["rootdir"] if run else "", files, file, line, lines_context)


def held_rows(sessions: list[LiveSession]) -> list[HeldSession]:
    now = time.time()
    return [
        HeldSession(
            session_id=s.id,
            test=s.nodeid,
            run_id=s.run_id,
            worker=s.worker,
            reason=s.reason,
            resumes_in=round(max(s.timeout - (now - max(s.held_at, s.active_at)), 0), 1)
            if s.timeout
            else None,
        )
        for s in sessions
    ]


def held_sessions(sessions: list[LiveSession]) -> str:
    if not sessions:
        return ""
    now = time.time()
    lines = [f"Held now, live ({len(sessions)}): evaluate_expression and the inspection tools take these ids"]
    for s in sessions:
        left = max(s.timeout - (now - max(s.held_at, s.active_at)), 0) if s.timeout else None
        what = "hung, paused" if s.reason == "hang" else f"{s.when} failed"
        lines.append(
            f"- session {s.id}: {s.nodeid} ({what}), run {s.run_id}, worker {s.worker}, held "
            f"{time_text.seconds(now - s.held_at)}"
            + (f"; resumes by itself after {left:.0f} s more without a request" if left is not None else "")
        )
    return "\n".join(lines)


async def live_locals(sessions: Sessions, session_id: str) -> list[dict[str, Any]]:
    """The held frames' locals as the live session numbers them (so their refs expand there):
    the raise point's and the test function's."""
    out: list[dict[str, Any]] = []
    try:
        stack = await sessions.request(session_id, "stack", {})
        ids = [f["id"] for f in stack.get("stackFrames", [])]
        for frame_id in dict.fromkeys([*ids[:1], *ids[-1:]]):
            out.append(await sessions.request(session_id, "locals", {"frame_id": frame_id}))
    except Exception:
        return []  # the stored snapshot's values are shown instead
    return out


def outcome(store: Store, result: Outcome, frames: list[dict[str, Any]] | None = None) -> RunState:
    """The reply of run_tests and wait_for_stop (``frames``: `live_locals` of a stop)."""
    if result.kind == "stopped":
        session = result.session
        assert session is not None
        return RunState(
            text=runs_view.bound(_stopped(store, session, result.run, frames or [])),
            state="stopped",
            run_id=session.run_id,
            session_id=session.id,
            test=session.nodeid,
            next_call=call("evaluate_expression", session_id=session.id, expression="..."),
        )
    rid = result.run["run_id"] if result.run else (result.managed.run_id if result.managed else None)
    if result.kind == "waiting":
        return RunState(
            text=runs_view.bound(_waiting(result)),
            state="running",
            run_id=rid,
            next_call=call("wait_for_stop", id=rid, timeout=60),
        )
    text = runs_view.bound(_finished(store, result))
    run = result.run or {}
    managed = result.managed
    code = run.get("exit_status", managed.returncode if managed else None)
    return RunState(
        text=text,
        state="finished",
        run_id=rid,
        exit_status=code,
        next_call=call("get_run_summary", run_id=rid),
    )


def _stopped(
    store: Store, session: LiveSession, run: dict[str, Any] | None, frames: list[dict[str, Any]]
) -> str:
    sid, rid = session.id, session.run_id
    if session.reason == "hang":
        lines = [
            f"STOPPED: {session.nodeid} hangs and is paused alive as session {sid} (run {rid}, worker "
            f"{session.worker}); every thread's frames can be inspected."
        ]
        hangs = store.hangs(rid, session.nodeid)
        if hangs:
            lines += ["", hang_view.render(hangs[-1], rid, full=False)]
    else:
        lines = [
            f"STOPPED: {session.nodeid} failed in {session.when} and is held alive as session {sid} "
            f"(run {rid}, worker {session.worker})."
        ]
    failures = store.failures(rid, session.nodeid) if session.reason != "hang" else []
    failure = next((f for f in failures if f["phase"] == session.when), failures[-1] if failures else None)
    if failure is not None:
        snap = failure["snapshot"]
        lines.append(f"{snap.exception.type}: {failure_view._first_line(snap.exception.message)}")
        user = [f for f in snap.frames if not f.library]
        if user:
            top = user[0]
            lines += ["", f"Raised at {top.file}:{top.line} in {top.function}()", *failure_view._source(top)]
            if not frames:  # no live answer: the snapshot's values, without its (stored) refs
                lines += failure_view._locals([replace(v, ref=0) for v in top.locals])
                if user[-1] is not top:
                    test_frame = user[-1]
                    lines += [f"Test frame: {test_frame.file}:{test_frame.line} in {test_frame.function}()"]
                    lines += failure_view._locals([replace(v, ref=0) for v in test_frame.locals])
    for number, frame in enumerate(frames):
        where = frame.get("frame", {})
        if number:
            lines.append(f"Test frame: {where.get('file')}:{where.get('line')} in {where.get('name')}()")
        lines += failure_view._locals(
            [
                SnapshotVar(name=v["name"], type=v["type"], value=v["value"], ref=v["variablesReference"])
                for v in frame.get("variables", [])
            ]
        )
    if failure is not None:
        snap = failure["snapshot"]
        if snap.assertion:
            lines += ["", "Assertion (pytest's introspection):", failure_view._indent(snap.assertion)]
    if run is not None:
        lines += ["", f"Run so far: {runs_view.counts_text(run['counts'])}"]
    lines += [
        "",
        f'Next: evaluate_expression(session_id="{sid}", expression=...) runs code in the test\'s frame; '
        f'get_stack_trace / get_local_variables / get_variables(session_id="{sid}") read the live frames '
        "(a [ref N] expands with get_variables). "
        f'continue_execution(session_id="{sid}") resumes the run, then wait_for_stop("{rid}") waits for '
        f'the next stop or the end; close_session(session_id="{sid}") stops the run.'
        + (
            f" Without a request for {session.timeout:g} s the test resumes by itself."
            if session.timeout
            else ""
        ),
    ]
    return "\n".join(lines)


def _waiting(result: Outcome) -> str:
    run, managed = result.run, result.managed
    rid = run["run_id"] if run else (managed.run_id if managed else "?")
    text = f"RUNNING: run {rid} has not stopped at a failure or finished yet"
    if run is not None:
        text += f" ({runs_view.counts_text(run['counts'])} so far)"
    return (
        text
        + f'.\nNext: wait_for_stop("{rid}", timeout=...) waits again; get_run_summary(run_id="{rid}") and '
        f'get_output(run_id="{rid}", test=...) read it live; close_session("{rid}") stops it.'
        + _terminal(managed, 10)
    )


def _finished(store: Store, result: Outcome) -> str:
    run, managed = result.run, result.managed
    if run is None:
        assert managed is not None
        imports = import_problem.advice(store, None, managed.terminal, managed.cwd)
        raise lookup.NotFound(
            f"pytest exited with status {managed.returncode} before recording anything "
            f"(run {managed.run_id}, in {managed.cwd}).{_terminal(managed, 30)}\n"
            + (imports or "Fix the arguments or the project and call run_tests again.")
        )
    rid = run["run_id"]
    summary = runs_view.summary(store, run).text
    exit_note = ""
    if managed is not None and managed.returncode is not None and run.get("exit_status") is None:
        exit_note = f"\nThe pytest process exited with status {managed.returncode} without finishing its run."
    imports = ""
    if managed is not None and run["collection_errors"]:
        imports = import_problem.advice(store, run, managed.terminal, managed.cwd)
    head = f"FINISHED: run {rid}.\n" + (f"{imports}\n\n" if imports else "")
    return f"{head}{summary}{exit_note}{_terminal(managed, 15)}"


def _terminal(managed: ManagedRun | None, lines: int) -> str:
    if managed is None or not managed.terminal:
        return ""
    tail = list(managed.terminal)[-lines:]
    return (
        f"\n\npytest's terminal output (last {len(tail)} lines; all of it in {managed.log_path}):\n"
        + "\n".join(tail)
    )
