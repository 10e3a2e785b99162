"""The text of `get_hang` (and the hang section of `get_failure`): why a test did not finish.

Everything comes from the report the hung process built about itself at its deadline (or, for a
process that held the GIL, from faulthandler's dump of it): the classification, where it loops or
waits with the source, the locals there, every thread's stack, asyncio tasks, and its last output.
"""

from __future__ import annotations

import os
from typing import Any, Final

from mcpdebug.replies import FailureReport, HangInfo
from mcpdebug.store import Store
from mcpdebug.views import code_environment, lookup, output_window
from mcpdebug.views import failure as failure_view
from mcpdebug.views import output as output_view
from mcpdebug.views import runs as runs_view
from mcpdebug.views.calls import call, in_terminal
from pytest_mcpdebug.protocol import HangProcess, HangReport, HangTask, HangThread

ACTIONS: Final = {
    "fail": "the test was failed and the run went on",
    "exit": "the run was ended",
    "pause": "the process was held for an agent",
}
KINDS: Final = {
    "busy": "busy loop",
    "polling": "polling loop",
    "blocked": "blocked",
    "gil": "C call holding the GIL",
    "stuck": "could not be interrupted",
    "killed": "stopped from outside (SIGTERM or the session timeout)",
    "interrupted": "interrupted (SIGINT)",
    "crashed": "the process crashed",
    "unknown": "not classified",
}


def get_hang(store: Store, run: dict[str, Any], test: str | None) -> HangInfo:
    rid = run["run_id"]
    hangs = store.hangs(rid)
    if test is not None:
        lookup.test(store, run, test)  # an unknown test is an error, hangs or not
    if not hangs:
        timeout = call("run_tests", args=["--mcp-debug-timeout", "30"])
        text = (
            f"Run {rid} has no hangs: no test ran past an mcpdebug timeout "
            f"({runs_view.counts_text(run['counts'])}). "
            f"Run with --mcp-debug-timeout SECONDS (or {timeout}) to diagnose hangs; "
            f"{call('get_run_summary', run_id=rid)} shows what happened."
        )
        return HangInfo(text=text, run_id=rid, next_call=call("get_run_summary", run_id=rid))
    chosen = hangs[0]
    if test is not None:
        nodeid = lookup.test(store, run, test)["nodeid"]
        mine = [h for h in hangs if h["nodeid"] == nodeid]
        if not mine:
            names = lookup.listing([h["nodeid"] or "(the run)" for h in hangs])
            raise lookup.NotFound(f"{nodeid} did not hang in run {rid}. Hangs: {names}.")
        chosen = mine[0]
    text = render(chosen, rid, full=True)
    report: HangReport = chosen["report"]
    read = code_environment.lines(run, store.shards(rid), _project_files(report), store.dir.parent)
    text += "\n" + "\n".join(read) if read else ""
    if chosen["kind"] in ("crashed", "killed", "gil", "stuck") and chosen["nodeid"]:
        text += "\n\n" + output_view.output_tail(store, run, chosen["nodeid"], 20)  # what it wrote before
    others = [h for h in hangs if h is not chosen]
    if others:
        text += f"\n\nOther hangs in this run ({len(others)}):\n" + "\n".join(
            f"- {h['nodeid']}: {h['summary']}" for h in others[:20]
        )
    return HangInfo(
        text=output_window.bounded(text),
        run_id=rid,
        test=chosen["nodeid"] or None,
        kind=report.kind,
        summary=report.summary,
        file=report.file or None,
        line=report.line or None,
        function=report.function or None,
        other_hangs=[h["nodeid"] or "(the run)" for h in others[:20]],
        next_call=call("get_output", run_id=rid, test=chosen["nodeid"] or None),
    )


def _project_files(report: HangReport) -> list[str]:
    """The files of the hang's place and of the test's own frames (its thread's, its tasks')."""
    frames = [f for t in report.threads if t.test for f in t.frames]
    frames += [f for task in report.tasks for f in task.frames]
    return ([report.file] if report.file else []) + [f.file for f in frames if not f.library]


