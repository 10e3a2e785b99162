"""`detect_hang`: run tests or a command under the hang watchdog and say whether, and where, it hangs.

Tests run as a `run_tests` run with ``--mcp-debug-timeout``; the answer comes from the run's stored
hang reports. A Python command runs under ``python -m pytest_mcpdebug.hangs.detect``, which writes the
same report for the program. Any other command can only be timed: it is stopped at the timeout and
said to be hung, without stacks (its process is not Python).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from mcpdebug.processes.test_runs import Progress, RunError, Runner, working_dir
from mcpdebug.replies import Detection
from mcpdebug.views import hang as hang_view
from mcpdebug.views import runs as runs_view
from mcpdebug.views.calls import call
from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import HangReport

OUTPUT_LINES = 30
HUNG = 124


async def tests(
    runner: Runner,
    selection: list[str],
    cwd: str | None,
    timeout: float,
    interval: float,
    progress: Progress | None,
) -> Detection:
    args = [*selection, f"--mcp-debug-timeout={timeout:g}", f"--mcp-debug-sample-interval={interval:g}"]
    managed = await runner.start(args, cwd, None, False)
    result = await runner.wait(managed.run_id, None, progress)
    return await asyncio.to_thread(_tests_reply, runner, managed.run_id, result.run)


def _tests_reply(runner: Runner, run_id: str, run: dict[str, Any] | None) -> Detection:
    store = runner.store
    hangs = store.hangs(run_id)
    managed = runner.runs.get(run_id)
    if run is None:
        code = managed.returncode if managed else "?"
        tail = "\n".join(list(managed.terminal)[-OUTPUT_LINES:]) if managed else ""
        raise RunError(f"pytest exited with status {code} before running tests:\n{tail}")
    counts = runs_view.counts_text(run["counts"])
    if not hangs:
        text = (
            f"COMPLETED: no test hung (run {run_id}, {runs_view.status_text(run)}; {counts}).\n"
            f"{call('get_run_summary', run_id=run_id)} has the details."
        )
        return Detection(text=text, verdict="COMPLETED", run_id=run_id, exit_status=run.get("exit_status"))
    parts = [f"HUNG: {len(hangs)} test(s) of run {run_id} hung ({counts})."]
    parts += [hang_view.render(h, run_id, full=False) for h in hangs[:3]]
    if len(hangs) > 3:
        parts.append("Also hung: " + ", ".join(h["nodeid"] for h in hangs[3:]))
    parts.append(
        f"{call('get_hang', run_id=run_id, test='...')} shows every thread, the locals and the output."
    )
    first: HangReport = hangs[0]["report"]
    return Detection(
        text=runs_view.bound("\n\n".join(parts)),
        verdict="HUNG",
        run_id=run_id,
        exit_status=run.get("exit_status"),
        hung_tests=[h["nodeid"] for h in hangs[:20]],
        kind=first.kind,
        file=first.file or None,
        line=first.line or None,
    )


async def command(
    command_line: str, cwd: str | None, timeout: float, interval: float, project: Path | None = None
) -> Detection:
    try:
        argv = shlex.split(command_line)
    except ValueError as exc:
        raise RunError(f"Cannot parse the command ({exc}); quote it as a shell would.") from None
    if not argv:
        raise RunError('The command is empty; give e.g. "python worker.py --once".')
    folder = working_dir(cwd, project)
    program = _python_program(argv)
    with tempfile.TemporaryDirectory(prefix="mcpdebug-detect-") as scratch:
        report_path = Path(scratch) / "report.json"
        if program is not None:
            run = [
                sys.executable,
                "-m",
                "pytest_mcpdebug.hangs.detect",
                f"--timeout={timeout}",
                f"--interval={interval}",
                "--grace=2",
                f"--report={report_path}",
                "--",
                *program,
            ]
            limit = timeout + 10.0  # the watchdog ends it; this is only a last resort
        else:
            run, limit = argv, timeout
        code, output = await _run(run, folder, limit)
        report = protocol.decode_hang_report(report_path.read_bytes()) if report_path.exists() else None
    tail = "\n".join(output)
    if report is not None:
        hang = {"nodeid": command_line, "phase": "", "report": report}
        text = runs_view.bound(
            "HUNG: "
            + hang_view.render(hang, "(detect_hang)", full=True).removeprefix("HANG ")
            + (f"\n\nIts last output:\n{tail}" if tail else "")
        )
        return Detection(
            text=text, verdict="HUNG", kind=report.kind, file=report.file or None, line=report.line or None
        )
    if code is None:
        text = runs_view.bound(
            f"HUNG: {command_line!r} was still running after {timeout:g} s and was stopped. It is not a "
            "Python program, so there are no stacks; for a Python program give it as `python script.py` "
            "(or a .py path) to get where it hangs." + (f"\n\nIts last output:\n{tail}" if tail else "")
        )
        return Detection(text=text, verdict="HUNG")
    text = runs_view.bound(
        f"COMPLETED: {command_line!r} exited with status {code} within {timeout:g} s."
        + (f"\n\nIts last output:\n{tail}" if tail else "")
    )
    return Detection(text=text, verdict="COMPLETED", exit_status=code)


PID_SAMPLING = 2.0
"""Seconds a running process is sampled for (or the timeout, if shorter)."""


async def process(pid: int, seconds: float, interval: float) -> Detection:
    """A running process, sampled from outside with py-spy: what it is doing, as a hang's headline."""
    report, text = await asyncio.to_thread(_sample, pid, seconds, interval)
    return Detection(
        text=text, verdict="SAMPLED", kind=report.kind, file=report.file or None, line=report.line or None
    )


def process_text(pid: int, seconds: float, interval: float) -> str:
    """`mcpdebug hang PID`: the same report, as text."""
    return _sample(pid, seconds, interval)[1]


def _sample(pid: int, seconds: float, interval: float) -> tuple[HangReport, str]:
    from pytest_mcpdebug.hangs import pid as by_pid

    try:
        report = by_pid.sample(pid, duration=seconds, interval=interval)
    except by_pid.NotPython as exc:
        raise RunError(
            f"Cannot sample pid {pid}: {exc}. Give the pid of a running Python process "
            "(`ps -eo pid,args | grep python`)."
        ) from None
    return report, hang_view.process_text(report, pid, by_pid.command_of(pid))


def _python_program(argv: list[str]) -> list[str] | None:
    """The program part of a Python command line (script.py args / -m module args), or None."""
    first = os.path.basename(argv[0])
    if first.startswith("python") or argv[0] == sys.executable:
        rest = argv[1:]
        if rest[:1] == ["-m"] or (rest and rest[0].endswith(".py")):
            return rest
        return None
    if argv[0].endswith(".py"):
        return argv
    return None


async def _run(argv: list[str], cwd: Path, limit: float) -> tuple[int | None, list[str]]:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise RunError(f"Could not start {argv[0]!r}: {exc.strerror}") from None
    output: deque[str] = deque(maxlen=OUTPUT_LINES)

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            output.append(line.decode(errors="replace").rstrip("\n"))

    reader = asyncio.create_task(read())
    try:
        code: int | None = await asyncio.wait_for(process.wait(), limit)
    except (TimeoutError, asyncio.TimeoutError):
        code = None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(reader, 2.0)
    return code, list(output)
