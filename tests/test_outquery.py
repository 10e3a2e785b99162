"""Stored output through the store alone (no inner pytest): ranges, search, logs, bounds, truncation,
idempotency, retention and the schema-1 migration, as `get_output`, `search_output` and `get_logs`
show them."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import NOW, Events
from mcpdebug.store import SCHEMA_VERSION, Store
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import logs as logs_view
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view
from mcpdebug.views import output_window
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import STORE_FILE
from pytest_mcpdebug.limits import KB, Limits


def output_text(*args: Any, **kwargs: Any) -> str:
    """get_output's text (the reply an agent reads; its typed fields are tested in test_tool_contract)."""
    return output_view.get_output(*args, **kwargs).text


def search_text(*args: Any, **kwargs: Any) -> str:
    return search_view.search_output(*args, **kwargs).render()


def logs_text(*args: Any, **kwargs: Any) -> str:
    return logs_view.get_logs(*args, **kwargs).render()


RUN = "20261101-120000-aaaa01"
TEST = "tests/test_app.py::test_numbers"
OTHER = "tests/test_app.py::test_other"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / ".mcpdebug")
    yield s
    s.close()


def record(
    store: Store, *tests: tuple[str, list[tuple[str, str, str | list[str]]]], run_id: str = RUN
) -> Any:
    """A finished run of ``tests``, each a (node id, [(phase, stream, lines), ...]); returns its row."""
    ev = Events(run_id)
    events: list[protocol.Event] = [ev.run_started(), ev.start()]
    for nodeid, output in tests:
        events += ev.test(nodeid, "passed", output)
    events += ev.run_finished()
    store.apply(events)
    return store.run(run_id)


def numbered_lines(n: int, prefix: str = "line") -> list[str]:
    return [f"{prefix} {i}" for i in range(1, n + 1)]


def body(reply: str) -> list[str]:
    """The lines a reply shows: between the header's blank line and the footer's."""
    return reply.split("\n\n", 2)[1].split("\n")


def hits(reply: str) -> list[int]:
    """The line numbers a search reply marks as matches, in order."""
    return [int(n) for n in re.findall(r"^>>> (\d+): ", reply, re.MULTILINE)]


def block(reply: str) -> list[str]:
    """The lines of a one-hit search reply: its context and the marked match."""
    return [line for line in body(reply) if not line.startswith("[")]


def error(call: Any, *args: Any, **kwargs: Any) -> OutputError:
    with pytest.raises(OutputError) as info:
        call(*args, **kwargs)
    return info.value


# Ranges ---------------------------------------------------------------------------------------------


@pytest.fixture
def ten(store: Store) -> Any:
    """A test that printed "line 1" to "line 10"."""
    return record(store, (TEST, [("call", "stdout", numbered_lines(10))]))


@pytest.mark.parametrize(
    ("start", "end", "first", "last"),
    [
        (1, 10, 1, 10),
        (2, 4, 2, 4),
        (7, 7, 7, 7),
        (-3, -1, 8, 10),  # the last three
        (-10, -10, 1, 1),
        (2, -2, 2, 9),  # mixed
        (-4, 8, 7, 8),
        (5, None, 5, 10),
        (None, 3, 1, 3),
    ],
)
def test_a_range_shows_exactly_its_lines_with_their_numbers(
    store: Store, ten: Any, start: int | None, end: int | None, first: int, last: int
) -> None:
    reply = output_text(store, ten, TEST, start=start, end=end)
    assert reply.startswith(f"Lines {first}-{last} of 10 ({TEST}; run {RUN}; ")
    assert body(reply) == [f"{i}: line {i}" for i in range(first, last + 1)]


def test_a_partial_range_says_what_was_left_out_and_how_to_get_it(store: Store, ten: Any) -> None:
    reply = output_text(store, ten, TEST, start=4, end=6)
    footer = reply.split("\n\n", 2)[2]
    assert footer.splitlines()[:5] == [
        "[Output truncated: Showing 3 of 10 lines]",
        "[7 lines omitted]",
        f'[Earlier lines: get_output(run_id="{RUN}", test="{TEST}", start=1, end=3)]',
        f'[Later lines: get_output(run_id="{RUN}", test="{TEST}", start=7, end=10)]',
        f'[Search it: search_output(run_id="{RUN}", test="{TEST}", pattern="...")]',
    ]
    assert "[Access full output: mcpdebug://runs/" in footer
    on_disk = store.outputs.path(RUN, 1)
    assert f"[On disk: {on_disk}]" in footer
    assert on_disk.read_text().splitlines() == numbered_lines(10)  # the file holds the lines themselves


def test_the_whole_output_has_no_truncation_footer(store: Store, ten: Any) -> None:
    reply = output_text(store, ten, TEST, start=1, end=-1)
    assert "truncated" not in reply and "omitted" not in reply


def test_line_numbers_can_be_left_out(store: Store, ten: Any) -> None:
    reply = output_text(store, ten, TEST, start=9, end=10, line_numbers=False)
    assert body(reply) == ["line 9", "line 10"]


@pytest.mark.parametrize(
    ("start", "end", "problem"),
    [
        (5, 2, "start must be <= end (start=5, end=2 means lines 5 to 2)"),
        (-1, -3, "start must be <= end (start=-1, end=-3 means lines 10 to 8)"),
        (1, 11, "start=1, end=11 is outside lines 1-10"),
        (11, 12, "start=11, end=12 is outside lines 1-10"),
        (-11, -1, "start=-11, end=-1 is outside lines 1-10"),
        (0, 3, "line numbers start at 1 (0 is not a line; -1 is the last line)"),
        (1, 0, "line numbers start at 1 (0 is not a line; -1 is the last line)"),
    ],
)
def test_an_invalid_range_is_an_error_naming_the_valid_lines(
    store: Store, ten: Any, start: int, end: int, problem: str
) -> None:
    exc = error(output_view.get_output, store, ten, TEST, start=start, end=end)
    assert exc.kind is ErrorType.INVALID_RANGE
    message = str(exc)
    assert message.startswith(f"Invalid line range: {problem}.\n")
    assert "This output has 10 lines. Valid range formats:" in message
    assert "Negative: start=-50, end=-1 (the last 50 lines)" in message