def render(hang: dict[str, Any], run_id: str, *, full: bool) -> str:
    report: HangReport = hang["report"]
    nodeid = hang["nodeid"] or "(the run)"
    lines = [
        f"HANG {nodeid}"
        + (f" ({hang['phase']})" if hang["phase"] else "")
        + f" in run {run_id}: {report.summary}",
        f"Kind: {KINDS.get(report.kind, report.kind)}." + _timing(report),
    ]
    if report.action:
        lines.append(f"Then: {ACTIONS.get(report.action, report.action)}.")
    if report.file and report.line:
        lines += ["", f"Where: {report.file}:{report.line} in {report.function}()"]
        if report.source:
            width = len(str(report.source[-1][0]))
            marked = set(report.lines or [report.line])
            lines += [f"  {'>' if n in marked else ' '} {n:>{width}} | {t}" for n, t in report.source]
    if report.locals:
        lines += [
            "",
            f"Locals of {report.locals_frame or 'that frame'}:",
            *failure_view._locals(report.locals)[1:],
        ]
    if report.tasks:
        lines += ["", f"asyncio tasks ({len(report.tasks)}):"]
        for task in report.tasks[: 30 if full else 5]:
            where = next((f for f in task.frames if not f.library), task.frames[0] if task.frames else None)
            at = f" at {where.file}:{where.line} in {where.function}()" if where else ""
            waits = f", awaiting {task.awaiting}" if task.awaiting else ""
            lines.append(f"- {task.name} ({task.coro}, {task.state}){at}{waits}")
            chain = _await_chain(task)
            if chain:
                lines.append(f"    awaits through: {chain}")
                lines += _innermost_code(task)
    lines += _processes(report.processes, full)
    threads = report.threads if full else [t for t in report.threads if t.test]
    if threads:
        lines += [
            "",
            f"Threads ({len(report.threads)}), the test's first, innermost frame first:"
            if full
            else "The test's thread:",
        ]
        for thread in threads:
            lines += _thread(thread, full)
    if full and report.output:
        lines += ["", f"Output just before the hang (last {len(report.output)} lines):"]
        lines += [f"  {line}" for line in report.output]
    if report.samples:
        lines += [
            "",
            f"Diagnosis from {report.samples} samples of the test's stack, every {report.interval:g} s.",
        ]
    return "\n".join(lines)


def _timing(report: HangReport) -> str:
    parts = []
    if report.timeout:
        parts.append(f" Timeout {report.timeout:g} s; reported after {report.elapsed:.1f} s")
    if report.cpu is not None and report.elapsed > 0:
        parts.append(
            f"the test's thread used {report.cpu:.2f} s of CPU in {report.elapsed:.1f} s "
            f"({report.cpu / report.elapsed:.0%})"
        )
    return ("; ".join(parts) + ".") if parts else ""


def _thread(thread: HangThread, full: bool) -> list[str]:
    label = "[test] " if thread.test else ""
    extra = " (daemon)" if thread.daemon else ""
    cpu = f", CPU {thread.cpu:.2f} s" if thread.cpu is not None else ""
    where = f" {thread.summary}" if thread.summary and not thread.test else ""
    out = [f"  {label}{thread.name}{extra}{cpu}:{where}"]
    for number, frame in enumerate(thread.frames):
        if frame.library and (number > 2 or (number > 0 and not full)):
            out.append(
                f"    #{number} {_short_path(frame.file)}:{frame.line} in {frame.function}() [library]"
            )
            continue
        code = f"   `{frame.code}`" if frame.code else ""
        out.append(f"    #{number} {frame.file}:{frame.line} in {frame.function}(){code}")
    return out


AWAIT_CHAIN: Final = 10
"""Frames of a task's await chain shown (the project's, outermost first)."""


