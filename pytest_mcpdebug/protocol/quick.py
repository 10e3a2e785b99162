"""A quiet pass in its short form: the cheapest record a test's end can leave.

Most tests pass without a line of output, and such a test's one event is its `TestFinished`. It must
be in the kernel before the next test starts (issue 20: a process killed then loses no finished
test), so the test thread copies it into the write-ahead file's mapping at the test's end. Built as
a `TestFinished` and encoded there, that cost a quarter of all the recording of a passing test: in
the middle of pytest's own work every object and function it touches is cold. So the test thread
encodes this short JSON array instead, from what it already holds, and that line is what the
write-ahead copy and the spool file keep, and what a streaming sender sends to a server of protocol 3
or later (in a message of JSON lines): no `TestFinished` is built in the test process. For an older
server the sender thread builds them (`event`), a batch at a time, and so does a spool replayed over
a connection (`codec.event_line`). The server reads them with `codec.decode_spooled_line`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import msgspec

from pytest_mcpdebug.protocol.frames import PassedPhase, RunId, TestFinished
from pytest_mcpdebug.protocol.payloads import Int


class QuickPass(msgspec.Struct, array_like=True, gc=False):
    """A test all of whose phases passed quietly: `TestFinished`'s fields in an array (JSON ``[...]``)."""

    run_id: RunId
    process: str
    seq: Int
    ts: float
    nodeid: str
    worker: str
    file: str
    line: Int | None
    """0-based, as pytest's ``location`` gives it (`TestFinished.line` is 1-based)."""
    attempt: Int
    passed: Sequence[tuple[str, float | None, float | None]]
    """(when, duration, finished) of each phase. JSON has no NaN or infinity: it writes them as null,
    read back as None; the event has 0 for either."""

    def event(self, *, stored: bool = False) -> TestFinished:
        """The `TestFinished` it stands for: its phases tuples (their wire form) to be encoded, or
        `PassedPhase` structs to be stored (``stored``)."""
        phases = [(when, _finite(duration), _finite(finished)) for when, duration, finished in self.passed]
        passed = [PassedPhase(*p) for p in phases] if stored else cast("list[PassedPhase]", phases)
        return TestFinished(
            run_id=self.run_id,
            process=self.process,
            seq=self.seq,
            ts=self.ts,
            nodeid=self.nodeid,
            worker=self.worker,
            outcome="passed",
            duration=sum(p[1] for p in phases),
            passed_phases=passed,
            attempt=self.attempt,
            file=self.file,
            line=None if self.line is None else self.line + 1,
        )


def _finite(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0