def test_a_test_without_output_says_so_and_lists_what_wrote_some(store: Store) -> None:
    run = record(store, (TEST, []), (OTHER, [("call", "stdout", ["hello"])]))
    reply = output_text(store, run, TEST)
    assert reply.startswith(f"No output stored for {TEST} in run {RUN}.")
    assert f"  {OTHER}: 1 lines" in reply
    exc = error(output_view.get_output, store, run, TEST, start=1, end=1)
    assert exc.kind is ErrorType.INVALID_RANGE
    assert "this output is empty (0 lines)" in str(exc)
    assert output_view.output_tail(store, run, TEST, 50) == "No captured output."


def test_the_default_is_the_last_200_lines(store: Store) -> None:
    run = record(store, (TEST, [("call", "stdout", numbered_lines(450))]))
    reply = output_text(store, run, TEST)
    assert reply.startswith("Lines 251-450 of 450 (")
    assert body(reply) == [f"{i}: line {i}" for i in range(251, 451)]
    assert "[Output truncated: Showing last 200 of 450 lines]\n[250 lines omitted]\n" in reply
    assert f'[Earlier lines: get_output(run_id="{RUN}", test="{TEST}", start=51, end=250)]' in reply
    assert "[Later lines:" not in reply
    short = record(store, (OTHER, [("call", "stdout", numbered_lines(20))]), run_id="20261101-130000-bbbb02")
    assert output_text(store, short, OTHER).startswith("Lines 1-20 of 20 (")


# Streams, phases and time -------------------------------------------------------------------------------


@pytest.fixture
def mixed(store: Store) -> Any:
    """stdout, stderr, log and warnings interleaved over setup, call and teardown."""
    return record(
        store,
        (
            TEST,
            [
                ("setup", "stdout", ["setting up"]),
                ("setup", "log", ["INFO db ready"]),
                ("call", "stdout", ["out 1", "out 2"]),
                ("call", "stderr", ["err 1"]),
                ("call", "stdout", ["out 3"]),
                ("call", "warnings", ["DeprecationWarning: old api"]),
                ("call", "stderr", ["err 2"]),
                ("teardown", "stdout", ["tearing down"]),
            ],
        ),
    )


def test_combined_output_tags_every_stream_but_stdout(store: Store, mixed: Any) -> None:
    reply = output_text(store, mixed, TEST)
    assert reply.startswith(
        f"Lines 1-9 of 9 ({TEST}; run {RUN}; stdout, stderr, log and warnings interleaved):"
    )
    assert body(reply) == [
        "1: setting up",
        "2: [log] INFO db ready",
        "3: out 1",
        "4: out 2",
        "5: [stderr] err 1",
        "6: out 3",
        "7: [warnings] DeprecationWarning: old api",
        "8: [stderr] err 2",
        "9: tearing down",
    ]


@pytest.mark.parametrize(
    ("stream", "lines"),
    [
        ("stdout", ["1: setting up", "2: out 1", "3: out 2", "4: out 3", "5: tearing down"]),
        ("stderr", ["1: err 1", "2: err 2"]),
        ("log", ["1: INFO db ready"]),
        ("warnings", ["1: DeprecationWarning: old api"]),
    ],
)
def test_a_stream_is_numbered_within_itself(store: Store, mixed: Any, stream: str, lines: list[str]) -> None:
    reply = output_text(store, mixed, TEST, stream=stream)
    assert reply.startswith(f"Lines 1-{len(lines)} of {len(lines)} ({TEST}; run {RUN}; {stream}):")
    assert body(reply) == lines


def test_ranges_on_a_stream_count_that_stream(store: Store, mixed: Any) -> None:
    assert body(output_text(store, mixed, TEST, stream="stdout", start=-2, end=-1)) == [
        "4: out 3",
        "5: tearing down",
    ]
    assert body(output_text(store, mixed, TEST, stream="stderr", start=2, end=2)) == ["2: err 2"]
    exc = error(output_view.get_output, store, mixed, TEST, stream="stderr", start=1, end=3)
    assert exc.kind is ErrorType.INVALID_RANGE and "outside lines 1-2" in str(exc)


def test_a_phase_keeps_the_whole_outputs_line_numbers(store: Store, mixed: Any) -> None:
    call = output_text(store, mixed, TEST, phase="call")
    assert call.startswith(
        f"Lines 1-6 of 6 ({TEST}; run {RUN}; stdout, stderr, log and warnings interleaved; "
    )
    assert "call phase only; line numbers are the whole output's" in call.splitlines()[0]
    assert body(call) == [
        "3: out 1",
        "4: out 2",
        "5: [stderr] err 1",
        "6: out 3",
        "7: [warnings] DeprecationWarning: old api",
        "8: [stderr] err 2",
    ]
    # positions count the phase's lines; each line keeps its own number
    assert body(output_text(store, mixed, TEST, phase="call", start=-1, end=-1)) == ["8: [stderr] err 2"]
    assert body(output_text(store, mixed, TEST, phase="teardown")) == ["9: tearing down"]
    assert body(output_text(store, mixed, TEST, phase="setup", stream="stdout")) == ["1: setting up"]
    empty = output_text(store, mixed, TEST, phase="collect")
    assert empty.startswith("No lines match these filters (") and "the whole output has 9 lines" in empty


def test_bad_stream_or_phase_names_the_choices(store: Store, mixed: Any) -> None:
    exc = error(output_view.get_output, store, mixed, TEST, stream="stdin")
    assert exc.kind is ErrorType.INVALID_ARGUMENT
    assert "stream='stdin' is not valid; use one of combined, stdout, stderr, log, warnings" in str(exc)
    exc = error(output_view.get_output, store, mixed, TEST, phase="run")
    assert exc.kind is ErrorType.INVALID_ARGUMENT and "setup, call, teardown" in str(exc)
    exc = error(output_view.get_output, store, mixed, TEST, since="yesterday-ish")
    assert exc.kind is ErrorType.INVALID_ARGUMENT and "since='yesterday-ish' is not a time" in str(exc)