def _await_chain(task: HangTask) -> str:
    """The project's coroutines a task is suspended in, outermost first, each with its line: the
    callers of the place it waits, where a fault one or two calls up would be (a parser, a buffer)."""
    mine = [f for f in reversed(task.frames) if not f.library]
    if len(mine) < 2:
        return ""
    shown = [f"{f.function}() ({os.path.basename(f.file)}:{f.line})" for f in mine[-AWAIT_CHAIN:]]
    return ("... -> " if len(mine) > AWAIT_CHAIN else "") + " -> ".join(shown)


INNERMOST_CODE: Final = 3
"""Frames of an await chain shown with their source line (the project's, innermost)."""


def _innermost_code(task: HangTask) -> list[str]:
    """The source lines of the innermost frames of a task's await chain, innermost last, as a
    traceback shows them: where it waits and the calls just above, without opening the files."""
    mine = [f for f in reversed(task.frames) if not f.library and f.code]
    return [
        f"      {os.path.basename(f.file)}:{f.line} in {f.function}(): {f.code}"
        for f in mine[-INNERMOST_CODE:]
    ]


def _short_path(path: str) -> str:
    """A library file as its package path (``_pytest/runner.py``): where it is installed adds nothing."""
    for marker in ("/site-packages/", "/dist-packages/", "/lib/python3"):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3" and "/" in tail else tail
    return path


def _processes(processes: list[HangProcess], full: bool) -> list[str]:
    """The hung process's descendants: where each Python one is, or why it could not be read."""
    if not processes:
        return []
    out = ["", f"Child processes ({len(processes)}), seen from outside with py-spy:"]
    for process in processes[: 30 if full else 8]:
        what = process.summary if process.python else (process.error or "not read")
        command = (
            process.command
            if len(process.command) <= 120
            else f"{process.command[:40]}...{process.command[-77:]}"
        )
        out.append(f"- pid {process.pid} ({process.status}) `{command}`: {what}")
        if full and process.threads:
            for thread in process.threads[:4]:
                out += _thread(thread, full=False)[:8]
    return out


def process_text(report: HangReport, pid: int, command: str) -> str:
    """`mcpdebug hang PID` and ``detect_hang(pid=...)``: a running process, sampled from outside."""
    body = render({"nodeid": "", "phase": "", "report": report}, "", full=True).split("\n")
    seconds = f"{report.elapsed:.1f} s"
    body[0] = f"PID {pid} `{command[:200]}`: {report.summary}"
    body[1] = f"Kind: {KINDS.get(report.kind, report.kind)}. Sampled {report.samples} times in {seconds}."
    text = "\n".join(body).replace("samples of the test's stack", "samples of each thread's stack")
    text = text.replace("the test's first, innermost", "the one named first, innermost")
    text = text.replace("  [test] ", "  [named] ")
    return output_window.bounded(text)


def hang_section(store: Store, run_id: str, nodeid: str) -> str:
    """The hang part of get_failure for a test that hung, or ""."""
    hangs = store.hangs(run_id, nodeid)
    if not hangs:
        return ""
    if in_terminal():  # `mcpdebug failure` is the CLI's get_hang too: every thread, the output before
        return "\n\n" + render(hangs[0], run_id, full=True)
    return (
        "\n\n"
        + render(hangs[0], run_id, full=False)
        + f"\n{call('get_hang', run_id=run_id, test=nodeid)} shows every thread and the output before it."
    )


def failure_or_hang(store: Store, run: dict[str, Any], test: str | None) -> FailureReport:
    """get_failure's reply: the failure snapshot, with the hang diagnosis of a test that hung; for a
    test whose process died (no snapshot could be taken), what is known: the crash, the hang report
    or sampled stack if any, and its last output; for a run without any failure, a normal reply
    saying so."""
    try:
        reply = failure_view.get_failure(store, run, test)
    except failure_view.NoFailures as exc:
        crash = _crash(store, run, test)
        if crash is not None:
            return crash
        if test is not None:
            raise
        rid = run["run_id"]
        return FailureReport(text=str(exc), run_id=rid, kind="none", next_call=call("list_tests", run_id=rid))
    for hung in store.hangs(run["run_id"]):
        if hung["nodeid"] == reply.test:
            reply.text += hang_section(store, run["run_id"], hung["nodeid"])
    if reply.test:
        reply.text += attempts_section(store, run["run_id"], reply.test)
    return reply


