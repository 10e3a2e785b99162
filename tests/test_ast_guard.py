"""A recorded run survives Python 3.11's shared AST recursion count (CPython gh-106905).

Found in the agent trials: anyio's suite with two hangs ended in INTERNALERROR at the terminal
summary (``SystemError: AST constructor recursion depth mismatch``) under ``--mcp-debug`` and not
without it: the collector destroyed the asyncio tasks the stopped hangs left pending while pytest's
assertion rewriter parsed a lazily imported module, and a task's logged error formats its traceback,
which parses again. The same count broke when the plugin imported its own modules in its threads
through that rewriter while the main thread parsed.
"""

from __future__ import annotations

import gc

import pytest

from helpers import run_inner
from pytest_mcpdebug import ast_guard

NESTED_PARSE = """
import ast, gc

class ParsesWhenCollected:
    def __del__(self):
        ast.parse("a + b")  # as a destroyed asyncio task's logged traceback does, for its carets

def test_a_collection_inside_a_parse():
    source = "x = [" + ", ".join(str(i) for i in range(2000)) + "]"
    gc.disable()
    for _ in range(50):
        cycle = ParsesWhenCollected()
        cycle.self = cycle
    del cycle
    gc.set_threshold(1)  # the parse's first allocation starts a collection
    gc.enable()
    try:
        tree = ast.parse(source)
    finally:
        gc.set_threshold(700, 10, 10)
    assert len(tree.body[0].value.elts) == 2000
"""


def test_a_finalizer_that_parses_during_a_parse_does_not_break_a_recorded_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_nested=NESTED_PARSE)
    recorded = run_inner(pytester, "--mcp-debug")
    recorded.assert_outcomes(passed=1)
    plain = run_inner(pytester)
    if ast_guard.AFFECTED:  # the condition is real on this interpreter: without the plugin it fails
        plain.assert_outcomes(failed=1)
        plain.stdout.fnmatch_lines(["*SystemError: AST constructor recursion depth mismatch*"])
    else:
        plain.assert_outcomes(passed=1)


THREAD_IMPORT = """
import ast, importlib, pkgutil, sys, threading

import pytest_mcpdebug

def test_the_plugin_imports_its_modules_without_the_rewriter():
    quiet = {"pytest_mcpdebug.ast_guard", "pytest_mcpdebug.operands", "pytest_mcpdebug.redaction"}
    names = sorted(name for name in quiet if name not in sys.modules)
    assert names, "every candidate module is already imported: pick others"
    parsed = []
    original = ast.parse
    ast.parse = lambda *args, **kwargs: parsed.append(kwargs.get("filename")) or original(*args, **kwargs)
    try:
        for name in names:
            thread = threading.Thread(target=importlib.import_module, args=(name,))
            thread.start()
            thread.join()
    finally:
        ast.parse = original
    assert all(name in sys.modules for name in names)
    assert [f for f in parsed if f and "pytest_mcpdebug" in str(f)] == []
    loaders = {type(sys.modules[name].__loader__).__name__ for name in names}
    assert "AssertionRewritingHook" not in loaders, loaders
"""


def test_the_plugin_modules_are_not_parsed_by_the_assertion_rewriter(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest rewrites every module of a plugin's distribution; the plugin takes its package off that
    list as it is registered, so a module it imports later, in any thread, is not parsed."""
    pytester.makepyfile(test_threads=THREAD_IMPORT)
    # no cached rewritten bytecode to fall back on, as with PYTHONDONTWRITEBYTECODE=1 in a container
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.mktemp("pycache")))
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=1)


@pytest.mark.skipif(not ast_guard.AFFECTED, reason="only Python 3.11 before 3.11.8 shares the count")
def test_the_guard_restores_ast_parse() -> None:
    import ast

    original = ast.parse
    restore = ast_guard.install()
    assert restore is not None and ast.parse is not original
    assert ast_guard.install() is None  # installed once
    assert ast.parse("a").body
    restore()
    assert ast.parse is original
    assert gc.isenabled()


def test_no_plugin_module_is_named_like_a_test_file() -> None:
    """pytest rewrites (parses) any imported module whose file matches ``python_files`` whatever its
    package: `hangs/test_code.py` was, though the package is off the rewriter's list."""
    from pathlib import Path

    import pytest_mcpdebug

    package = Path(pytest_mcpdebug.__file__).parent
    named = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name.startswith("test_") or path.name.endswith("_test.py")
    ]
    assert named == []
