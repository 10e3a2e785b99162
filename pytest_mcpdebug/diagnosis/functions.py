"""Which function each line of a source file belongs to: the innermost ``def`` around it."""

from __future__ import annotations

import ast

MODULE = "<module>"


def line_functions(source: str) -> dict[int, str]:
    """Qualified function name of each line inside a function (class bodies and module code are left
    out: they run at import, not in a test); {} for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    owners: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    owners[line] = name  # inner functions are visited after: they win
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return owners


def statement_lines(source: str) -> dict[int, tuple[int, int]]:
    """For each line, the span (first, last) of the innermost simple statement on it, so a
    multi-line statement's source can be shown whole."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            end = node.end_lineno or node.lineno
            for line in range(node.lineno, end + 1):
                current = spans.get(line)
                if current is None or current[1] - current[0] > end - node.lineno:
                    spans[line] = (node.lineno, end)
    return spans
