"""What kind of statement each line of a source file holds, what it calls, and which lines a branch
decides: the static evidence the suspects' ranking weighs beside coverage (`localization`).

Pure over a file's text; a file that does not parse has no statements (every line ``"other"``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Final

from pytest_mcpdebug.diagnosis.functions import line_functions

KINDS: Final = ("predicate", "return", "assignment", "call", "loop", "raise", "other")
"""``predicate``: an ``if``/``elif``/``while``/``assert`` test, or a line computing a condition (a
comparison or ``and``/``or``); ``return``: a ``return`` or ``yield`` of a value."""

_DUNDERS: Final = {
    ast.Eq: "__eq__",
    ast.NotEq: "__ne__",
    ast.Lt: "__lt__",
    ast.LtE: "__le__",
    ast.Gt: "__gt__",
    ast.GtE: "__ge__",
    ast.In: "__contains__",
    ast.NotIn: "__contains__",
}


@dataclass
class Statements:
    kinds: dict[int, str] = field(default_factory=dict)
    calls: dict[int, set[str]] = field(default_factory=dict)
    """Names a line calls: ``f`` for ``f(x)`` and ``obj.f(x)``, ``__eq__`` for ``a == b``, ``__len__``
    for ``len(a)``, ``Money.__init__`` for a class called by name."""
    decides: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """A branch's line -> the first line of each block it chooses between (body, else)."""
    functions: dict[int, str] = field(default_factory=dict)
    """Line -> qualified name of the innermost function around it."""

    def kind(self, line: int) -> str:
        return self.kinds.get(line, "other")


def statements(source: str) -> Statements:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Statements()
    found = Statements(functions=line_functions(source))
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            _set(found, node.test, "predicate")
            blocks = [node.body[0].lineno] + ([node.orelse[0].lineno] if node.orelse else [])
            found.decides[node.lineno] = tuple(blocks)
        elif isinstance(node, ast.Assert):
            _set(found, node.test, "predicate")
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _set(found, node.iter, "loop")
        elif isinstance(node, ast.Return) and node.value is not None:
            _set(found, node, "predicate" if _condition(node.value) else "return")
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            _set(found, node, "return")
        elif isinstance(node, ast.Raise):
            _set(found, node, "raise")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            value = node.value
            _set(found, node, "predicate" if value is not None and _condition(value) else "assignment")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            _set(found, node, "call")
        if isinstance(node, ast.Call):
            name = _called(node.func)
            if name:
                found.calls.setdefault(node.lineno, set()).add(name)
                if name == "len":
                    found.calls[node.lineno].add("__len__")
                if name[:1].isupper():
                    found.calls[node.lineno].add(f"{name}.__init__")
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                dunder = _DUNDERS.get(type(op))
                if dunder:
                    found.calls.setdefault(node.lineno, set()).add(dunder)
    return found


def _set(found: Statements, node: ast.AST, kind: str) -> None:
    """Every line of the node gets the kind, unless a line already holds a stronger one."""
    first = getattr(node, "lineno", 0)
    last = getattr(node, "end_lineno", None) or first
    for line in range(first, last + 1):
        current = found.kinds.get(line)
        if current is None or KINDS.index(kind) < KINDS.index(current):
            found.kinds[line] = kind


def _condition(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Compare, ast.BoolOp)) for n in ast.walk(node))


def _called(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
