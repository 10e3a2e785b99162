"""Properties of stored output, line splitting and limit parsing, checked against simple references:
a list of lines sliced by Python, ``regex.search`` applied to each line (the engine the README names:
Python's syntax; it differs from ``re`` in one fold, a lowercase ``i`` does not match a dotless ``ı``),
``bytes.split``."""

from __future__ import annotations

import itertools
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Events
from mcpdebug.store import Store
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view
from pytest_mcpdebug import limits, protocol
from pytest_mcpdebug.output.lines import LineSplitter, cut_marker


def output_text(*args: Any, **kwargs: Any) -> str:
    """get_output's text (the reply an agent reads; its typed fields are tested in test_tool_contract)."""
    return output_view.get_output(*args, **kwargs).text


def search_text(*args: Any, **kwargs: Any) -> str:
    return search_view.search_output(*args, **kwargs).render()


RUN = "20261101-120000-aaaa01"
TEST = "tests/test_app.py::test_lines"

# A line: any text without a newline (surrogates cannot be written as UTF-8), empty lines included.
line_texts = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12)


@contextmanager
def recorded(
    chunks: list[tuple[str, list[str]]], order: list[int] | None = None
) -> Iterator[tuple[Store, dict[str, Any]]]:
    """A fresh store holding one test whose output is ``chunks`` of (stream, lines), one `Output` each,
    applied in ``order`` (the order written when omitted)."""
    ev = Events(RUN)
    head = [ev.run_started(), ev.start(), ev(protocol.TestStarted, nodeid=TEST, worker="main")]
    outputs = [ev.output(TEST, lines, stream=stream) for stream, lines in chunks]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp))
        try:
            store.apply(head)
            for i in order if order is not None else range(len(outputs)):
                store.apply([outputs[i]])
            run = store.run(RUN)
            assert run is not None
            yield store, run
        finally:
            store.close()


@st.composite
def outputs(
    draw: st.DrawFn, lines: st.SearchStrategy[str] = line_texts, max_lines: int = 30
) -> tuple[list[str], list[str], list[tuple[str, list[str]]]]:
    """Lines, the stream each was written to, and the same lines cut into `Output` chunks."""
    texts = draw(st.lists(lines, max_size=max_lines))
    chunks: list[tuple[str, list[str]]] = []
    streams: list[str] = []
    rest = texts
    while rest:
        size = draw(st.integers(1, len(rest)))
        stream = draw(st.sampled_from(protocol.STREAMS))
        chunks.append((stream, rest[:size]))
        streams += [stream] * size
        rest = rest[size:]
    return texts, streams, chunks


def body(reply: str) -> list[str]:
    return reply.split("\n\n", 2)[1].split("\n")


def reference_range(start: int | None, end: int | None, total: int) -> tuple[int, int] | None:
    """Seed 003's range rule, written out plainly: 1-based, inclusive, negative from the end."""
    if start is None and end is None:
        return (max(total - 199, 1), total) if total else None
    if total == 0 or start == 0 or end == 0:
        return None
    a = 1 if start is None else start if start > 0 else total + start + 1
    b = total if end is None else end if end > 0 else total + end + 1
    return (a, b) if 1 <= a <= b <= total else None


bounds = st.none() | st.integers(-35, 35)


@settings(max_examples=100, deadline=None)
@given(
    written=outputs(),
    view=st.sampled_from(["combined", *protocol.STREAMS]),
    start=bounds,
    end=bounds,
    data=st.data(),
)
def test_a_range_is_exactly_the_reference_slice(
    written: tuple[list[str], list[str], list[tuple[str, list[str]]]],
    view: str,
    start: int | None,
    end: int | None,
    data: st.DataObject,
) -> None:
    """Property: for any lines split into any chunks and streams, and stored in any order,
    ``get_output(start, end)`` shows exactly ``lines[a-1:b]`` numbered a..b (a, b as seed 003
    resolves start and end), and every invalid range is an INVALID_RANGE error."""
    texts, streams, chunks = written
    order = data.draw(st.permutations(range(len(chunks))))
    if view == "combined":
        lines = [f"[{s}] {t}" if s != "stdout" else t for s, t in zip(streams, texts, strict=True)]
    else:
        lines = [t for s, t in zip(streams, texts, strict=True) if s == view]
    expected = reference_range(start, end, len(lines))
    with recorded(chunks, order) as (store, run):
        if expected is None and (start is not None or end is not None):
            with pytest.raises(OutputError) as info:
                output_text(store, run, TEST, stream=view, start=start, end=end)
            assert info.value.kind is ErrorType.INVALID_RANGE
            if lines:
                assert f"This output has {len(lines)} lines" in str(info.value)
            else:
                assert "this output is empty (0 lines)" in str(info.value)
            return
        reply = output_text(store, run, TEST, stream=view, start=start, end=end)
        if expected is None:  # nothing was written to this view
            assert reply.startswith("No output stored for")
            return
        a, b = expected
        assert reply.startswith(f"Lines {a}-{b} of {len(lines)} (")
        assert body(reply) == [f"{n}: {lines[n - 1]}" for n in range(a, b + 1)]


