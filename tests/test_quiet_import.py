"""The recorder is imported past pytest's assertion rewriting (`quiet_import`), and nothing else is."""

from __future__ import annotations

import gc
import sys

import pytest

from helpers import run_inner
from pytest_mcpdebug.quiet_import import REWRITE_HOOK_MODULE, own_modules


def test_the_recorder_skips_assertion_rewriting_and_test_modules_keep_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_loaders="""
        import sys

        def test_who_loaded_what():
            recorder = sys.modules["pytest_mcpdebug.recording.recorder"]
            assert type(recorder.__loader__).__name__ == "SourceFileLoader"
            assert type(sys.modules[__name__].__loader__).__name__ == "AssertionRewritingHook"
            assert any(type(h).__name__ == "AssertionRewritingHook" for h in sys.meta_path)

        def test_explained():
            seen = [1, 2]
            assert seen == [1, 3]
        """
    )
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*assert [[]1, 2[]] == [[]1, 3[]]*"])  # pytest's own explanation


class _Hook:
    """Stands for pytest's hook: what `own_modules` looks for is the module of its class."""


def test_the_hook_is_put_back_in_its_place_with_any_added_meanwhile() -> None:
    rewriting = type("AssertionRewritingHook", (_Hook,), {"__module__": REWRITE_HOOK_MODULE})()
    added = _Hook()
    saved = list(sys.meta_path)
    sys.meta_path.insert(0, rewriting)
    try:
        with own_modules():
            assert rewriting not in sys.meta_path
            assert not gc.isenabled()
            sys.meta_path.append(added)
        assert sys.meta_path == [rewriting, *saved, added]
        assert gc.isenabled()
    finally:
        sys.meta_path[:] = saved
