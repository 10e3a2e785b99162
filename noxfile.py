"""The whole test suite on every Python the project supports.

    nox                      # tests-3.10, tests-3.11, tests-3.12 and tests-3.13, one after the other
    nox -s tests-3.13        # one of them
    nox -s tests-3.12 -- -x tests/test_failures.py   # extra arguments go to pytest

Each session installs the project with its dev extra into a fresh virtualenv under `.nox/` and runs
the README's test command there (with `-n 2`). Interpreters are looked up as `python3.X` on PATH, pyenv's
installed versions first: pyenv's shims answer only for the versions selected in the shell.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = True


def _pyenv_bins() -> list[str]:
    """The bin folders of pyenv's newest installed patch release of each of `PYTHONS`."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: list[str] = []
    for wanted in PYTHONS:
        releases = [p for p in versions.glob(f"{wanted}.*") if (p / "bin" / f"python{wanted}").exists()]
        if releases:
            newest = max(releases, key=lambda p: [int(n) if n.isdigit() else -1 for n in p.name.split(".")])
            found.append(str(newest / "bin"))
    return found


os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The project's test suite (pytest, two xdist workers)."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *session.posargs)
