"""A logpoint's message names its breakpoint, so the server counts its hits.

debugpy reports what a logpoint logs as an output event that says nothing of which logpoint it was.
The server sends each logpoint's message to debugpy behind a prefix naming it (``MARK id MARK``);
it counts the hit when the output event arrives and stores the message without the prefix, and a
debug test run writes its own copy (to the test's stdout) without it too. A message whose
expression raises comes without the prefix (debugpy logs the error instead) and counts no hit.
"""

from __future__ import annotations

from typing import Final

MARK: Final = "\x1f"
"""ASCII's unit separator: never in a message the agent writes (set_breakpoint refuses it)."""


def marked(breakpoint_id: str, message: str) -> str:
    return f"{MARK}{breakpoint_id}{MARK}{message}"


def split(text: str) -> tuple[str | None, str]:
    """(the logpoint's id, its message) of an output event's text; (None, text) for other output."""
    if text.startswith(MARK):
        end = text.find(MARK, 1)
        if end > 0:
            return text[1:end], text[end + 1 :]
    return None, text
