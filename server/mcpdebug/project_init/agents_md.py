"""The section of `AGENTS.md` (and `CLAUDE.md` where it exists) that tells an agent what to run and
which tool answers which question.

An agent reads it every session, so it stays short. It sits between two markers, and init replaces
what is between them (nothing else) when run again; a file without the markers gets the section
at its end.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcpdebug.project_init.changes import read_text

BEGIN = "<!-- mcpdebug:begin (written by `mcpdebug init`; running it again replaces this section) -->"
END = "<!-- mcpdebug:end -->"
_BEGIN_RE = re.compile(r"^<!-- mcpdebug:begin\b.*-->[ \t]*\r?$", re.MULTILINE)
_END_RE = re.compile(r"^<!-- mcpdebug:end -->[ \t]*\r?$", re.MULTILINE)
_IMPORTS_AGENTS = re.compile(r"^@\.?/?AGENTS\.md\s*$", re.MULTILINE)


class SectionError(Exception):
    """A file whose markers are broken; the message says what to fix."""


def section(program: str, timeout: float, coverage: bool, config_files: list[str]) -> str:
    """The section's text (markers included), for a project whose `mcpdebug` runs as ``program``."""
    hang = (
        f"a test running over {timeout:g} s fails with a diagnosis of where it hangs"
        if timeout
        else "`pytest --mcp-debug-timeout=30` fails a test running over 30 s with a diagnosis of where it "
        "hangs"
    )
    suspects = (
        "`get_suspects`" if coverage else '`get_suspects` (after `run_tests(args=["--mcp-debug-coverage"])`)'
    )
    servers = f" (configured in {', '.join(config_files)})" if config_files else ""
    return "\n".join(
        [
            BEGIN,
            "## Failing or hanging tests: pytest-mcpdebug",
            "",
            f"Every `pytest` run here is recorded in `.mcpdebug/`; {hang}. After a run:",
            "",
            f"- Shell: `{program} show` (failures, errors, hangs), `{program} failure [RUN] [TEST]` (the "
            "failing frames with their locals, a hang's threads, the variables the code reads), "
            f"`{program} logs RUN TEST` (a test's output); a CI artifact's `.mcpdebug/` too "
            "(new runs keep it; `MCPDEBUG=0`: unrecorded).",
            f"- MCP server `mcpdebug`{servers}, by question:",
            "  - why did it fail? `get_failure` (frames, locals, assertion); its output? `get_output`, "
            "`search_output`",
            "  - where does it hang? `get_hang`; a process that hangs now: `detect_hang(pid=...)`",
            f"  - the bug is not on the failing stack? {suspects}, then `localize(budget=30)` (re-runs the "
            "failing tests with small changes of the top suspects); how a value got its state? `trace_test`, "
            "then `get_history`",
            "  - new or flaky? `get_test_history`, `list_flaky`",
            "  - inspect a failing test alive: `run_tests(args=[...], break_on_failure=True)`, then "
            "`evaluate_expression`",
            "  - a tool named here is not listed? `enable_tools(groups=[...])` lists its group (`hangs`, "
            "`diagnosis`, `localize`, `debug`, ...)",
            END,
        ]
    )


def render(path: Path, text: str, *, create: bool) -> tuple[str | None, str | None]:
    """The file's text now and with the section in it; (None, None) when the file is absent and not
    to be made, or is a `CLAUDE.md` that imports `AGENTS.md` (the section would be read twice)."""
    if not path.is_file():
        return (None, text + "\n") if create else (None, None)
    before = read_text(path)
    if path.name == "CLAUDE.md" and _IMPORTS_AGENTS.search(before):
        return None, None
    nl = "\r\n" if "\r\n" in before else "\n"
    body = text.replace("\n", nl)
    begin, end = _BEGIN_RE.search(before), _END_RE.search(before)
    if begin is None and end is None:
        blank = not before.strip() or before.endswith(nl + nl)
        gap = "" if blank else nl if before.endswith(nl) else nl * 2  # one blank line before the section
        return before, before + gap + body + nl
    if begin is None or end is None or end.start() < begin.start():
        raise SectionError(
            f"{path} has one of the mcpdebug section's markers without the other ({BEGIN} ... {END}); "
            "fix or remove them, then run mcpdebug init again"
        )
    line_end = before.find("\n", end.start())
    after_end = len(before) if line_end < 0 else line_end
    if before[after_end - 1 : after_end] == "\r":
        after_end -= 1
    return before, before[: begin.start()] + body + before[after_end:]
