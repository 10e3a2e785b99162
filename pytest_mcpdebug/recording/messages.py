"""The one line a phase's report says (why it did not pass: a skip's reason, the crash's message, a
doctest's expected and got) and its long text, as recorded: secrets redacted."""

from __future__ import annotations

import os
from typing import Any

import pytest


def redact_text(text: str) -> str:
    """``text`` without secrets (`pytest_mcpdebug.redaction`), imported on a run's first problem."""
    from pytest_mcpdebug.redaction import redact

    return redact(text)


def message_of(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The one line that says why a phase did not pass, secrets redacted."""
    return redact_text(_message_text(report))


def _message_text(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, lineno, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message).splitlines()[0][:500]
    return _doctest_message(longrepr) or _last_line(str(longrepr))


def _doctest_message(longrepr: Any) -> str:
    """ "line 4 of mod.py: expected 5, got 4" from pytest's report of a failing doctest example."""
    located = getattr(longrepr, "reprlocation_lines", None)
    if not located:
        return ""
    location, lines = located[0]
    where = f"line {location.lineno} of {os.path.basename(location.path)}"
    rows = [str(line) for line in lines]
    if "Expected:" in rows and "Got:" in rows:
        want, got = (([*rows[rows.index(label) + 1 :], ""])[0] for label in ("Expected:", "Got:"))
        return f"{where}: expected {want.strip()}, got {got.strip()}"[:500]
    if any(row.startswith("UNEXPECTED EXCEPTION:") for row in rows):
        return f"{where}: {_last_line(rows[-1])}"[:500]
    return ""


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip().removeprefix("E").strip()[:500] if lines else ""