@pytest.fixture
def timed(store: Store) -> Any:
    """Output at known times: segments at t0+10, t0+20, and a log segment with one time per line."""
    t0 = NOW
    ev = Events(RUN)
    events: list[protocol.Event] = [
        ev.run_started(),
        ev.start(),
        ev(protocol.TestStarted, nodeid=TEST, worker="main"),
    ]
    events.append(ev.output(TEST, ["early 1", "early 2"], ts=t0 + 10))
    events.append(
        ev.output(
            TEST,
            ["log at 21", "log at 22", "log at 23"],
            stream="log",
            ts=t0 + 23,
            times=[t0 + 21, t0 + 22, t0 + 23],
        )
    )
    events.append(ev.output(TEST, ["late"], ts=t0 + 30))
    events.append(ev(protocol.TestFinished, nodeid=TEST, worker="main", outcome="passed", duration=1.0))
    store.apply(events)
    return store.run(RUN)


@pytest.mark.parametrize(
    ("since", "until", "lines"),
    [
        (
            None,
            None,
            [
                "1: early 1",
                "2: early 2",
                "3: [log] log at 21",
                "4: [log] log at 22",
                "5: [log] log at 23",
                "6: late",
            ],
        ),
        (15, None, ["3: [log] log at 21", "4: [log] log at 22", "5: [log] log at 23", "6: late"]),
        (21.5, None, ["4: [log] log at 22", "5: [log] log at 23", "6: late"]),
        (None, 22, ["1: early 1", "2: early 2", "3: [log] log at 21", "4: [log] log at 22"]),
        (21.5, 25, ["4: [log] log at 22", "5: [log] log at 23"]),
        (10, 10, ["1: early 1", "2: early 2"]),
    ],
)
def test_since_and_until_pick_lines_by_their_time(
    store: Store, timed: Any, since: float | None, until: float | None, lines: list[str]
) -> None:
    reply = output_text(
        store,
        timed,
        TEST,
        since=None if since is None else str(NOW + since),
        until=None if until is None else str(NOW + until),
    )
    assert body(reply) == lines


def test_since_accepts_iso_times_and_ages(store: Store, timed: Any) -> None:
    iso = dt.datetime.fromtimestamp(NOW + 21.5).isoformat()
    assert body(output_text(store, timed, TEST, since=iso))[0] == "4: [log] log at 22"
    # NOW is an hour ago: everything is younger than 2h, nothing younger than 1m
    assert len(body(output_text(store, timed, TEST, since="2h"))) == 6
    assert output_text(store, timed, TEST, since="1m").startswith("No lines match these filters")


# Search ---------------------------------------------------------------------------------------------


SEARCHED = [
    "starting",  # 1
    "error: disk full",  # 2
    "retrying",  # 3
    "ERROR error error: still full",  # 4 (one line, three matches)
    "giving up",  # 5
    "Error count: 2",  # 6
    "done",  # 7
    "error: final",  # 8
]


@pytest.fixture
def searched(store: Store) -> Any:
    return record(store, (TEST, [("call", "stdout", SEARCHED[:5]), ("call", "stderr", SEARCHED[5:])]))


def test_search_counts_matching_lines_not_matches(store: Store, searched: Any) -> None:
    reply = search_text(store, searched, "error", TEST, max_results=1)
    assert reply.splitlines()[:2] == [
        f'Search: "error" found 3 occurrences in {TEST} (run {RUN})',
        "Showing occurrence 1 of 3 at line 2:",
    ]


def test_search_shows_the_match_marked_in_its_context(store: Store, searched: Any) -> None:
    reply = search_text(store, searched, "error", TEST, occurrence=2, context=2, max_results=1)
    assert reply.splitlines()[1] == "Showing occurrence 2 of 3 at line 4:"
    assert block(reply) == [
        "2: error: disk full",
        "3: retrying",
        ">>> 4: ERROR error error: still full <<<",
        "5: giving up",
        "6: [stderr] Error count: 2",
    ]
    assert (
        f'Use occurrence=3 for next match: search_output(pattern="error", run_id="{RUN}", test="{TEST}", context=2, occurrence=3)'
        in reply
    )


def test_context_stops_at_the_edges_and_the_last_match_has_no_next(store: Store, searched: Any) -> None:
    reply = search_text(store, searched, "error", TEST, occurrence=3, context=3, max_results=1)
    assert block(reply) == [
        "5: giving up",
        "6: [stderr] Error count: 2",
        "7: [stderr] done",
        ">>> 8: [stderr] error: final <<<",
    ]
    assert "Use occurrence=" not in reply
    first = search_text(store, searched, "starting", TEST, context=1)
    assert block(first) == [">>> 1: starting <<<", "2: error: disk full"]
    bare = search_text(store, searched, "retrying", TEST, context=0)
    assert block(bare) == [">>> 3: retrying <<<"]


def test_several_results_each_get_a_block(store: Store, searched: Any) -> None:
    reply = search_text(store, searched, "error", TEST, context=0)
    assert reply.splitlines()[1] == "Showing occurrences 1-3 of 3:"
    assert re.findall(r"^Occurrence .*\n.*$", reply, re.MULTILINE) == [
        f"Occurrence 1 at line 2 of {TEST}:\n>>> 2: error: disk full <<<",
        f"Occurrence 2 at line 4 of {TEST}:\n>>> 4: ERROR error error: still full <<<",
        f"Occurrence 3 at line 8 of {TEST}:\n>>> 8: [stderr] error: final <<<",
    ]


def test_search_on_one_stream_uses_its_numbers(store: Store, searched: Any) -> None:
    reply = search_text(store, searched, "error", TEST, stream="stderr", context=0, max_results=1)
    assert reply.splitlines()[1] == "Showing occurrence 1 of 1 at line 3:"  # line 3 of stderr
    assert block(reply) == [">>> 3: error: final <<<"]


