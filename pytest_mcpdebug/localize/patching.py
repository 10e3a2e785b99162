"""Run a changed line without touching the file: the changed module is compiled in memory and the
functions it defines get the new code objects (``function.__code__``), then get their old ones back.

The project's files are never written, so a run killed half-way leaves nothing changed. Every
function object of the file is found through its code object (`gc.get_referrers`), so methods,
decorated functions (the wrapper keeps the same function object) and closures made earlier all
run the changed code; a function defined inside another is changed through its parent's code too.
A line outside any function (module or class body) ran at import: it cannot be changed this way.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable, Iterator


class CannotPatch(Exception):
    """The change cannot be run in memory: the message says why."""


def patch(file: str, source: str, line: int, new_text: str) -> Callable[[], None]:
    """Give the functions of ``file`` whose code holds ``line`` the changed code; returns the undo."""
    lines = source.splitlines(keepends=True)
    if not 1 <= line <= len(lines):
        raise CannotPatch(f"{file} has no line {line}")
    ending = "\n" if lines[line - 1].endswith("\n") else ""
    lines[line - 1] = new_text.rstrip("\n") + ending
    try:
        changed = compile("".join(lines), file, "exec", dont_inherit=True)
        original = compile(source, file, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise CannotPatch(f"the change does not compile: {exc}") from None
    # the changed function differs, and so does every code holding it (its module, class, parent)
    pairs = [(old, new) for old, new in zip(_codes(original), _codes(changed), strict=False) if old != new]
    if len(pairs) < 2:
        raise CannotPatch(f"{file}:{line} is not inside a function (it runs at import)")
    undo: list[tuple[types.FunctionType, types.CodeType]] = []
    functions = _functions(file)
    for compiled_old, new in pairs:  # a module or class body has no function object: left alone
        for function in functions.get((compiled_old.co_name, compiled_old.co_firstlineno), ()):
            if function.__code__.co_freevars != new.co_freevars:
                continue  # a closure whose cells differ: leave it
            undo.append((function, function.__code__))
            function.__code__ = new
    if not undo:
        raise CannotPatch(
            f"no live function holds {file}:{line} (not imported by these tests, or not in a function)"
        )

    def restore() -> None:
        for function, code in reversed(undo):
            function.__code__ = code

    return restore


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """Every code object in a module's tree, in a stable order (the same for both compilations)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(file: str) -> dict[tuple[str, int], list[types.FunctionType]]:
    """The live functions of ``file`` by (name, first line): the running twins of its code objects."""
    found: dict[tuple[str, int], list[types.FunctionType]] = {}
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__code__.co_filename == file:
            code = obj.__code__
            found.setdefault((code.co_name, code.co_firstlineno), []).append(obj)
    return found
