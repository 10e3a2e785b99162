"""The names a statement reads (its operands), from its file as it is on disk: what a value history
(`diagnosis.values`) follows back from a failing line. Shared by the server's `get_history` and the
brief after pytest's summary."""

from __future__ import annotations

import ast
import linecache

from pytest_mcpdebug.diagnosis.functions import statement_lines


def names_at(file: str, line: int) -> list[str]:
    """The names a statement reads, in order (its operands), from the file as it is on disk."""
    linecache.checkcache(file)
    source = "".join(linecache.getlines(file))
    span = statement_lines(source).get(line)
    if span is None:
        return []
    text = "".join(linecache.getlines(file)[span[0] - 1 : span[1]])
    try:
        tree = ast.parse(_dedent(text))
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in names:
            names.append(node.id)
    return names


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    body = "\n".join(x[indent:] for x in lines)
    return (
        body
        if not body.lstrip().startswith(("elif ", "else", "except", "finally"))
        else "if 1: pass\n" + body
    )