@pytest.mark.parametrize(
    ("pattern", "ignore_case"),
    [
        ("error", False),  # literal: bytes search
        ("[e]rror", False),  # regex
        ("e(r)+or", False),
        ("ERROR", True),  # literal, ignoring case
        ("[E]rror", True),  # regex, ignoring case
        ("(?i)ERROR", False),  # the regex's own flag
    ],
)
def test_literal_regex_and_ignore_case_paths_agree(
    store: Store, searched: Any, pattern: str, ignore_case: bool
) -> None:
    folded = ignore_case or pattern.startswith("(?i)")
    expected = [
        i for i, line in enumerate(SEARCHED, 1) if re.search("error", line, re.IGNORECASE if folded else 0)
    ]
    reply = search_text(store, searched, pattern, TEST, context=0, ignore_case=ignore_case)
    assert f"found {len(expected)} occurrences" in reply.splitlines()[0]
    assert hits(reply) == expected


def test_ignore_case_folds_letters_as_python_regexes_do(store: Store) -> None:
    """BUG (fixed): the ASCII fast path lowered bytes, so "k", "s" and "i" missed the Kelvin sign,
    the long s and the dotted/dotless i, which Python's case-insensitive regexes match."""
    lines = ["5 \u212a over the limit", "\u017fpeed", "\u0130stanbul", "plain ascii k"]
    run = record(store, (TEST, [("call", "stdout", lines)]))
    for pattern, regex in [("k", "[k]"), ("s", "[s]"), ("i", "[i]"), ("K over", "[K] over")]:
        literal = search_text(store, run, pattern, TEST, ignore_case=True, context=0)
        reference = search_text(store, run, regex, TEST, ignore_case=True, context=0)
        expected = sum(bool(re.search(pattern, line, re.IGNORECASE)) for line in lines)
        assert literal.splitlines()[0].split(" found ")[1] == reference.splitlines()[0].split(" found ")[1]
        assert f"found {expected} occurrence" in literal.splitlines()[0]


@pytest.mark.parametrize(
    "pattern",
    [
        r"\Aerror",
        r"full\Z",
        r"(?<=\s)full",
        r"(?<!\S)error",
        r"full(?!\s)",
        r"^error",
        r"full$",
        r"\n",
        r"error.*\n.*",
    ],
)
def test_a_regex_applies_to_each_line_on_its_own(store: Store, pattern: str) -> None:
    """BUG (fixed): the regex ran over a block of lines, so anchors (\\A, \\Z) and lookarounds saw
    the neighbouring lines' newline instead of the line's start or end."""
    lines = ["error: disk full", "  full", "error again", "full", "no match here"]
    run = record(store, (TEST, [("call", "stdout", lines)]))
    expected = [i for i, line in enumerate(lines, 1) if re.search(pattern, line)]
    if not expected:
        assert search_view.search_output(store, run, pattern, TEST).total == 0
        return
    assert hits(search_text(store, run, pattern, TEST, context=0)) == expected


def test_an_invalid_regex_says_how_to_search_literally(store: Store, searched: Any) -> None:
    exc = error(search_view.search_output, store, searched, "disk (full", TEST)
    assert exc.kind is ErrorType.INVALID_SEARCH
    assert str(exc).startswith("Invalid regular expression 'disk (full': missing ) at position 10.")
    assert "(e.g. 'disk\\\\ \\\\(full')" in str(exc)
    assert error(search_view.search_output, store, searched, "", TEST).kind is ErrorType.INVALID_SEARCH


def test_no_matches_is_a_normal_reply_that_suggests_what_to_try(store: Store, searched: Any) -> None:
    """An empty result is an answer, not an error: the count (0), what was searched, what to try."""
    reply = search_view.search_output(store, searched, "segfault", TEST)
    assert reply.total == 0 and reply.matches == []
    assert reply.render().startswith(f"No lines match 'segfault' in {TEST} (run {RUN}).\n")
    assert ", ignore_case=True" in reply.render()
    assert f'get_output(run_id="{RUN}", test="{TEST}")' in reply.render()
    folded = search_view.search_output(store, searched, "x", TEST, ignore_case=True)
    assert "ignore_case=True" not in folded.render()


@pytest.mark.parametrize("occurrence", [4, 99, 0, -1])
def test_an_invalid_occurrence_names_the_count(store: Store, searched: Any, occurrence: int) -> None:
    exc = error(search_view.search_output, store, searched, "error", TEST, occurrence=occurrence)
    assert exc.kind is ErrorType.INVALID_OCCURRENCE
    if occurrence >= 1:
        assert str(exc) == (
            f"Invalid occurrence number: {occurrence}. 'error' has 3 occurrences in {TEST} (run {RUN}): "
            "use occurrence=1 to 3."
        )
    else:
        assert "Occurrences are numbered from 1" in str(exc)


def test_a_run_wide_search_names_each_hits_test(store: Store) -> None:
    run = record(
        store,
        (TEST, [("call", "stdout", ["ok", "timeout talking to db"])]),
        (OTHER, [("setup", "stderr", ["timeout in fixture"]), ("call", "stdout", ["fine", "timeout again"])]),
    )
    reply = search_text(store, run, "timeout", None, context=0)
    assert (
        reply.splitlines()[0]
        == f'Search: "timeout" found 3 occurrences in all output of run {RUN} (2 tests with output)'
    )
    assert reply.split("\n\n")[1:4] == [
        f"Occurrence 1 at line 2 of {TEST}:\n>>> 2: timeout talking to db <<<",
        f"Occurrence 2 at line 1 of {OTHER}:\n>>> 1: [stderr] timeout in fixture <<<",
        f"Occurrence 3 at line 3 of {OTHER}:\n>>> 3: timeout again <<<",
    ]
    # occurrences count across tests: the second is the other test's first
    second = search_text(store, run, "timeout", None, occurrence=2, max_results=1, context=0)
    assert second.splitlines()[1] == "Showing occurrence 2 of 3 at line 1:"
    assert f"Occurrence 2 at line 1 of {OTHER}:" in second
    assert "Use occurrence=3 for next match" in second


