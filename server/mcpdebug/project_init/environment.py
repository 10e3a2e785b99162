"""What an MCP client must start so that the server runs the project's tests as the user does.

Clients start a server with a reduced environment (the Python SDK's stdio client passes only HOME,
LOGNAME, PATH, SHELL, TERM and USER), from a folder of their choosing, with their own PATH. So the
command is an absolute path (this environment's `mcpdebug`, or the project's own virtualenv's when
it has one with pytest-mcpdebug installed: that is where the tests' dependencies are), the store is
named by `--dir`, and what the tests need to import the project goes into the config's ``env``: a
src layout that is not installed (`src/` on PYTHONPATH) and the PYTHONPATH set where init runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mcpdebug.commands import script

REDUCED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What the MCP Python SDK's stdio client passes to a server it starts (`get_default_environment`)."""
VENV_NAMES = (".venv", "venv", "env", ".env")
"""Folders of a project that hold its virtualenv, when they have a `pyvenv.cfg`."""
_CHECK_TIMEOUT = 30.0


@dataclass
class ServerCommand:
    """The server as a client config names it, and what was found on the way (said to the user)."""

    command: str
    args: list[str]
    env: dict[str, str]
    python: Path
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def server_command(project: Path, store: Path, pythonpath_config: list[str]) -> ServerCommand:
    """The command that serves ``store`` for ``project`` from any folder, whatever is on PATH.

    ``pythonpath_config``: the `pythonpath` entries of the project's pytest configuration, absolute
    (pytest puts them on sys.path itself, so they need no PYTHONPATH)."""
    python, mcpdebug, notes, warnings = _environment(project)
    serve = ["serve", "--dir", str(store)]
    if mcpdebug is not None:
        command, args = str(mcpdebug), serve
    else:
        command, args = str(python), ["-m", "mcpdebug", *serve]
    entries, why = _pythonpath(project, python, pythonpath_config)
    notes += why
    env = {"PYTHONPATH": os.pathsep.join(entries)} if entries else {}
    return ServerCommand(command, args, env, python, notes, warnings)


def _environment(project: Path) -> tuple[Path, Path | None, list[str], list[str]]:
    """The interpreter the server (and so every run it starts) uses, and its `mcpdebug` script."""
    here = Path(sys.prefix).resolve()
    own = script("mcpdebug")
    venvs = project_venvs(project)
    if not venvs or here in [v.resolve() for v in venvs]:
        where = f"the virtualenv {_shown(here, project)}" if sys.prefix != sys.base_prefix else "this Python"
        return Path(sys.executable), own, [f"the server runs with {where} ({sys.executable})"], []
    venv = venvs[0]
    theirs = venv_script(venv, "mcpdebug")
    python = venv_script(venv, "python")
    if theirs is not None and python is not None:
        note = f"the server runs with the project's virtualenv {_shown(venv, project)}, where its tests run"
        return python, theirs, [note], []
    warning = (
        f"the project's virtualenv {_shown(venv, project)} has no pytest-mcpdebug, so the server runs "
        f"with this one ({sys.executable}), which may lack the tests' dependencies; install it there "
        f"(`{_shown(venv, project)}/bin/python -m pip install pytest-mcpdebug`) and run "
        f"`{_shown(venv, project)}/bin/mcpdebug init` again"
    )
    return Path(sys.executable), own, [], [warning]


def project_venvs(project: Path) -> list[Path]:
    """The project's virtualenvs: its `.venv`-like folders, and an activated one inside it."""
    found = [project / name for name in VENV_NAMES if (project / name / "pyvenv.cfg").is_file()]
    active = os.environ.get("VIRTUAL_ENV")
    if active and (Path(active) / "pyvenv.cfg").is_file():
        path = Path(active)
        if path.resolve().is_relative_to(project.resolve()) and path not in found:
            found.insert(0, path)
    return found


def venv_script(venv: Path, name: str) -> Path | None:
    for candidate in (venv / "bin" / name, venv / "Scripts" / f"{name}.exe"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def src_packages(project: Path) -> list[str]:
    """Top-level packages and modules of a src layout (``src/<name>/__init__.py``, ``src/<name>.py``)."""
    src = project / "src"
    if not src.is_dir():
        return []
    names = []
    for entry in sorted(src.iterdir()):
        if entry.is_dir() and (entry / "__init__.py").is_file() and entry.name.isidentifier():
            names.append(entry.name)
        elif entry.suffix == ".py" and entry.stem.isidentifier() and entry.stem != "conftest":
            names.append(entry.stem)
    return names


def _pythonpath(project: Path, python: Path, configured: list[str]) -> tuple[list[str], list[str]]:
    """The PYTHONPATH the server's runs need, and why each entry is there."""
    entries: list[str] = []
    why: list[str] = []
    src = project / "src"
    names = src_packages(project)
    on_path = any(Path(p).resolve() == src.resolve() for p in configured)
    if names and not on_path:
        missing = [n for n, ok in importable(python, project, names).items() if not ok]
        if missing:
            entries.append(str(src.resolve()))
            why.append(
                f"src layout: {', '.join(missing)} is not installed in that environment, so PYTHONPATH "
                f"gets {src.resolve()} (or install the project: `{python} -m pip install -e {project}`)"
            )
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    carried = [str(Path(p).expanduser().resolve()) for p in current]
    carried = [p for p in dict.fromkeys(carried) if p not in entries]
    if carried:
        entries += carried
        why.append(f"PYTHONPATH is set here ({os.pathsep.join(current)}): the server gets it too")
    return entries, why


def importable(python: Path, project: Path, names: list[str]) -> dict[str, bool]:
    """Whether ``python``, started from ``project`` with a client's reduced environment (no
    PYTHONPATH), finds each top-level module; all False when it cannot be asked."""
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}))"
    )
    env = {k: os.environ[k] for k in REDUCED_ENV if k in os.environ}
    try:
        done = subprocess.run(
            [str(python), "-c", code, *names],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=_CHECK_TIMEOUT,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
        return {n: bool(found.get(n)) for n in names}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return dict.fromkeys(names, False)


def _shown(path: Path, project: Path) -> str:
    try:
        return str(path.resolve().relative_to(project.resolve())) or "."
    except ValueError:
        return str(path)
