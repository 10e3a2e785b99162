"""A managed run that could not import the project's own code: say so, and what to set.

An MCP client starts the server with a reduced environment (the Python SDK's stdio client passes
only HOME, PATH and a few others), so a src-layout project that the user's shell finds through
PYTHONPATH is not found by the runs the server starts (`run_tests`, `trace_test`): each test module
fails to collect with ``ModuleNotFoundError: No module named 'shop'``. Read from the run's
collection errors (or pytest's last lines, when it stopped before recording), and only for a module
the project itself holds, so a missing third-party package is left to the errors themselves.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpdebug.views.calls import call

if TYPE_CHECKING:
    from mcpdebug.store import Store

_MISSING = re.compile(r"No module named '([A-Za-z_][\w.]*)'")


def advice(store: Store, run: dict[str, Any] | None, terminal: Iterable[str], folder: Path | None) -> str:
    """What to set, when the run failed to import a module of the project; "" otherwise.

    ``folder``: where the run started (its rootdir and cwd are looked at too)."""
    texts = list(terminal)
    if run is not None:
        texts += [f"{e['message']}\n{e['longrepr']}" for e in store.collection_errors(run["run_id"])]
    known = run or {}
    roots = [Path(p) for p in (known.get("rootdir"), known.get("cwd")) if p]
    roots += [folder] if folder is not None else []
    for name in dict.fromkeys(m[1].split(".")[0] for text in texts for m in _MISSING.finditer(text)):
        for root in dict.fromkeys(roots):
            found = _own_module(root, name)
            if found is not None:
                return _advice(name, found, root, run)
    return ""


def _own_module(root: Path, name: str) -> Path | None:
    """The folder to put on PYTHONPATH for the project's module ``name``: `src/` or the root."""
    for base in (root / "src", root):
        if (base / name).is_dir() or (base / f"{name}.py").is_file():
            return base
    return None


def _advice(name: str, base: Path, root: Path, run: dict[str, Any] | None) -> str:
    args = [a for a in (run or {}).get("args") or [] if a != "--mcp-debug"]
    again = call("run_tests", args=args or None, env={"PYTHONPATH": str(base)})
    install = shlex.join([sys.executable, "-m", "pip", "install", "-e", str(root)])
    config = json.dumps({"PYTHONPATH": str(base)})
    return (
        f"The run could not import the project's own module `{name}` (in {base}): this server's Python "
        f"({sys.executable}) does not find it, as MCP clients start servers without the shell's "
        f"PYTHONPATH. Set it in the `env` of the server's MCP config ({config}; `mcpdebug init` in "
        f"{root} writes it), or install the project into that environment (`{install}`). For this "
        f"run alone: {again}."
    )
