"""The frames: what every frame is built on, and every event (what a run records).

The frames that run a connection (the handshake, flow control, live inspection and process control),
and the unions of what a client or the server sends, are `control`'s.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Final

import msgspec

from pytest_mcpdebug.protocol import versions
from pytest_mcpdebug.protocol.payloads import HangReport, Int, Snapshot
from pytest_mcpdebug.protocol.trace import Trace

PROTOCOL_VERSION: Final = versions.PROTOCOL_VERSION
ACCEPTED_VERSIONS: Final = versions.ACCEPTED_VERSIONS
SHORT_RECORDS_VERSION: Final = versions.SHORT_RECORDS_VERSION
HELLO_VERSION: Final = versions.HELLO_VERSION
"""(Defined in `versions`, which a test process reads without loading the frames.)"""

# Limits
MAX_MESSAGE_BYTES: Final = versions.MAX_MESSAGE_BYTES
MAX_TEXT_CHARS: Final = 1024 * 1024
"""Longest text field (failure text, captured output) a single event carries; see `clip`."""


RUN_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z"
"""A run id names folders and files of the store: letters, digits, ``-_.``, never ``.`` or ``..``."""
RunId = Annotated[str, msgspec.Meta(pattern=RUN_ID_PATTERN)]


def is_run_id(text: str) -> bool:
    return re.fullmatch(RUN_ID_PATTERN, text) is not None


class Frame(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Base of every frame; the subclass's ``tag`` is the wire ``type``."""


class EventBase(Frame):
    """An event from a test process. ``(run_id, process, seq)`` identifies it for idempotency."""

    run_id: RunId
    process: str
    seq: Int
    ts: float

    def __post_init__(self) -> None:
        # JSON has no inf/nan (msgspec writes null, which decoding rejects): keep events decodable.
        if not math.isfinite(self.ts):
            self.ts = 0.0
        duration = getattr(self, "duration", 0.0)
        if not math.isfinite(duration):
            self.duration = 0.0


# Events -----------------------------------------------------------------------------------------


class RunStarted(EventBase, tag="run_started"):
    """Sent once per run by the controlling process (not by xdist workers)."""

    args: list[str]
    rootdir: str
    cwd: str
    python: str
    pytest_version: str
    plugin_version: str
    host: str
    pid: Int
    label: str = ""
    workers: Int = 0
    kind: str = "pytest"
    """pytest, or debug: a script run by the server's debugger (start_debugging)."""
    shard: str = ""
    """This process's shard of a run recorded in parts (CI shards sharing a run id); "" for none."""


class ProcessStarted(EventBase, tag="process_started"):
    """Every process that sends events announces itself: the controller and each xdist worker."""

    worker: str
    pid: Int
    host: str


class CollectionFinished(EventBase, tag="collection_finished"):
    count: Int
    """Number of tests collected."""


class CollectionError(EventBase, tag="collection_error"):
    """A module or other collector that failed to collect (import error, syntax error, ...)."""

    nodeid: str
    message: str
    longrepr: str = ""


class TestStarted(EventBase, tag="test_started"):
    """Sent *before* the test runs, so a process killed mid-test still shows what was running."""

    __test__ = False  # not a pytest test class

    nodeid: str
    worker: str
    file: str = ""
    line: Int | None = None


class PhaseFinished(EventBase, tag="phase_finished"):
    """One of setup/call/teardown finished. Its output was sent before, as `Output` events."""

    nodeid: str
    worker: str
    when: str
    outcome: str
    """pytest's report outcome: passed, failed or skipped."""
    duration: float
    message: str = ""
    """One line: the exception or skip reason."""
    longrepr: str = ""
    wasxfail: str | None = None


STREAMS: Final = ("stdout", "stderr", "log", "warnings")
"""Output streams: what the process wrote to fd 1 and 2, log records, and pytest's warnings."""


