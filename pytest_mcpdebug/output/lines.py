"""Cutting a byte stream into complete, bounded lines without a Python loop per line.

Output can be a million lines a second; everything here works on whole blocks with C-speed bytes
methods and only looks at single lines when one is longer than the limit.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pytest_mcpdebug.output.sources import Source

CUT_MARKER: Final = " [... mcpdebug: line cut at {limit} bytes; {dropped} more bytes dropped]"
_CUT_MARKER_AT_END: Final = rb" \[\.\.\. mcpdebug: line cut at \d+ bytes; (\d+) more bytes dropped\]\Z"


_pattern = functools.cache(re.compile)
"""Compiled on first use: every recorded run imports this module, few cut a line."""


def cut_marker(limit: int, dropped: int) -> bytes:
    return CUT_MARKER.format(limit=limit, dropped=dropped).encode()


_CUT_TEXT: Final = r" \[\.\.\. mcpdebug: line cut at (\d+) bytes; (\d+) more bytes dropped\]\Z"


def cut_at(text: str) -> tuple[int, int] | None:
    """(bytes kept, bytes dropped) of a line that was cut when recorded, or None for a whole line."""
    found = _pattern(_CUT_TEXT).search(text, max(len(text) - 100, 0))
    return (int(found.group(1)), int(found.group(2))) if found else None


def has_long_line(block: bytes, limit: int) -> bool:
    """Whether some line of ``block`` is longer than ``limit`` bytes.

    A line longer than ``limit`` covers a whole aligned window of ``limit // 2`` bytes, so probing
    those windows for a newline (each probe stops at the first one it finds) rules long lines out
    in a few microseconds per megabyte. Only a block that fails a probe is split to measure.
    """
    if len(block) <= limit:
        return False
    half = max(limit // 2, 1)
    for start in range(0, len(block), half):
        if block.find(b"\n", start, start + half) < 0 and len(block) - start >= half:
            return max(map(len, block.split(b"\n"))) > limit
    return False


def cut_long_lines(block: bytes, limit: int) -> bytes:
    """``block`` with every line longer than ``limit`` cut there, followed by a marker."""
    if not has_long_line(block, limit):
        return block
    return b"\n".join(_cut_line(line, limit) for line in block.split(b"\n"))


def _cut_line(line: bytes, limit: int) -> bytes:
    """A line already cut upstream (the plugin cuts, then the server) keeps its marker: the marker
    does not count against the limit, and a second cut adds the bytes the first one dropped."""
    if len(line) <= limit:
        return line
    upstream = _pattern(_CUT_MARKER_AT_END).search(line, max(len(line) - 100, 0))
    if upstream is None:
        return line[:limit] + cut_marker(limit, len(line) - limit)
    text = line[: upstream.start()]
    if len(text) <= limit:
        return line
    return text[:limit] + cut_marker(limit, len(text) - limit + int(upstream.group(1)))


class LineSplitter:
    """Feeds arbitrary chunks in; gets complete lines out, at most ``limit`` bytes each.

    The unfinished last line is held back until its newline arrives (or `flush`). Memory stays
    bounded: of a line longer than the limit only the first ``limit`` bytes are kept, and the rest
    is counted, not stored.
    """

    __slots__ = ("_dropped", "_rest", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._rest = b""
        self._dropped = -1  # >= 0 while skipping the rest of an over-long line

    def feed(self, data: bytes) -> tuple[bytes, int]:
        """Complete lines (joined by newlines, no trailing newline) and how many there are."""
        if not data:
            return b"", 0
        head: bytes | None = None
        if self._dropped >= 0:  # inside an over-long line: skip to its end
            end = data.find(b"\n")
            if end < 0:
                self._dropped += len(data)
                return b"", 0
            head = self._rest + cut_marker(self.limit, self._dropped + end)
            self._rest, self._dropped = b"", -1
            data = data[end + 1 :]
        rest, self._rest = self._rest, b""
        end = data.rfind(b"\n")
        if end < 0:
            block, count = b"", 0
            self._hold(rest + data if rest else data)
        else:
            # One copy, not two: the held-back start of a line joined to the chunk's complete lines.
            whole = b"".join((rest, memoryview(data)[:end])) if rest else data[:end]
            block = cut_long_lines(whole, self.limit)
            count = block.count(b"\n") + 1
            self._hold(data[end + 1 :])
        if head is not None:
            return (head + b"\n" + block, count + 1) if count else (head, 1)
        return block, count

    @property
    def holding(self) -> bool:
        """Whether an unfinished line is held back, waiting for its newline."""
        return bool(self._rest) or self._dropped >= 0

    def flush(self) -> tuple[bytes, int]:
        """The unfinished last line, as a line of its own (at the end of a phase)."""
        if self._dropped >= 0:
            line = self._rest + cut_marker(self.limit, self._dropped)
        elif self._rest:
            line = self._rest
        else:
            return b"", 0
        self._rest, self._dropped = b"", -1
        return line, 1

    def _hold(self, rest: bytes) -> None:
        if len(rest) > self.limit:
            self._rest, self._dropped = rest[: self.limit], len(rest) - self.limit
        else:
            self._rest = rest


class Unit:
    """Line numbering of one unit of output (`tail.OutputTail`): how many lines it has, in all and
    per stream."""

    __slots__ = ("lines", "nodeid", "streams")

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.lines = 0
        self.streams: dict[str, int] = {}


class Stream:
    """One captured stream being tailed (`tail.OutputTail`): where we are in pytest's file, and the
    unfinished line."""

    __slots__ = ("name", "offset", "source", "splitter")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.source: Source | None = None
        self.offset = 0
        self.splitter = LineSplitter(limit)