# get_logs -------------------------------------------------------------------------------------------


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).isoformat(timespec="milliseconds")


@pytest.fixture
def two_sessions(store: Store) -> tuple[str, str]:
    a, b = "20261101-120000-aaaa01", "20261101-120001-bbbb02"
    for run_id, label, offset in ((a, "unit", 0.0), (b, "integration", 0.1)):
        ev = Events(run_id, t0=NOW + offset, step=1.0)
        events: list[protocol.Event] = [ev.run_started(label=label), ev.start()]
        events += ev.test(
            f"t_{label}.py::test_x",
            "passed",
            [("call", "stdout", [f"{label} one"]), ("call", "stderr", [f"{label} two"])],
        )
        events += ev.test(f"t_{label}.py::test_y", "passed", [("call", "log", [f"{label} three"])])
        events += ev.run_finished()
        store.apply(events)
    return a, b


def test_get_logs_merges_sessions_in_time_order_with_meta_lines(
    store: Store, two_sessions: tuple[str, str]
) -> None:
    a, b = two_sessions
    reply = logs_text(store, [a, "integration", "nope"])
    meta, lines = reply.split("\n\n", 1)
    assert meta.splitlines() == [
        "total_results: 6",
        "truncated: false",
        f'sessions_queried: ["{a}", "integration"]',
        'sessions_not_found: ["nope"]',
        f"time_range: oldest {_iso(NOW + 4)}, newest {_iso(NOW + 11.1)}",
        f"known sessions (newest first): {b}, {a}",
    ]
    assert lines.splitlines() == [
        f"{_iso(NOW + 4)} [{a}] t_unit.py::test_x stdout| unit one",
        f"{_iso(NOW + 4.1)} [{b}] t_integration.py::test_x stdout| integration one",
        f"{_iso(NOW + 5)} [{a}] t_unit.py::test_x stderr| unit two",
        f"{_iso(NOW + 5.1)} [{b}] t_integration.py::test_x stderr| integration two",
        f"{_iso(NOW + 11)} [{a}] t_unit.py::test_y log| unit three",
        f"{_iso(NOW + 11.1)} [{b}] t_integration.py::test_y log| integration three",
    ]


def test_get_logs_truncates_to_the_newest_and_filters(store: Store, two_sessions: tuple[str, str]) -> None:
    a, b = two_sessions
    reply = logs_text(store, [a, b], max_results=2)
    meta, lines = reply.split("\n\n", 1)
    assert meta.splitlines()[:4] == [
        "total_results: 6",
        "truncated: true (kept the newest 2)",
        f'sessions_queried: ["{a}", "{b}"]',
        "sessions_not_found: []",
    ]
    assert [line.split("| ", 1)[1] for line in lines.splitlines()] == ["unit three", "integration three"]
    # the last `lines` of each session
    one_each = logs_text(store, [a, b], lines=1)
    assert "total_results: 2" in one_each
    stderr = logs_text(store, [a, b], stream="stderr")
    assert [line.split("| ", 1)[1] for line in stderr.split("\n\n", 1)[1].splitlines()] == [
        "unit two",
        "integration two",
    ]
    matching = logs_text(store, ["latest"], pattern="thr+ee")
    assert matching.splitlines()[0] == "total_results: 1"
    assert matching.endswith("t_integration.py::test_y log| integration three")
    nothing = logs_text(store, [a], pattern="absent")
    assert nothing.splitlines()[0] == "total_results: 0" and nothing.endswith("(no lines matched)")
    assert "time_range" not in nothing


def test_get_logs_rejects_bad_arguments(store: Store, two_sessions: tuple[str, str]) -> None:
    assert error(logs_view.get_logs, store, []).kind is ErrorType.INVALID_ARGUMENT
    assert "use stdout, stderr, log, warnings or both" in str(
        error(logs_view.get_logs, store, ["latest"], stream="all")
    )
    assert error(logs_view.get_logs, store, ["latest"], lines=0).kind is ErrorType.INVALID_ARGUMENT
    assert error(logs_view.get_logs, store, ["latest"], pattern="(").kind is ErrorType.INVALID_SEARCH


# Bounded replies ----------------------------------------------------------------------------------------


def test_replies_stay_under_30000_characters_with_64kb_lines(store: Store) -> None:
    wide = [f"wide {i} " + "x" * (64 * KB - 10) for i in range(1, 41)]
    run = record(store, (TEST, [("call", "stdout", wide)]), (OTHER, [("call", "stderr", wide[:5])]))
    replies = {
        "tail": output_text(store, run, TEST),
        "range": output_text(store, run, TEST, start=1, end=40),
        "stream": output_text(store, run, OTHER, stream="stderr"),
        "search": search_text(store, run, "wide", TEST, context=50, max_results=40),
        "run search": search_text(store, run, "x", None, context=10),
        "one hit": search_text(store, run, "wide 20 ", TEST, context=50),
        "logs": logs_text(store, [RUN], lines=1000),
        "list": logs_view.logs_list(store),
        "tail of get_test": output_view.output_tail(store, run, TEST, 2000),
    }
    for name, reply in replies.items():
        assert len(reply) <= output_window.MAX_REPLY_CHARS, name
    shown = [line for line in body(replies["range"]) if line[:1].isdigit()]
    cut = len(wide[0]) - output_window.LINE_CHARS
    assert (
        shown[0]
        == f"1: {wide[0][: output_window.LINE_CHARS]} [... +{cut} characters; the whole line is in the file]"
    )
    # a range too big for one reply shows what fits and says where to go on
    last_shown = int(shown[-1].split(":")[0])
    assert last_shown < 40
    assert f"[Output truncated: Showing {last_shown} of 40 lines (reply size limit)]" in replies["range"]
    assert f"start={last_shown + 1}, end=40)]" in replies["range"]
    # the tail keeps the end
    assert body(replies["tail"])[-1].startswith("40: wide 40 ")
    assert "(reply size limit)" in replies["tail"]
    assert "truncated: true (reply size limit" in replies["logs"]


