"""Names the CLI's flags share with the store and the tools: the store's error, exit statuses, output
streams and phases, the default listing size.

A module of constants on purpose: `mcpdebug run`, `forward` and `hang` build the whole argument
parser, and importing the store (sqlite, regex, pydantic) for these would cost them ~100 ms of
start-up each.
"""

from __future__ import annotations

from typing import Final

COMBINED: Final = "combined"
STREAM_CHOICES: Final = (COMBINED, "stdout", "stderr", "log", "warnings")
PHASE_CHOICES: Final = ("setup", "call", "teardown", "collect", "fixture")
EXIT_NOT_FOUND: Final = 3
"""A command's exit status when what it was asked for (a run, a test, a process) is not there."""
SHOW_TESTS: Final = 50
"""Tests `mcpdebug show` lists besides the failures, unless asked for more."""


class StoreError(Exception):
    """A store that cannot be opened or used; the message says what to do."""
