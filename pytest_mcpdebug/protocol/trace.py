"""What a value trace carries (`trace_test`): the changes of a test's locals, line by line.

Compact on purpose: a trace of 10^5 executed lines keeps at most `MAX_STEPS` steps, files and
function names are sent once and referred to by index, and each step is a JSON array.
"""

from __future__ import annotations

from typing import Final

import msgspec

from pytest_mcpdebug.protocol.payloads import Int

# Limits
MAX_STEPS: Final = 20_000
"""Steps one trace keeps: the first `HEAD_STEPS` and the last ones; those between are counted."""
HEAD_STEPS: Final = 4_000

STEP_KINDS: Final = ("call", "set", "return", "raise")


class TraceStep(msgspec.Struct, array_like=True):
    """One recorded fact of a traced test.

    - ``call``: frame ``frame`` of ``function`` started at ``line`` (its ``def``), called from line
      ``at`` of frame ``caller`` (-1: from code that is not traced); ``name``/``value`` unused.
    - ``set``: local ``name`` took ``value`` while line ``line`` ran (arguments: at the ``def`` line).
    - ``return``: the frame returned ``value`` from ``line``.
    - ``raise``: an exception (``name`` its type, ``value`` its message) went through ``line``.
    """

    index: Int
    """How many lines had run in traced code when this happened (orders steps, shows gaps)."""
    kind: str
    frame: Int
    """Numbers each call of a traced function, in the order they started."""
    file: Int
    """Index into `Trace.files`."""
    line: Int
    function: Int
    """Index into `Trace.functions`."""
    name: str = ""
    value: str = ""
    """Rendered as everywhere else (`pytest_mcpdebug.values.render`): bounded, secrets redacted."""
    caller: Int = -1
    at: Int = 0


class Trace(msgspec.Struct, kw_only=True, omit_defaults=True):
    backend: str
    """sys.monitoring (Python 3.12+) or sys.settrace."""
    files: list[str] = []
    functions: list[str] = []
    """Qualified names."""
    steps: list[TraceStep] = []
    lines: Int = 0
    """Lines executed in traced code."""
    head: Int = 0
    """``steps[:head]`` are the first steps; the rest are the last ones (when ``dropped`` > 0)."""
    dropped: Int = 0
    """Steps left out between the head and the tail to keep the trace bounded."""
    watch: list[str] = []
    """Only these names were recorded (empty: every local)."""
    duration: float = 0.0
    """Seconds the traced test took, tracing included."""
    error: str = ""
    """Why tracing stopped early or could not start (another tracer, a debugger)."""
