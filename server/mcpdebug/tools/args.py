"""The tools' arguments, each described once: what it is, which tool lists its values, its default.

A tool's parameter is annotated with one of these (``run_id: RunId = "latest"``), so the same
argument reads the same in every tool's ``inputSchema``. Ranges are declared here (``ge``/``le``),
so a value out of range is refused with the range rather than silently clamped. `Example` is not
part of the schema: it is what an error about the argument shows (see `tools.server`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field


@dataclass(frozen=True)
class Example:
    """A valid value, as an agent would write it in a call (``"latest"``, ``5``)."""

    value: str


def test_arg(default: str) -> Any:
    """The ``test`` argument of a tool whose default (``None``) means ``default``."""
    return Field(
        min_length=1,
        description="A test's node id as pytest prints it, or a unique part of it (list_tests lists "
        f"them). Default: {default}.",
    )


TEST_EXAMPLE = Example('"tests/test_cart.py::test_total"')

RunId = Annotated[
    str,
    Field(
        min_length=1,
        description='A run id from list_sessions (a unique prefix works), or "latest" for the newest '
        'run. Default: "latest".',
    ),
    Example('"latest"'),
]
Test = Annotated[
    str,
    Field(
        min_length=1,
        description="A test's node id as pytest prints it, or a unique part of it (list_tests lists them).",
    ),
    TEST_EXAMPLE,
]
FailureTest = Annotated[str | None, test_arg("the run's first failure"), TEST_EXAMPLE]
HangTest = Annotated[str | None, test_arg("the run's first hang"), TEST_EXAMPLE]
OutputTest = Annotated[
    str | None, test_arg("the run's output outside tests (collection, fixtures)"), TEST_EXAMPLE
]
SearchTest = Annotated[str | None, test_arg("every test of the run"), TEST_EXAMPLE]

SessionId = Annotated[
    str,
    Field(
        min_length=1,
        description="A live session: a test held alive at its failure (ids end in -main-N or -gwN-N) or a "
        "debug session, from run_tests, wait_for_stop or list_sessions.",
    ),
    Example('"20261122-011523-424242-main-1"'),
]
LiveSessionId = Annotated[
    str | None,
    Field(
        min_length=1,
        description="A live session (a held test or a debug session) from run_tests, wait_for_stop or "
        "list_sessions: read its live frames instead of the stored snapshot. Default: the stored snapshot.",
    ),
    Example('"20261122-011523-424242-main-1"'),
]
FrameId = Annotated[
    int,
    Field(
        ge=0,
        description="A frame id from get_stack_trace: 0 is where the exception was raised, the test's "
        "own frame is the highest (a debug session: 0 is where it stopped).",
    ),
    Example("0"),
]
OptionalFrameId = Annotated[
    int | None,
    Field(
        ge=0,
        description="A frame id from get_stack_trace (0: the raise point). Default: the test's frame; in a "
        "debug session, 0 (where it stopped).",
    ),
    Example("0"),
]
VariablesReference = Annotated[
    int,
    Field(
        ge=1,
        description="A variablesReference from get_scopes (a frame's locals) or from a value shown with "
        "[ref N] or variablesReference N elsewhere.",
    ),
    Example("1000000"),
]
Stream = Annotated[
    Literal["combined", "stdout", "stderr", "log", "warnings"],
    Field(
        description="combined: stdout, stderr, log records and warnings interleaved (non-stdout lines "
        'tagged); or one of them alone. Default: "combined".'
    ),
    Example('"stderr"'),
]
Pattern = Annotated[
    str,
    Field(
        min_length=1, max_length=2000, description="A Python regular expression matched against each line."
    ),
    Example('"Timeout|refused"'),
]
Since = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Only lines written since: ISO time, epoch seconds or an age like 5m. Default: all.",
    ),
    Example('"10m"'),
]
Seconds = Annotated[
    float | None,
    Field(
        gt=0,
        le=86_400,
        description="Seconds to wait before answering with the run still going. Default: until it stops.",
    ),
    Example("60"),
]
Cwd = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Folder to run in (absolute, or relative to the server's). Default: the server's "
        "folder, or the project's when the server runs outside it.",
    ),
    Example('"/home/me/project"'),
]
