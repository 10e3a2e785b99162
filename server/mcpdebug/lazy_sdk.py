"""Importing parts of the MCP SDK without its package ``__init__`` (which imports all of it).

``import mcp.server.runner`` first runs ``mcp/__init__.py`` and ``mcp/server/__init__.py``, which
import the client, every server class and the HTTP stack: 0.5-0.7 s here (see `mcpdebug.stdio_start`,
which needs a small part of it first). `defer_packages` puts those two package modules in place
without running their ``__init__``, so their submodules import alone; `complete_packages` runs
them later, which leaves the SDK imported exactly as a plain ``import mcp`` would. This module
imports nothing of the SDK itself.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Final

DEFERRED: Final = ("mcp", "mcp.server")
"""The packages whose ``__init__`` imports everything (their own submodules are what is needed)."""

Deferred = list[tuple[ModuleType, ModuleSpec]]


def defer_packages() -> Deferred:
    """Put the ``mcp`` and ``mcp.server`` package modules in place without running their
    ``__init__``; [] (and nothing changed) once the SDK is imported, or if the SDK is not laid out
    as expected (then everything is imported the usual way)."""
    if any(name in sys.modules for name in DEFERRED):
        return []
    deferred: Deferred = []
    for name in DEFERRED:
        spec = importlib.util.find_spec(name)  # the parent's module (deferred) gives the path
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            for module, _ in deferred:
                del sys.modules[module.__name__]
            return []
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
        deferred.append((module, spec))
    return deferred


def complete_packages(deferred: Deferred) -> None:
    """Run the deferred packages' ``__init__``, innermost first (``mcp``'s imports ``mcp.server``'s
    names)."""
    for module, spec in reversed(deferred):
        assert spec.loader is not None
        spec.loader.exec_module(module)
