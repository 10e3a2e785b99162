"""Is a thread running a test's own code, or pytest's, or a debugger's? (Where an interruption may land.)"""

from __future__ import annotations

import sys
from typing import Any, Final

_OWN: Final = __file__.rsplit("/", 2)[0] + "/"
"""This plugin's package: a signal arriving in its own code is not in the test."""
_RUNNER_FILE: Final = ("_pytest/runner.py", "_pytest\\runner.py")


def in_test_code(frame: Any) -> bool:
    """True if ``frame`` (where the signal arrived) runs a test phase's code: inside pytest's
    ``CallInfo.from_call``, which turns an exception into the test's failure, and not in this plugin."""
    if frame is None or frame.f_code.co_filename.startswith(_OWN):
        return False
    walk = frame
    under_pytest = False
    while walk is not None:
        code = walk.f_code
        if code.co_name == "from_call" and code.co_filename.endswith(_RUNNER_FILE):
            return True
        if code.co_name in (
            "pytest_runtest_makereport",
            "pytest_exception_interact",
            "pytest_runtest_logreport",
        ):
            return False
        under_pytest = under_pytest or "_pytest" in code.co_filename
        walk = walk.f_back
    return not under_pytest  # a program outside pytest (python -m pytest_mcpdebug.hangs.detect): its own code


_DEBUGGERS: Final = ("pydevd", "bdb", "pdb", "debugpy", "_pydevd")


def debugger_active() -> bool:
    trace = sys.gettrace()
    if trace is None:
        return False
    module = getattr(trace, "__module__", "") or type(trace).__module__ or ""
    return module.split(".")[0] in _DEBUGGERS
