"""Fetching a project's sdist into the cache (outside the repository), checking its hash, unpacking
it, and building its venv: the project, its test dependencies, and this repository's plugin installed
editable (so a run always tests the working tree's plugin).

The cache is ``$MCPDEBUG_CORPUS_CACHE`` or ``~/.cache/mcpdebug-corpus``:

    sdists/NAME-VER.tar.gz    as PyPI serves it (pip download)
    src/NAME-VER/             unpacked (the venv's editable install points here)
    work/NAME-VER/slotK/      a copy per run slot: two runs at a time never share a checkout (a test
                              that writes into the source tree would see the other run's files)
    venvs/NAME-VER/           its venv; rebuilt when the recipe's dependencies or pyproject.toml change
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from projects import Project

REPO = Path(__file__).resolve().parents[2]


def cache_dir(given: str | None = None) -> Path:
    root = given or os.environ.get("MCPDEBUG_CORPUS_CACHE") or "~/.cache/mcpdebug-corpus"
    path = Path(root).expanduser().resolve()
    if path == REPO or REPO in path.parents:
        raise SystemExit(f"the corpus cache {path} is inside the repository; choose a folder outside it")
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(project: Project, cache: Path) -> Path:
    """The project's sdist, downloaded once and checked against its pinned hash."""
    folder = cache / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    for found in _sdists(folder, project):
        if sha256(found) == project.sha256:
            return found
    spec = f"{project.name}=={project.version}"
    # Only this distribution from source: its build backend may come as a wheel.
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        project.name,
        "-d",
        str(folder),
        spec,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    downloaded = _sdists(folder, project)
    if not downloaded:
        raise SystemExit(
            f"{spec}: pip download gave no sdist (exit {result.returncode}):\n{result.stderr[-2000:]}"
        )
    digest = sha256(downloaded[0])
    if digest != project.sha256:
        downloaded[0].unlink()
        raise SystemExit(f"{spec}: sdist sha256 {digest} is not the pinned {project.sha256}; refused")
    return downloaded[0]


def _sdists(folder: Path, project: Project) -> list[Path]:
    stems = {f"{project.name}-{project.version}", f"{project.name.replace('-', '_')}-{project.version}"}
    return [p for p in folder.iterdir() if any(p.name.lower().startswith(s.lower() + ".") for s in stems)]


def unpack(sdist: Path, project: Project, cache: Path) -> Path:
    """The sdist unpacked into ``src/NAME-VER`` (once; a half-unpacked folder is redone)."""
    target = cache / "src" / f"{project.name}-{project.version}"
    done = target / ".corpus-unpacked"
    if done.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    tmp = cache / "src" / f".{project.name}-{project.version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(sdist) as t:
            t.extractall(tmp, filter="data")
    (inner,) = list(tmp.iterdir())
    inner.rename(target)
    tmp.rmdir()
    done.write_text(project.sha256)
    return target


def venv(project: Project, src: Path, cache: Path) -> Path:
    """The project's venv (its ``bin/``), built when missing or when what goes into it changed."""
    target = cache / "venvs" / f"{project.name}-{project.version}"
    key = json.dumps(
        {
            "python": sys.version,
            "deps": project.deps,
            "editable": project.editable,
            "sha256": project.sha256,
            "plugin": sha256(REPO / "pyproject.toml"),
            "repo": str(REPO),
        },
        sort_keys=True,
    )
    stamp = target / ".corpus-key"
    if stamp.exists() and stamp.read_text() == key:
        return target / "bin"
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, "-e", str(REPO)], project)
    _run(pip + (["-e", str(src)] if project.editable else [str(src)]), project)
    if project.deps:
        _run(pip + list(project.deps), project)
    stamp.write_text(key)
    return target / "bin"


def _run(command: list[str], project: Project) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{project.name}: {' '.join(command)} failed:\n{result.stderr[-3000:]}")


def slot(project: Project, src: Path, cache: Path, index: int) -> Path:
    """The checkout run slot ``index`` runs the suite in: a copy of ``src``, made once."""
    target = cache / "work" / f"{project.name}-{project.version}" / f"slot{index}"
    done = target / ".corpus-copied"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(src, target, symlinks=True)
        done.write_text(project.sha256)
    return target


def prepare(project: Project, cache: Path) -> tuple[Path, Path]:
    """(the unpacked source, the venv's bin/)."""
    src = unpack(fetch(project, cache), project, cache)
    return src, venv(project, src, cache)
