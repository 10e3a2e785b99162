"""A hang report as it leaves the process: its text without secrets (`pytest_mcpdebug.redaction`).

Its values are redacted as they are rendered (`pytest_mcpdebug.values`); this takes the rest: the
code lines of every stack, the source around the hung line, the output tail, the summaries and the
command lines of child processes (``psql postgres://admin:<redacted>@db``).
"""

from __future__ import annotations

from pytest_mcpdebug.protocol import HangFrame, HangReport
from pytest_mcpdebug.redaction import redact


def without_secrets(report: HangReport) -> HangReport:
    """``report`` with its text redacted, in place (it is returned for a caller's convenience)."""
    report.summary = redact(report.summary)
    report.call = redact(report.call, code=True)
    report.source = [(n, redact(text, code=True)) for n, text in report.source]
    report.output = [redact(line) for line in report.output]
    for thread in report.threads:
        thread.summary = redact(thread.summary)
        _frames(thread.frames)
    for task in report.tasks:
        task.coro, task.awaiting = redact(task.coro), redact(task.awaiting)
        _frames(task.frames)
    for process in report.processes:
        process.command, process.summary = redact(process.command), redact(process.summary)
        for thread in process.threads:
            thread.summary = redact(thread.summary)
            _frames(thread.frames)
    return report


def _frames(frames: list[HangFrame]) -> None:
    for frame in frames:
        if frame.code:
            frame.code = redact(frame.code, code=True)