def test_a_line_over_the_line_limit_is_cut_with_a_marker(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_line_length=1 * KB))
    try:
        run = record(store, (TEST, [("call", "stdout", ["short", "y" * 5000, "after"])]))
        stored = store.outputs.path(RUN, 1).read_text().splitlines()
        assert stored == [
            "short",
            "y" * 1024 + " [... mcpdebug: line cut at 1024 bytes; 3976 more bytes dropped]",
            "after",
        ]
        assert body(output_text(store, run, TEST))[2] == "3: after"  # numbering is unchanged
    finally:
        store.close()


# Head and tail of a huge output ---------------------------------------------------------------------------


GAP = (
    r"\[\.\.\. (\d+) lines \((\d+)-(\d+)\) not stored: the test wrote more than max_test_output; "
    r"its first and last parts are kept \.\.\.\]"
)


def test_a_huge_output_keeps_its_head_and_tail_with_original_numbers(tmp_path: Path) -> None:
    limit = 64 * KB
    store = Store(tmp_path, limits=Limits(max_test_output=limit))
    try:
        ev = Events(RUN)
        store.apply([ev.run_started(), ev.start(), ev(protocol.TestStarted, nodeid=TEST, worker="main")])
        lines = [f"line {n:05d} " + "x" * 90 for n in range(1, 2001)]
        size = len(lines[0]) + 1  # bytes a line takes in the file
        for i in range(0, 2000, 10):
            store.apply([ev.output(TEST, lines[i : i + 10])])
        run = store.run(RUN)
        unit = store.db.execute("SELECT * FROM outputs").fetchone()
        assert unit["lines"] == 2000 and unit["bytes_written"] == 2000 * size
        assert unit["bytes_stored"] <= limit and unit["dropped_lines"] > 1000

        def check() -> tuple[int, int]:
            """The gap, as get_output reports it; every other line is there with its own number."""
            shown: list[str] = []
            for start in range(1, 2001, 100):  # windows small enough for one reply each
                reply = output_text(store, run, TEST, start=start, end=start + 99)
                assert (
                    f"{unit['dropped_lines']} lines in the middle dropped: over max_test_output"
                    in reply.splitlines()[0]
                )
                shown += body(reply)
            numbers = {int(line.split(":")[0]) for line in shown if line[:1].isdigit()}
            missing = sorted(set(range(1, 2001)) - numbers)
            lo, hi = missing[0], missing[-1]
            assert missing == list(range(lo, hi + 1)) and len(missing) == unit["dropped_lines"]
            # the gap is shown as such, once per window it falls in
            gaps = [re.fullmatch(GAP, line) for line in shown if not line[:1].isdigit()]
            assert all(gaps) and len(gaps) >= 1
            assert sum(int(g[1]) for g in gaps if g) == len(missing)
            assert min(int(g[2]) for g in gaps if g) == lo and max(int(g[3]) for g in gaps if g) == hi
            kept = [f"{n}: {lines[n - 1]}" for n in range(1, 2001) if not lo <= n <= hi]
            assert [line for line in shown if line[:1].isdigit()] == kept
            assert body(output_text(store, run, TEST, start=-1, end=-1)) == [f"2000: {lines[-1]}"]
            # a search finds tail lines under their own numbers, and nothing from the gap
            hit = search_text(store, run, "line 01999 ", TEST, context=0)
            assert hit.splitlines()[1] == "Showing occurrence 1 of 1 at line 1999:"
            assert search_view.search_output(store, run, f"line {lo:05d} ", TEST).total == 0
            # the head is within its half of the limit, and so is the tail
            assert (lo - 1) * size <= limit // 2
            assert (2000 - hi) * size <= limit - limit // 2
            return lo, hi

        gap = check()
        folder = tmp_path / "output" / RUN
        assert len(list(folder.iterdir())) > 1  # the head file and the rolling tail blocks
        store.apply([ev(protocol.TestFinished, nodeid=TEST, worker="main", outcome="passed", duration=1.0)])
        # compacted into one file (beside the index of units, for a rebuild without the database)
        assert sorted(p.name for p in folder.iterdir()) == ["1.log", "units.jsonl"]
        text = (folder / "1.log").read_text().splitlines()
        marker = text[gap[0] - 1]
        assert (
            marker.startswith(f"[mcpdebug: {unit['dropped_lines']} lines (")
            and f"after line {gap[0] - 1} were dropped here" in marker
        )
        assert "max_test_output=64.0 KB" in marker
        assert text[: gap[0] - 1] == lines[: gap[0] - 1] and text[gap[0] :] == lines[gap[1] :]
        assert check() == gap  # reads are unchanged by the compaction
    finally:
        store.close()


# Idempotency and arrival order --------------------------------------------------------------------------


def _test_events(ev: Events) -> list[protocol.Event]:
    return [
        ev.run_started(),
        ev.start(),
        *ev.test(
            TEST,
            "failed",
            [
                ("call", "stdout", numbered_lines(30)),
                ("call", "stderr", ["boom"]),
                ("teardown", "log", ["closing"]),
            ],
            "assert 0",
        ),
        *ev.run_finished(1),
    ]


def test_the_same_events_applied_twice_store_nothing_twice(store: Store) -> None:
    events = _test_events(Events(RUN))
    assert store.apply(events) == len(events)
    run = store.run(RUN)
    before = output_text(store, run, TEST)
    files = {p: p.stat().st_size for p in (store.dir / "output").rglob("*.log")}
    segments = store.db.execute("SELECT count(*) FROM segments").fetchone()[0]
    run_bytes = store.run(RUN)["bytes"]  # type: ignore[index]
    assert store.apply(events) == 0
    assert store.apply(events[3:8]) == 0
    assert output_text(store, run, TEST) == before
    assert {p: p.stat().st_size for p in (store.dir / "output").rglob("*.log")} == files
    assert store.db.execute("SELECT count(*) FROM segments").fetchone()[0] == segments
    assert store.run(RUN)["bytes"] == run_bytes  # type: ignore[index]