# Search ---------------------------------------------------------------------------------------------

# Letters that fold in interesting ways (Kelvin sign, long s, dotted and dotless i), digits, spaces,
# regex metacharacters and an accented letter, so that the patterns below match often.
search_texts = st.text(st.sampled_from("abcABC kKsSiI\u212a\u017f\u0130\u0131é1 2.\t-"), max_size=10)
PATTERNS = [
    "a",
    "ab",
    "B",
    "k",
    "s",
    "i",
    "é",
    "c a",
    " ",
    "a.c",
    "^a",
    "c$",
    r"\d+",
    r"\d\s\d",
    "[ab]{2}",
    r"\bab",
    r"\Aa",
    r"b\Z",
    r"(?<=\s)a",
    r"a(?!b)",
    "a|C",
    "x*",
    "^$",
    r"\s$",
    r"\.",
    "(?i)K",
    "[^a]",
]


@settings(max_examples=100, deadline=None)
@given(
    written=outputs(search_texts, max_lines=25),
    pattern=st.sampled_from(PATTERNS),
    ignore_case=st.booleans(),
    data=st.data(),
)
def test_search_counts_the_lines_re_search_finds(
    written: tuple[list[str], list[str], list[tuple[str, list[str]]]],
    pattern: str,
    ignore_case: bool,
    data: st.DataObject,
) -> None:
    """Property: for literal and regex patterns, with or without ignore_case, the total a search
    reports is the number of lines for which ``regex.search(pattern, line)`` is true, and the
    occurrence-th hit is at the line number of the occurrence-th such line."""
    texts, _, chunks = written
    flags = regex.IGNORECASE if ignore_case else 0
    matching = [n for n, text in enumerate(texts, 1) if regex.search(pattern, text, flags)]
    with recorded(chunks) as (store, run):
        if not matching:
            assert search_view.search_output(store, run, pattern, TEST, ignore_case=ignore_case).total == 0
            return
        occurrence = data.draw(st.integers(1, len(matching)), label="occurrence")
        reply = search_text(
            store,
            run,
            pattern,
            TEST,
            ignore_case=ignore_case,
            occurrence=occurrence,
            max_results=1,
            context=0,
        )
        plural = "s" if len(matching) != 1 else ""
        assert f" found {len(matching)} occurrence{plural} in " in reply.splitlines()[0]
        assert reply.splitlines()[1] == (
            f"Showing occurrence {occurrence} of {len(matching)} at line {matching[occurrence - 1]}:"
        )
        assert re.findall(r"^>>> (\d+): ", reply, re.MULTILINE) == [str(matching[occurrence - 1])]
        with pytest.raises(OutputError) as info:
            search_text(store, run, pattern, TEST, ignore_case=ignore_case, occurrence=len(matching) + 1)
        assert info.value.kind is ErrorType.INVALID_OCCURRENCE


# LineSplitter ---------------------------------------------------------------------------------------


byte_strings = st.one_of(
    st.binary(max_size=200),
    st.lists(
        st.sampled_from([b"a", b"bc", b"\n", b"\n\n", b"\xff\xfe", b"xyz" * 7, b"\r\n", b"\xc3\xa9"]),
        max_size=40,
    ).map(b"".join),
)


