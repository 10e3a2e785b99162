"""Small changes of one line, for mutation-based fault localisation (`runner`).

A line whose small change turns the failing tests green is where a fix can be made (Metallaxis,
MUSE); a condition whose negation does so is a critical predicate (predicate switching, here for
every evaluation of it in the run rather than one). The changes: each comparison into its
neighbours (``<`` <-> ``<=``, ``==`` <-> ``!=``, ...), ``is``/``in`` and their negations, ``and`` <->
``or``, ``+`` <-> ``-``, an integer constant by one up or down, ``True`` <-> ``False``, a condition
negated (``if x:`` -> ``if not (x):``), ``not`` dropped.

Pure: a line's text in, changed texts out (each still one line; only those that compile are kept by
the caller).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Final

_COMPARISONS: Final = {
    "<": ("<=", ">"),
    "<=": ("<", ">="),
    ">": (">=", "<"),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
}
_SWAPS: Final = {"and": "or", "or": "and", "+": "-", "-": "+", "True": "False", "False": "True"}
_CONDITION: Final = re.compile(r"^(\s*)(if|elif|while)\s+(.*):\s*(#.*)?$")
_MAX_CHANGES: Final = 12


@dataclass(frozen=True)
class Change:
    description: str
    """e.g. ``'<' -> '<='`` or ``negated the condition``."""
    text: str
    """The whole line, changed."""


def changes(line: str) -> list[Change]:
    """The changes of ``line`` (a physical line of source), most telling first, at most 12."""
    found: list[Change] = []
    match = _CONDITION.match(line)
    if match and match.group(2) != "while":
        indent, keyword, condition, _ = match.groups()
        found.append(Change("negated the condition", f"{indent}{keyword} not ({condition}):"))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return found
    for i, token in enumerate(tokens):
        if token.start[0] != 1 or token.end[0] != 1:
            continue
        start, end = token.start[1], token.end[1]
        following = tokens[i + 1].string if i + 1 < len(tokens) else ""
        previous = tokens[i - 1].string if i else ""
        replacements: tuple[str, ...] = ()
        if token.string in _COMPARISONS and token.type == tokenize.OP:
            replacements = _COMPARISONS[token.string]
        elif token.string in _SWAPS and token.type in (tokenize.OP, tokenize.NAME):
            if token.string in "+-" and previous in ("(", "[", ",", "=", "", "return", "("):
                continue  # a sign, not an operation
            replacements = (_SWAPS[token.string],)
        elif token.string == "is":
            if following == "not":
                end = tokens[i + 1].end[1]
                replacements = ("is",)
            else:
                replacements = ("is not",)
        elif token.string == "in" and token.type == tokenize.NAME and previous not in ("not", "for"):
            if not line.lstrip().startswith(("for ", "async for ")):
                replacements = ("not in",)
        elif token.string == "not" and token.type == tokenize.NAME and following != "in" and previous != "is":
            replacements = ("",)
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            value = int(token.string)
            replacements = tuple(str(v) for v in (value + 1, value - 1) if v >= 0)
        for new in replacements:
            text = line[:start] + new + line[end:]
            old = line[start:end]
            found.append(Change(f"{old!r} -> {new!r}" if new else f"dropped {old!r}", text))
    return found[:_MAX_CHANGES]