class Output(EventBase, tag="output"):
    """Complete lines one process wrote to one stream, numbered by that process.

    The sender numbers lines per *unit* (a test, or the process's output outside tests), both in
    the unit's combined stream (``first``) and within this stream (``stream_first``), so the
    server stores each line at its place whatever order events arrive in.
    """

    nodeid: str
    """The test that wrote the lines, or "" for output outside tests (collection, session fixtures)."""
    worker: str
    phase: str
    """setup, call, teardown, collect, or "" outside any phase."""
    stream: str
    first: Int
    """1-based number of the first line in the unit's combined output."""
    stream_first: Int
    """1-based number of the first line within its stream."""
    count: Int
    text: str = ""
    """``count`` lines joined by newlines (no trailing newline); each at most the line limit. The JSON
    form (spool files, ``.wal`` copies, protocol 1) carries the lines here."""
    times: list[float] | None = None
    """Per-line timestamps when they differ (log records); otherwise every line has ``ts``."""
    data: bytes = b""
    """The same lines as the bytes the process wrote, undecoded: what the plugin builds and the binary
    form (msgpack) carries, so no side decodes, escapes or re-encodes megabytes of output. Set, it
    stands for ``text``; `encode` turns it into ``text`` for the JSON form."""

    def raw(self) -> bytes:
        """The lines as UTF-8 bytes, whichever form they came in: raw bytes are checked (the store keeps
        valid UTF-8 only) and an invalid sequence becomes U+FFFD, as decoding them would have."""
        data = self.data
        if not data:
            return self.text.encode("utf-8", "replace")  # "replace": a lone surrogate from JSON
        if data.isascii():
            return data
        return data.decode("utf-8", "replace").encode()

    def as_text(self) -> str:
        return self.data.decode("utf-8", "replace") if self.data else self.text

    @property
    def size(self) -> int:
        """Bytes of output it holds, for the sender's memory bounds."""
        return len(self.data) or len(self.text)


class PassedPhase(msgspec.Struct, array_like=True):
    """A phase that passed quietly, reported with its test's end rather than in an event of its own."""

    when: str
    duration: float
    finished: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.duration):
            self.duration = 0.0
        if not math.isfinite(self.finished):
            self.finished = 0.0


class FailureSnapshot(EventBase, tag="failure_snapshot"):
    """A failed phase's exception and frames, taken while they were alive."""

    nodeid: str
    worker: str
    when: str
    snapshot: Snapshot


class HangDetected(EventBase, tag="hang"):
    """A test ran past its timeout (or the run was killed, or crashed) and this is why."""

    nodeid: str
    worker: str
    when: str
    report: HangReport


class TestFinished(EventBase, tag="test_finished"):
    """The test's final outcome after teardown, as pytest's summary counts it."""

    __test__ = False

    nodeid: str
    worker: str
    outcome: str
    """passed, failed, error, skipped, xfailed or xpassed."""
    duration: float
    message: str = ""
    passed_phases: list[PassedPhase] = []
    """Phases that passed (not xpassed) and so were not sent as `PhaseFinished`: a passing test
    costs two events, not five."""
    attempt: Int = 1
    """Which run of the test this was (pytest-rerunfailures runs a failing test again): an attempt
    that will be run again ends ``rerun``; the last one has the outcome pytest reports."""
    file: str = ""
    line: Int | None = None
    """Where the test is, as in `TestStarted`, which a test that ends within a tick never sends."""


class Held(EventBase, tag="held"):
    """A failing test is held alive for an agent (``--mcp-debug-break``); it answers `Request` frames.

    Sent after the failure's `FailureSnapshot`, so the server has the snapshot when it learns of the hold.
    """

    session: str
    """The live session's id: ``<run id>-<worker>-<n>``."""
    nodeid: str
    worker: str
    when: str
    reason: str = "failure"
    timeout: float = 0.0
    """Seconds without a request after which the test resumes by itself."""


class Resumed(EventBase, tag="resumed"):
    """A hold ended: ``reason`` is continue, close, timeout or disconnected."""

    session: str
    reason: str


class RunFinished(EventBase, tag="run_finished"):
    exit_status: Int
    duration: float
    counts: dict[str, Int] = {}


class CodeVersion(EventBase, tag="code_version"):
    """The code a run tested (flaky history compares it) and what it ran in, sent once by each
    controlling process (a shard's)."""

    commit: str = ""
    """HEAD's commit id; "" when unknown."""
    changes: str = ""
    """A digest of the uncommitted changes to tracked files; "" when there are none."""
    note: str = ""
    """Why the version is unknown (no git, not a repository), in words."""
    shard: str = ""
    """The shard this process ran (`RunStarted.shard`)."""
    environment: dict[str, str] = {}
    """What the run ran in: every environment variable, its value as shown (secrets hidden)."""
    ci: dict[str, str] = {}
    """The CI job it ran in: provider, workflow, job, run, commit, branch, url, ...; {} outside CI."""
    machine: dict[str, str] = {}
    """What the machine gave it: cpus, cpus_usable, cpu_quota, memory_limit, utf8_mode, the encodings,
    uid, user, umask, platform, arch (`recording.machine`); a fact not read is left out."""