@settings(max_examples=100, deadline=None)
@given(data=byte_strings, limit=st.integers(1, 30), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_line_splitter_gives_the_lines_of_any_chunking(data: bytes, limit: int, cuts: list[int]) -> None:
    """Property: fed any bytes in any chunks, `LineSplitter` yields the lines of
    ``data.split(b"\\n")`` (the unfinished last one on flush), each longer than ``limit`` cut to
    ``limit`` bytes followed by a marker counting the bytes dropped."""
    bounds = [0, *sorted(c for c in cuts if c <= len(data)), len(data)]
    splitter = LineSplitter(limit)
    got: list[bytes] = []
    for a, b in itertools.pairwise(bounds):
        block, count = splitter.feed(data[a:b])
        if count:
            got += block.split(b"\n")
            assert len(block.split(b"\n")) == count
        else:
            assert block == b""
    *complete, partial = data.split(b"\n")
    last, count = splitter.flush()
    assert count == (1 if partial else 0)
    if count:
        got.append(last)
    lines = complete + ([partial] if partial else [])
    assert got == [
        line if len(line) <= limit else line[:limit] + cut_marker(limit, len(line) - limit) for line in lines
    ]
    assert splitter.flush() == (b"", 0)  # nothing is held any more


# Limits ---------------------------------------------------------------------------------------------


SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": limits.KB,
    "kb": limits.KB,
    "kib": limits.KB,
    "m": limits.MB,
    "mb": limits.MB,
}
SIZE_UNITS |= {
    "mib": limits.MB,
    "g": limits.GB,
    "gb": limits.GB,
    "gib": limits.GB,
    "t": limits.TB,
    "tb": limits.TB,
}
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
spaces = st.sampled_from(["", " ", "  ", "\t"])


def spelled(unit: str, draw: st.DrawFn) -> str:
    """``unit`` in any mix of upper and lower case."""
    return "".join(c.upper() if draw(st.booleans()) else c for c in unit)


@settings(max_examples=100, deadline=None)
@given(number=st.integers(0, 2**40), unit=st.sampled_from(sorted(SIZE_UNITS)), pad=spaces, data=st.data())
def test_sizes_parse_and_round_trip(number: int, unit: str, pad: str, data: st.DataObject) -> None:
    """Property: ``parse_size`` reads a whole number with any unit spelling and spacing as that many
    units, and reads back every size as the limits describe it (``describe`` and errors)."""
    text = f"{pad}{number}{pad}{spelled(unit, data.draw)}{pad}"
    assert limits.parse_size(text) == number * SIZE_UNITS[unit]
    assert limits.parse_size(number) == number
    shown = limits.SPECS["max_test_output"].show(number)
    assert limits.parse_size(shown) == number, shown


@settings(max_examples=100, deadline=None)
@given(number=st.integers(0, 10**9), unit=st.sampled_from(sorted(DURATION_UNITS)), pad=spaces, data=st.data())
def test_durations_parse_and_round_trip(number: int, unit: str, pad: str, data: st.DataObject) -> None:
    """Property: ``parse_duration`` reads a whole number with any unit spelling as seconds, and reads
    back every whole number of seconds as the limits describe it."""
    text = f"{pad}{number}{pad}{spelled(unit, data.draw)}{pad}"
    assert limits.parse_duration(text) == number * DURATION_UNITS[unit]
    shown = limits.SPECS["max_age"].show(number)
    assert limits.parse_duration(shown) == number, shown


NUMBER_AND_LETTERS = re.compile(r"\s*\d+(\.\d+)?\s*[a-zA-Z]*\s*")
"""The shape `limits` reads (``\\d`` takes any Unicode digit, as ``float`` does)."""
garbage = st.one_of(
    st.text(max_size=12).filter(lambda t: not NUMBER_AND_LETTERS.fullmatch(t)),
    st.sampled_from(
        [
            "5 parsecs",
            "1.5 XB",
            "12kbps",
            "3 fortnights",
            "-5",
            "1e3",
            "inf",
            "nan",
            "1,000",
            "0x10",
            "9" * 400,
        ]
    ),
)


@settings(max_examples=100, deadline=None)
@given(text=garbage)
def test_garbage_is_a_value_error(text: str) -> None:
    """Property: anything that is not a number with a known unit is refused with a ValueError (which
    `limits.check` turns into an error naming where the value came from), never another error."""
    for parse in (limits.parse_size, limits.parse_duration):
        with pytest.raises(ValueError):
            parse(text)
    for value in (True, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            limits.parse_duration(value)
    with pytest.raises(limits.LimitsError, match=r"^MCPDEBUG_MAX_TEST_OUTPUT: "):
        limits.check("max_test_output", text, "MCPDEBUG_MAX_TEST_OUTPUT")