def attempts_section(store: Store, run_id: str, nodeid: str) -> str:
    """A test run more than once (pytest-rerunfailures): each attempt's outcome, failure and hang."""
    attempts = store.attempts(run_id, nodeid)
    if not attempts:
        return ""
    lines = ["", "", f"Attempts ({len(attempts)}); the last is the outcome pytest reports:"]
    for a in attempts:
        where = f" ({a['phase']})" if a["phase"] else ""
        lines.append(
            f"- {a['attempt']}. {a['outcome']}{where} in {a['duration']:.2f}s: {a['message'] or '-'}"
        )
        if a["hang"]:
            lines.append(f"  hung: {a['hang']}")
    return "\n".join(lines)


def _crash(store: Store, run: dict[str, Any], test: str | None) -> FailureReport | None:
    """The reply for a test without a snapshot that hung or died, or None if it simply did not fail."""
    rid = run["run_id"]
    if test is None:
        if store.hangs(rid):
            return _as_failure(get_hang(store, run, None))
        running = store.tests(rid, ("running",)) if run["status"] in ("crashed", "killed") else []
        return _died(store, run, running[0]) if running else None
    row = lookup.test(store, run, test)
    if store.hangs(rid, row["nodeid"]):
        return _as_failure(get_hang(store, run, row["nodeid"]))
    if row["status"] == "running" and run["status"] in ("crashed", "killed"):
        return _died(store, run, row)
    failed = [p for p in store.phases(rid, row["nodeid"]) if p["outcome"] == "failed"]
    if not failed or store.failures(rid, row["nodeid"]):
        return None
    phase = failed[0]
    more = call("get_output", run_id=rid, test=row["nodeid"])
    text = output_window.bounded(
        f"FAILED {row['nodeid']} ({phase['phase']}) in run {rid}: {phase['message'] or '(no message)'}\n"
        "No snapshot of its frames: its process ended before it could take one (a crashed xdist worker, "
        "os._exit, a signal), so there are no locals to show.\n\n"
        f"pytest's report:\n{phase['longrepr'][-4000:]}\n\n"
        f"{output_view.output_tail(store, run, row['nodeid'], 30)}\n\n"
        f"Next: {more} reads all it wrote."
    )
    return FailureReport(
        text=text,
        run_id=rid,
        test=row["nodeid"],
        kind="failed" if phase["phase"] == "call" else "error",
        phase=phase["phase"],
        exception=phase["message"] or None,
        next_call=more,
    )


def _as_failure(hang: HangInfo) -> FailureReport:
    return FailureReport(
        text=hang.text,
        run_id=hang.run_id,
        test=hang.test,
        kind="hang",
        file=hang.file,
        line=hang.line,
        function=hang.function,
        exception=hang.summary,
        next_call=hang.next_call,
    )


def _died(store: Store, run: dict[str, Any], test: dict[str, Any]) -> FailureReport:
    """A process that vanished without a trace (os._exit, SIGKILL): what the store still knows."""
    output = output_view.output_tail(store, run, test["nodeid"], 30)
    text = output_window.bounded(
        f"CRASHED {test['nodeid']} in run {run['run_id']}: its process (worker {test['worker']}) ended "
        "while the test ran, without a traceback or a hang report: it exited without a fatal signal "
        "Python could catch (os._exit, SIGKILL, the OOM killer) or before it could write one.\n\n"
        f"{output}"
    )
    return FailureReport(
        text=text,
        run_id=run["run_id"],
        test=test["nodeid"],
        kind="crashed",
        next_call=call("get_output", run_id=run["run_id"], test=test["nodeid"]),
    )