class CoverageRecorded(EventBase, tag="coverage_recorded"):
    """A process's per-test line coverage is complete in a coverage.py data file (a context per test)."""

    worker: str
    path: str
    """Absolute path of the data file (`<dir>/coverage/...`); the server reads it when asked."""
    tests: Int = 0
    files: Int = 0
    combined: bool = False
    """The run's file, combining its xdist workers' files (sent by the controller)."""
    note: str = ""
    """Why coverage is partial or missing, in words."""


class ValueTrace(EventBase, tag="value_trace"):
    """How a traced test's locals changed (``--mcp-debug-trace``), sent after the test ended."""

    nodeid: str
    worker: str
    outcome: str
    trace: Trace


class LocalizedLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line the dynamic localizer changed: its best change and what that did."""

    file: str
    """Absolute path."""
    line: Int
    tried: Int = 0
    """Changes of it that were run."""
    mutant: str = ""
    """The best change, e.g. ``'<' -> '<='``; "" when none ran."""
    fixed: Int = 0
    """Failing tests it made pass."""
    failing: Int = 0
    broke: Int = 0
    """Passing neighbours (tests that run the line) it made fail."""
    passing: Int = 0
    note: str = ""
    """Why it was not (fully) tried: not in a function, the budget ran out."""


class Localization(EventBase, tag="localization"):
    """What the dynamic localizer (`localize`) found for a run's failures; ``run_id`` is that run's,
    so it is stored (and evicted) with it."""

    budget: float
    elapsed: float
    failing: list[str] = []
    """The failing tests it re-ran."""
    still_failing: list[str] = []
    """Those that failed again before any change (the rest passed: flaky, or the code changed)."""
    lines: list[LocalizedLine] = []
    complete: bool = False
    """Every planned line was tried within the budget."""
    note: str = ""


SESSION_MODES: Final = ("run", "forward", "managed")
PROCESS_STATES: Final = ("running", "stopped", "crashed", "restarting")


class SessionStarted(EventBase, tag="session_started"):
    """A process session announces itself (seed 004's registration): `mcpdebug run`, `mcpdebug
    forward`, or a process the server manages. Its run id is the session's; its lines are `Output`
    events outside any test (``nodeid`` ""), its process's changes `ProcessStatus` events.

    The server assigns the label: the one asked for, or with ``-2``, ``-3``, ... when a live session
    holds it, and answers with `Registered`.
    """

    mode: str
    """run, forward or managed."""
    label: str = ""
    """The label asked for ("" lets the server name it after the command or source)."""
    command: list[str] = []
    cwd: str = ""
    source: str = ""
    """What a forwarder reads: a file, a named pipe, or "-" for its stdin."""
    capabilities: list[str] = []
    """What the runner answers: process_control, stdin (seed 004's capability announcement)."""
    restart: str = "no"
    """no, on-failure or always."""
    host: str = ""
    pid: Int = 0
    """The runner's own pid (the command's is in `ProcessStatus`)."""
    parent_run: str = ""
    """The test run whose test started it (``MCPDEBUG_PARENT_RUN``): its lines are shown with that
    run's failures."""
    parent_worker: str = ""


class ProcessStatus(EventBase, tag="process_status"):
    """A process session's process changed state (seed 004's status message)."""

    status: str
    """running, stopped, crashed or restarting."""
    pid: Int | None = None
    exit_code: Int | None = None
    """The last exit status; -N when signal N ended the process."""
    message: str = ""
    ended: bool = False
    """The session ends with this state: its runner stops."""


class ProcessFinished(EventBase, tag="process_finished"):
    """The last frame a process sends; a spool file ending with it is complete."""

    events: Int


Event = (
    RunStarted
    | ProcessStarted
    | CollectionFinished
    | CollectionError
    | TestStarted
    | PhaseFinished
    | FailureSnapshot
    | Output
    | TestFinished
    | Held
    | Resumed
    | HangDetected
    | RunFinished
    | CodeVersion
    | CoverageRecorded
    | ValueTrace
    | Localization
    | SessionStarted
    | ProcessStatus
    | ProcessFinished
)

EVENT_TYPES: Final = tuple(t.__struct_config__.tag for t in Event.__args__)  # type: ignore[attr-defined]