def test_output_arriving_out_of_order_reads_in_order(store: Store, tmp_path: Path) -> None:
    ev = Events(RUN)
    events = [ev.run_started(), ev.start(), ev(protocol.TestStarted, nodeid=TEST, worker="main")]
    chunks = [
        ev.output(TEST, numbered_lines(3, f"chunk {i}"), stream="stderr" if i % 3 == 0 else "stdout")
        for i in range(8)
    ]
    for chunk in reversed(chunks):
        store.apply([chunk])
    store.apply(events)
    reference = Store(tmp_path / "reference")
    try:
        reference.apply(events + chunks)
        for stream in ("combined", "stdout", "stderr"):
            got = output_text(store, store.run(RUN), TEST, stream=stream)
            want = output_text(reference, reference.run(RUN), TEST, stream=stream)
            assert body(got) == body(want)
        assert body(output_text(store, store.run(RUN), TEST, stream="stderr"))[:3] == [
            "1: chunk 0 1",
            "2: chunk 0 2",
            "3: chunk 0 3",
        ]
    finally:
        reference.close()


# Retention ------------------------------------------------------------------------------------------


def _run_ids(n: int) -> list[str]:
    return [f"20261101-1200{i:02d}-run{i:03d}" for i in range(n)]


def _record_runs(
    store: Store, run_ids: list[str], *, finished: bool = True, t0: float = NOW, lines: int = 10
) -> None:
    for i, run_id in enumerate(run_ids):
        ev = Events(run_id, t0=t0 + 60 * i)
        events: list[protocol.Event] = [ev.run_started(), ev.start()]
        events += ev.test(TEST, "passed", [("call", "stdout", numbered_lines(lines, f"{run_id} line"))])
        if finished:
            events += ev.run_finished()
        store.apply(events)


def _kept(store: Store) -> list[str]:
    return sorted(r[0] for r in store.db.execute("SELECT run_id FROM runs"))


def _folders(store: Store) -> list[str]:
    return sorted(p.name for p in (store.dir / "output").iterdir())


def test_max_runs_evicts_the_oldest_runs_and_their_output(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_runs=2))
    try:
        ids = _run_ids(4)
        _record_runs(store, ids)
        assert _kept(store) == ids[2:]
        assert _folders(store) == ids[2:]
        for table in ("tests", "phases", "events", "outputs", "segments"):
            assert {r[0] for r in store.db.execute(f"SELECT run_id FROM {table}")} == set(ids[2:]), table
        assert store.resolve_run(ids[0]) is None
    finally:
        store.close()


def test_a_running_run_is_kept_beyond_max_runs(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_runs=2))
    try:
        ids = _run_ids(4)
        _record_runs(store, ids[:1], finished=False)  # still recording
        _record_runs(store, ids[1:])
        assert _kept(store) == [ids[0], *ids[2:]]
        assert _folders(store) == [ids[0], *ids[2:]]
    finally:
        store.close()


def test_max_age_evicts_old_runs_even_running_ones(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_age=3600.0))
    try:
        ids = _run_ids(3)
        now = NOW + 3600  # NOW is an hour ago
        _record_runs(store, ids[:2], t0=now - 1500)  # 25 and 24 minutes old
        _record_runs(store, ids[2:], t0=now, finished=False)
        assert _kept(store) == ids  # nothing is older than an hour yet
        # age counts from the later of a run's last event and its arrival here (just now)
        store.db.execute("UPDATE runs SET stored=0")
        assert store.enforce_retention(now=now + 3600) == [ids[1], ids[0]]
        assert _kept(store) == ids[2:] and _folders(store) == ids[2:]
        assert store.enforce_retention(now=now + 3 * 3600) == [ids[2]]  # a running run too, once that old
        assert _kept(store) == [] and _folders(store) == []
    finally:
        store.close()


def test_max_store_size_evicts_the_oldest_until_the_rest_fits(tmp_path: Path) -> None:
    probe = Store(tmp_path / "probe")
    _record_runs(probe, _run_ids(1), lines=3000)
    size = probe.db.execute("SELECT bytes FROM runs").fetchone()[0]
    probe.close()
    assert size > 3000 * 20  # mostly output
    store = Store(tmp_path / "store", limits=Limits(max_store_size=int(size * 2.5)))
    try:
        ids = _run_ids(4)
        _record_runs(store, ids, lines=3000)
        assert _kept(store) == ids[2:]
        assert _folders(store) == ids[2:]
        assert sum(r[0] for r in store.db.execute("SELECT bytes FROM runs")) <= size * 2.5
    finally:
        store.close()


def test_the_newest_run_is_kept_even_alone_over_the_size_limit(tmp_path: Path) -> None:
    store = Store(tmp_path, limits=Limits(max_store_size=1000))
    try:
        ids = _run_ids(2)
        _record_runs(store, ids, lines=500)
        assert _kept(store) == ids[1:]
    finally:
        store.close()


# Schema 1 -------------------------------------------------------------------------------------------


