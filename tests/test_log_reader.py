"""`mcpdebug tui`'s reading of seed 000's log: any file, any line, several server starts, rotations.

The TUI shows what `log_reader` gives it; nothing a log holds may stop it (a line that is no entry is
counted, a field of another type is dropped), and each answer must go with its own call even when
the log holds several server starts that each number their calls from 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpdebug.report import entries, log_reader, log_text, server_log

T0 = 1_795_000_000_000


def line(n: int, message: str, session: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "time": f"2026-11-19T12:00:{n % 60:02d}.000Z",
        "level": "error" if message == "tool:error" else "info",
        "namespace": "debug-mcp:x",
        "message": message,
        "sessionId": session,
        "sessionName": None,
        **fields,
        "timestamp": T0 + n * 1000,
    }


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as out:
        for one in lines:
            out.write(json.dumps(one) + "\n")


def test_two_server_starts_pair_each_answer_with_its_own_call(tmp_path: Path) -> None:
    """Written by the server's own log code, started twice: each start's call 1 is its own row, and
    a call the first server never answered says so once the second starts."""
    folder = tmp_path / ".mcpdebug"
    for start in ("first", "second"):
        entries.known.clear()
        written = server_log.open_log(folder, server_log.LogSettings())
        entries.tool_call(1, "list_sessions", {})
        entries.tool_response(1, "list_sessions", {}, {"result": f"{start} start"}, 0.003)
        if start == "first":
            entries.tool_call(2, "get_failure", {"run_id": "r-1"})  # the server is killed before it answers
        written.close()
    follower = log_reader.LogFollower(server_log.log_path(folder))
    timeline = log_reader.Timeline()
    added, changed = timeline.add(follower.read())
    texts = [log_text.describe(e) for e in added]
    assert texts[0].startswith("list_sessions()  ✓ 3.0 ms") and "first start" in texts[0]
    assert texts[1] == "get_failure(run_id=r-1)  … no answer: the server stopped or restarted"
    assert texts[2].startswith("list_sessions()  ✓ 3.0 ms") and "second start" in texts[2]
    assert len({e["_row"] for e in added}) == 3 and timeline.starts == 1
    assert [c["tool"] for c in changed] == ["list_sessions", "get_failure", "list_sessions"]


def test_rotation_mid_way_loses_no_entry(tmp_path: Path) -> None:
    """Entries written to the old file after the last look, then the file rotated: all are read."""
    log = tmp_path / "debug-mcp-server.log"
    write(log, [line(0, "session:created", "s-1", kind="run", sessionName="pytest -q")])
    follower = log_reader.LogFollower(log)
    assert [e["message"] for e in follower.read()] == ["session:created"]
    write(log, [line(1, "debug:output", "s-1", category="stdout", output="before the rotation")])
    log.rename(tmp_path / "debug-mcp-server.log.1")
    write(log, [line(2, "debug:output", "s-1", category="stdout", output="after it")])
    assert [e["output"] for e in follower.read()] == ["before the rotation", "after it"]
    write(log, [line(3, "session:closed", "s-1", reason="finished")])
    assert [e["message"] for e in follower.read()] == ["session:closed"]


def test_garbage_lines_are_counted_and_a_torn_last_line_waits(tmp_path: Path) -> None:
    log = tmp_path / "copied.log"
    write(log, [line(0, "tool:call", None, tool="run_tests", callId=1, request={})])
    with log.open("ab") as out:
        out.write(b"not json\n")
        out.write(b"[1, 2, 3]\n")  # JSON, but not an entry
        out.write(b'{"no message": 1}\n')
        out.write(b"\xff\xfe invalid utf-8\n")
        out.write(b"[" * 100_000 + b"\n")  # deeper than the JSON parser goes
        out.write(b'{"message": "tool:response", "callId": 1, "tool": "run_tests", "durationMs": "soon"}\n')
        out.write(b'{"message": "tool:call", "ti')  # torn: the copy was taken mid-line
    follower = log_reader.LogFollower(log)
    found = follower.read()
    assert [e["message"] for e in found] == ["tool:call", "tool:response"]
    assert follower.bad_lines == 5 and follower.unfinished
    timeline = log_reader.Timeline()
    added, _ = timeline.add(found)
    assert log_text.describe(added[0]) == "run_tests()  ✓ ? ms: null"  # a duration that is no number


def test_a_huge_line_without_end_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * (log_reader.LINE_BYTES + log_reader.READ_BYTES))
    follower = log_reader.LogFollower(log)
    while follower.offset < log.stat().st_size:
        assert follower.read() == []
    assert follower.bad_lines == 1 and not follower.unfinished


def test_a_run_closes_with_its_exit_status_and_outcomes() -> None:
    closed = line(5, "session:closed", "run-1", reason="finished", duration=6200, exitStatus=1)
    closed["counts"] = {"passed": 3, "failed": 1, "error": 1}
    timeline = log_reader.Timeline()
    timeline.add([line(0, "session:created", "run-1", kind="run"), closed])
    expected = "closed (finished) after 6.2 s: exit status 1; 1 failed, 1 error, 3 passed"
    assert log_text.describe(closed) == expected
    assert timeline.sessions["run-1"].state == "closed (finished): exit status 1; 1 failed, 1 error, 3 passed"


def test_an_entry_in_full() -> None:
    call = line(0, "tool:call", "held-1", tool="evaluate_expression", callId=4, request={"expression": "x"})
    answer = line(1, "tool:response", "held-1", tool="evaluate_expression", callId=4, durationMs=2.5)
    answer["response"] = {"result": "41\n42"}
    log_reader.Timeline().add([call, answer])
    text = log_text.detail(call, "test_a.py::test_sum")
    assert "Session: test_a.py::test_sum (held-1)" in text
    assert '"expression": "x"' in text
    assert "Answer: tool:response at 2026-11-19T12:00:01.000Z after 2.5 ms" in text
    assert '"result": "(its 2 lines below)"' in text and text.endswith("response.result:\n41\n42")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = ("timestamp", "time", "sessionId", "sessionName", "callId", "tool", "request", "response",
          "answer", "error", "durationMs", "location", "variables", "counts", "duration", "output",
          "kind", "reason", "event", "level", "_row", "_orphan")  # fmt: skip
ENTRY = st.fixed_dictionaries(
    {"message": st.sampled_from([*entries.TYPES, "server:log", "other"])},
    optional={name: JSON for name in FIELDS},
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ENTRY.map(json.dumps).map(str.encode) | st.binary(max_size=40), max_size=12))
def test_any_lines_are_read_without_an_exception(lines: list[bytes]) -> None:
    follower = log_reader.LogFollower(Path("unused"))
    timeline = log_reader.Timeline()
    added, changed = timeline.add(follower.parse(lines))
    for entry in [*added, *changed]:
        assert isinstance(log_text.describe(entry), str)
        assert isinstance(log_text.detail(entry), str)
        assert isinstance(log_text.time_of(entry), str)
        assert log_reader.matches(entry, None, set(log_reader.KINDS)) in (True, False)
    assert len({e["_row"] for e in timeline.rows}) == len(timeline.rows)
    for session in timeline.sessions.values():
        assert isinstance(session.state, str)
