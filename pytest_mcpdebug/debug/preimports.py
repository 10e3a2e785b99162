"""What a debug test run imported before its tests that the next run's spare may import ahead of it.

A spare (`warm`) imports pytest and debugpy before its job; a run of this project also imports its
plugins' libraries and what its conftest files and test modules import (trio for anyio's plugin,
numpy or Django for a project): often more than pytest itself. Once collection is done, the run
names the modules it has that a spare may import first: installed libraries and the standard
library, never the project's own code (it changes between runs), nor anything pytest rewrites the
asserts of (a plugin's package, `pytest.register_assert_rewrite`): imported before pytest it would
not be rewritten, and pytest would warn.
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig
from typing import Any, Final

# Limits
MAX_MODULES: Final = 5_000
OWN: Final = frozenset(
    {"__main__", "__mp_main__", "pytest", "_pytest", "pytest_mcpdebug", "mcpdebug", "debugpy"}
)
"""Imported by the spare itself or by the run as a plugin."""


def preimportable(rewrite_hook: Any) -> list[str]:
    """The modules of ``sys.modules`` a spare may import, in the order they were imported."""
    roots = tuple(_library_roots())
    marked = set(getattr(rewrite_hook, "_must_rewrite", ()))
    names = []
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top in OWN or top in marked or top.startswith(("_pydev", "pydev")):
            continue
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.startswith(roots):
            continue
        if type(getattr(module, "__loader__", None)).__name__ == "AssertionRewritingHook":
            continue
        names.append(name)
        if len(names) >= MAX_MODULES:
            break
    return names


def _library_roots() -> set[str]:
    """Where installed libraries and the standard library live (not where the project is)."""
    paths = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # an old virtualenv's site module has none
        paths.update(site.getsitepackages())
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    roots = set()
    for path in (*paths, user):
        if path:
            roots.update({os.path.join(path, ""), os.path.join(os.path.realpath(path), "")})
    return roots
