"""What the TUI's tables hold: cells cut to their column's width and a few lines, rows never twice.

A long cell wraps inside its column (a node id, a session's name, a line of output), up to a few
lines, and says how much is left for the detail view (Enter). Row keys come from the data (a node
id, a log entry's serial number); `put` adds a row or, when the key is there already, updates it,
so data that repeats an id (two server starts, a test rerun) never stops the UI. A row that is
updated (a call getting its answer, a test its outcome) keeps its height; when its new text needs
another, the table is laid out anew.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Static

PADDING: Final = 2
"""A DataTable column's cell padding, both sides."""
SCROLLBAR: Final = 2
ID_BREAKS: Final = re.compile(r"(?<=::)|(?<=/)|(?<=\[)|(?<=-)|(?<=_)|(?<=\.)|(?<= )")
"""Where a node id (or a name holding one) may be broken across lines: after ``::``, ``/``, ``[``,
``-``, ``_``, ``.`` and a space."""


def clip(
    console: Console,
    text: str,
    width: int,
    lines: int,
    style: str = "",
    breaks: re.Pattern[str] | None = None,
) -> Text:
    """``text`` wrapped at ``width`` cells, at most ``lines`` lines; the last one shown ends in ``…``
    (and how many of the text's lines are left out) when it does not all fit: Enter shows it all.
    Lines are broken at spaces, or where ``breaks`` matches (a node id has no spaces)."""
    width = max(width, 4)
    logical = text.split("\n")
    head = "\n".join(line[: width * lines] for line in logical[:lines])  # no need to wrap the rest
    if breaks is not None:
        wrapped = [part for line in head.split("\n") for part in _broken(line, width, breaks)]
    else:
        wrapped = [line.plain.rstrip() for line in Text(head).wrap(console, width, overflow="fold")]
    wrapped = wrapped or [""]
    if len(wrapped) > lines or head != text:
        kept = wrapped[:lines]
        hidden = len(logical) - lines
        tail = " …" + (f" +{hidden} line{'s' if hidden != 1 else ''}" if hidden > 0 and lines > 1 else "")
        last = kept[-1]
        kept[-1] = last[: max(0, width - len(tail))] + tail if len(last) + len(tail) > width else last + tail
        wrapped = kept
    return Text("\n".join(wrapped), style=style, no_wrap=True, overflow="ellipsis")


def _broken(line: str, width: int, breaks: re.Pattern[str]) -> list[str]:
    """``line`` in pieces of at most ``width`` characters, cut where ``breaks`` allows when it can."""
    out = [""]
    for piece in breaks.split(line):
        while piece:
            room = width - len(out[-1])
            if len(piece) <= room:
                out[-1] += piece
                piece = ""
            elif out[-1] and len(piece) <= width:
                out.append("")
            else:  # longer than a line: cut where the line ends
                out[-1] += piece[:room]
                piece = piece[room:]
                out.append("")
    return [part for part in out if part] or [""]


def each_line(console: Console, lines: Sequence[str], width: int, style: str = "") -> Text:
    """One line for each of ``lines``, each cut to ``width``."""
    text = Text("\n").join(clip(console, line, width, 1) for line in lines)
    text.stylize(style)
    return text


def height(cells: Sequence[Text]) -> int:
    return max((len(cell.plain.split("\n")) for cell in cells), default=1)


def widths(total: int, fixed: Sequence[int], shares: Sequence[float], least: int = 8) -> list[int]:
    """Column widths for a table ``total`` cells wide: the ``fixed`` ones, then what is left shared
    between the others by ``shares``."""
    left = total - SCROLLBAR - PADDING * (len(fixed) + len(shares)) - sum(fixed)
    out = [max(least, int(left * share / sum(shares))) for share in shares]
    return [*fixed, *out]


def say(widget: Static, text: Text) -> None:
    """Show ``text`` in ``widget`` unless it shows it already (each look would draw it again)."""
    said = getattr(widget, "_said", None)
    if not isinstance(said, Text) or not same(said, text):
        widget._said = text  # type: ignore[attr-defined]
        widget.update(text)


def same(one: object, other: Text) -> bool:
    """Whether two texts show the same (rich's ``==`` leaves out the text's own style)."""
    return isinstance(one, Text) and one == other and one.style == other.style


def put(table: DataTable[Any], key: str, cells: Sequence[Text]) -> bool:
    """Add a row under ``key``, or update the row that has it, in place; False if that row's height
    is not what its new cells need (they are shown cut: the caller lays the table out anew)."""
    row = table.rows.get(key)  # type: ignore[call-overload]
    if row is None:
        table.add_row(*cells, key=key, height=height(cells))
        return True
    for column, cell in zip(table.ordered_columns, cells, strict=False):
        if not same(table.get_cell(key, column.key), cell):  # an unchanged cell is not drawn again
            table.update_cell(key, column.key, cell)
    return bool(row.height == height(cells))
