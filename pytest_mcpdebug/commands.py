"""How a printed hint names a command so that it works as pasted: `mcpdebug` when the shell finds
this environment's, else the path that runs it.

The README's own flow installs into `.venv/` and never puts it on PATH, so a hint saying
`mcpdebug show ...` would answer `command not found`; and a `mcpdebug` on PATH from another
environment (pipx, another venv) may be another version. Shared by the plugin's closing line and
the CLI's "Next:" hints (no pytest import here).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from pathlib import Path


def program(name: str, base: Path | None = None) -> str:
    """The shell word(s) that run this environment's ``name`` (``mcpdebug``, ``pytest``) from the
    folder ``base`` (default: the current one): the bare name when PATH finds this environment's,
    else its path (relative to ``base`` when that is shorter), else ``python -m name``."""
    folder = str(base if base is not None else Path.cwd())
    return _program(name, folder, os.environ.get("PATH", os.defpath), sys.executable)


def script(name: str) -> Path | None:
    """This environment's console script ``name``: beside the interpreter (a venv's `bin/`), or in
    its scripts folder; None when neither has it."""
    exe = ".exe" if os.name == "nt" else ""
    beside = Path(sys.executable).parent / f"{name}{exe}"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    import sysconfig  # ~1 ms of imports: only when the usual place (a venv's bin/) has no script

    scripts = sysconfig.get_path("scripts")
    candidate = Path(scripts) / f"{name}{exe}" if scripts else None
    if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


@functools.lru_cache(maxsize=32)
def _program(name: str, base: str, path: str, executable: str) -> str:
    own = script(name)
    found = shutil.which(name, path=path)
    if own is not None and found is not None and _same(own, Path(found)):
        return name
    if own is not None:
        return shlex.quote(shortest(own, Path(base)))
    return shlex.join([shortest(Path(executable), Path(base)), "-m", name])


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def shortest(path: Path, base: Path) -> str:
    """``path`` as typed from ``base``: relative when shorter than absolute (``./x`` rather than a
    bare ``x``, which a shell would look up on PATH)."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, base)
    except ValueError:  # another drive (Windows)
        return absolute
    if os.sep not in relative and (os.altsep is None or os.altsep not in relative):
        relative = os.curdir + os.sep + relative
    return relative if len(relative) < len(absolute) else absolute
