"""What a failure snapshot and a hang report carry: stored as they were sent, rendered by the server."""

from __future__ import annotations

from typing import Annotated

import msgspec

Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""Every integer on the wire fits SQLite's 64-bit integers; larger ones are rejected at decode."""


class SnapshotVar(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A variable: its value rendered by seed 000's rules; ``ref`` > 0 if it has children."""

    name: str
    type: str
    value: str
    ref: Int = 0


class SnapshotException(msgspec.Struct, kw_only=True, omit_defaults=True):
    type: str
    message: str
    relation: str = ""
    """For a link of the chain: "cause" (raise ... from) or "context" (raised while handling)."""


class SnapshotFrame(msgspec.Struct, kw_only=True, omit_defaults=True):
    file: str
    """Absolute path."""
    line: Int
    function: str
    library: bool = False
    """A frame of the standard library, site-packages, pytest or pluggy (no locals kept)."""
    source: list[tuple[Int, str]] = []
    locals: list[SnapshotVar] = []


class DoctestExample(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A doctest example that did not give what its docstring or text file says it should."""

    file: str
    """Absolute path of the file holding the example."""
    line: Int = 0
    """Line of the example's ``>>>`` in ``file`` (1-based; 0 when doctest could not tell)."""
    name: str
    """The doctest's name: "mod.add", or a text file's name."""
    number: Int = 0
    """Which example of the doctest (1-based), of ``examples``."""
    examples: Int = 0
    source: str
    """The example's code, without prompts."""
    want: str = ""
    """The output the example expects."""
    got: str = ""
    """The output it gave, for a mismatch."""
    exception: str = ""
    """"NameError: name 'x' is not defined" when the example raised unexpectedly."""


class Snapshot(msgspec.Struct, kw_only=True, omit_defaults=True):
    exception: SnapshotException
    chain: list[SnapshotException] = []
    notes: list[str] = []
    """The exception's notes: hypothesis puts its falsifying example here."""
    assertion: str = ""
    """pytest's assertion introspection: the compared values and its explanation."""
    frames: list[SnapshotFrame] = []
    """Innermost (the raise point) first, down to the test function."""
    frames_dropped: Int = 0
    children: dict[str, list[SnapshotVar]] = {}
    """Children of expandable variables, by ``ref``."""
    doctest: list[DoctestExample] = []
    """The failing examples of a doctest (several with ``--doctest-continue-on-failure``)."""


class HangFrame(msgspec.Struct, kw_only=True, omit_defaults=True):
    file: str
    line: Int
    function: str
    code: str = ""
    """The source line."""
    library: bool = False


class HangThread(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    ident: Int
    frames: list[HangFrame] = []
    """Innermost first."""
    test: bool = False
    """The thread running the test."""
    daemon: bool = False
    cpu: float | None = None
    """CPU seconds this thread used while the test ran (where the platform tells)."""
    summary: str = ""
    """Where a thread other than the test's is, when it runs the project's code ("blocked in ...")."""


class HangTask(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An asyncio task of the loop the test thread runs, and where it waits."""

    name: str
    coro: str
    state: str
    awaiting: str = ""
    frames: list[HangFrame] = []


class HangProcess(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A live descendant of the hung process, seen from outside (psutil, and py-spy for Python)."""

    pid: Int
    ppid: Int = 0
    command: str = ""
    """Its command line, cut to a few hundred characters."""
    status: str = ""
    """The OS's word for it: sleeping, running, disk-sleep, zombie, stopped..."""
    python: bool = False
    summary: str = ""
    """Where its main thread is, in the words of a hang's headline ("blocked in ... at line 6 of ...")."""
    error: str = ""
    """Why its stacks could not be read (py-spy missing, ptrace not permitted, not Python), and what to do."""
    threads: list[HangThread] = []


class HangReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Why a test (or a run) did not finish: the watchdog's diagnosis from the hung process itself."""

    kind: str
    """busy, polling, blocked, unknown, gil (a C call holding the GIL), killed or crashed."""
    summary: str
    """One line: "busy loop in lines 40-44 of retry_forever() (tests/test_x.py); 98% CPU"."""
    file: str = ""
    function: str = ""
    line: Int = 0
    lines: list[Int] = []
    call: str = ""
    wait_kind: str = ""
    since: float = 0.0
    timeout: float = 0.0
    elapsed: float = 0.0
    """Wall seconds from the start of the timed part of the test to the report."""
    cpu: float | None = None
    """CPU seconds the test's thread used in that time."""
    phase: str = ""
    samples: Int = 0
    interval: float = 0.0
    action: str = ""
    """What happened next: fail, pause, exit, or "" (recorded only)."""
    threads: list[HangThread] = []
    locals: list[SnapshotVar] = []
    locals_frame: str = ""
    """Whose locals: "retry_forever() at /abs/x.py:42"."""
    children: dict[str, list[SnapshotVar]] = {}
    tasks: list[HangTask] = []
    output: list[str] = []
    """The last lines the test wrote before the report."""
    processes: list[HangProcess] = []
    """The process's live descendants (child processes, pool workers) and where each one is."""
    source: list[tuple[Int, str]] = []