V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, kind TEXT NOT NULL DEFAULT 'pytest', label TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running', args TEXT NOT NULL DEFAULT '[]', rootdir TEXT NOT NULL DEFAULT '',
    cwd TEXT NOT NULL DEFAULT '', python TEXT NOT NULL DEFAULT '', pytest_version TEXT NOT NULL DEFAULT '',
    plugin_version TEXT NOT NULL DEFAULT '', host TEXT NOT NULL DEFAULT '', pid INTEGER,
    workers INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL, finished REAL, duration REAL,
    exit_status INTEGER, collected INTEGER, pytest_counts TEXT NOT NULL DEFAULT '{}', last_event REAL NOT NULL
);
CREATE TABLE processes (
    run_id TEXT NOT NULL, process TEXT NOT NULL, worker TEXT NOT NULL DEFAULT '', pid INTEGER,
    host TEXT NOT NULL DEFAULT '', started REAL, finished REAL, PRIMARY KEY (run_id, process)
) WITHOUT ROWID;
CREATE TABLE events (
    run_id TEXT NOT NULL, process TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (run_id, process, seq)
) WITHOUT ROWID;
CREATE TABLE tests (
    run_id TEXT NOT NULL, nodeid TEXT NOT NULL, worker TEXT NOT NULL DEFAULT '', file TEXT NOT NULL DEFAULT '',
    line INTEGER, status TEXT NOT NULL DEFAULT 'running', started REAL, finished REAL, duration REAL,
    message TEXT NOT NULL DEFAULT '', PRIMARY KEY (run_id, nodeid)
);
CREATE TABLE phases (
    run_id TEXT NOT NULL, nodeid TEXT NOT NULL, phase TEXT NOT NULL, outcome TEXT NOT NULL,
    duration REAL NOT NULL, finished REAL NOT NULL, message TEXT NOT NULL DEFAULT '',
    longrepr TEXT NOT NULL DEFAULT '', wasxfail TEXT, stdout TEXT NOT NULL DEFAULT '',
    stderr TEXT NOT NULL DEFAULT '', log TEXT NOT NULL DEFAULT '', PRIMARY KEY (run_id, nodeid, phase)
);
CREATE TABLE collection_errors (
    run_id TEXT NOT NULL, nodeid TEXT NOT NULL, message TEXT NOT NULL, longrepr TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, nodeid)
);
CREATE TABLE spool_files (name TEXT PRIMARY KEY, offset INTEGER NOT NULL DEFAULT 0);
CREATE INDEX runs_by_start ON runs (started);
INSERT INTO meta VALUES ('schema', '1');
"""


def test_a_schema_1_store_is_migrated_and_its_output_readable(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / STORE_FILE)
    db.executescript(V1_SCHEMA)
    with db:
        db.execute(
            "INSERT INTO runs (run_id, status, started, finished, last_event) VALUES (?, 'finished', ?, ?, ?)",
            (RUN, NOW, NOW + 3, NOW + 3),
        )
        db.execute(
            "INSERT INTO tests (run_id, nodeid, worker, status, started, finished) VALUES (?, ?, 'main', 'failed', ?, ?)",
            (RUN, TEST, NOW, NOW + 3),
        )
        phases = [
            ("setup", NOW + 1, "setting up\n", "", ""),
            ("call", NOW + 2, "out 1\nout 2\n", "err 1\n", "INFO logged\nWARNING twice\n"),
            ("teardown", NOW + 3, "bye\n", "", ""),
        ]
        db.executemany(
            "INSERT INTO phases (run_id, nodeid, phase, outcome, duration, finished, stdout, stderr, log) "
            "VALUES (?, ?, ?, 'passed', 0.1, ?, ?, ?, ?)",
            [(RUN, TEST, phase, finished, out, err, log) for phase, finished, out, err, log in phases],
        )
    db.close()

    store = Store(tmp_path)
    try:
        assert store.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
        columns = {r[1] for r in store.db.execute("PRAGMA table_info(phases)")}
        assert not columns & {"stdout", "stderr", "log"}
        run = store.run(RUN)
        assert run is not None and run["bytes"] > 0
        assert body(output_text(store, run, TEST)) == [
            "1: setting up",
            "2: out 1",
            "3: out 2",
            "4: [stderr] err 1",
            "5: [log] INFO logged",
            "6: [log] WARNING twice",
            "7: bye",
        ]
        assert body(output_text(store, run, TEST, stream="log")) == [
            "1: INFO logged",
            "2: WARNING twice",
        ]
        # stdout's own numbers: "setting up" is its first line
        assert body(output_text(store, run, TEST, phase="call", stream="stdout")) == [
            "2: out 1",
            "3: out 2",
        ]
        assert "Showing occurrence 1 of 1 at line 4:" in search_text(store, run, "err", TEST)
    finally:
        store.close()
    again = Store(tmp_path)  # a second open migrates nothing twice
    try:
        assert again.db.execute("SELECT count(*) FROM segments").fetchone()[0] == 5
        assert len(body(output_text(again, again.run(RUN), TEST))) == 7  # type: ignore[arg-type]
    finally:
        again.close()


def test_an_old_run_received_now_is_kept_until_max_age_after_it_arrived(tmp_path: Path) -> None:
    """A CI run's spool opened eight days later is not evicted on arrival: age counts from receipt."""
    store = Store(tmp_path, limits=Limits(max_age=7 * 86400.0))
    try:
        [run_id] = _run_ids(1)
        _record_runs(store, [run_id], t0=time.time() - 8 * 86400)
        assert _kept(store) == [run_id]
        assert store.enforce_retention(now=time.time() + 8 * 86400) == [run_id]
    finally:
        store.close()


def test_a_misspelt_key_in_pyproject_is_an_error_listing_the_known_ones(tmp_path: Path) -> None:
    from pytest_mcpdebug.limits import LimitsError, load

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.mcpdebug]\nmax_test_ouptut = "5MB"\nmax-runs = 3\n')
    with pytest.raises(LimitsError, match=r"unknown key max_test_ouptut; known keys: max_line_length, "):
        load(pyproject=pyproject)
    pyproject.write_text('[tool.mcpdebug]\nmax_test_output = "5MB"\nmax-runs = 3\n')
    limits = load(pyproject=pyproject)
    assert (limits.max_test_output, limits.max_runs) == (5 * 1024 * KB, 3)


def test_a_test_named_exactly_wins_over_longer_names_containing_it(tmp_path: Path) -> None:
    from mcpdebug.views import lookup

    store = Store(tmp_path)
    try:
        ev = Events("20250301-101500-3fa201")
        store.apply(
            [
                ev.start(),
                ev.run_started(),
                *ev.test("t.py::test_total", output=[("call", "stdout", "total")]),
                *ev.test("t.py::test_total_tax", output=[("call", "stdout", "tax")]),
                *ev.test("t.py::test_totals[1]"),
            ]
        )
        run = lookup.run(store, "latest")
        assert lookup.test(store, run, "test_total")["nodeid"] == "t.py::test_total"
        assert lookup.test(store, run, "test_totals")["nodeid"] == "t.py::test_totals[1]"
        with pytest.raises(lookup.NotFound, match="matches several tests"):
            lookup.test(store, run, "test_tot")
    finally:
        store.close()
