"""Which code a run tested: HEAD's commit and a digest of the uncommitted changes to tracked files.

Flaky history compares outcomes on the same code version, so every recorded run sends one
`CodeVersion`. Asked of git once per run, by the controlling process, in a thread of its own so the
run never waits for it (a huge working tree can take git a while to diff).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

# Timeouts
GIT_TIMEOUT: Final = 20.0
"""git gets this long to answer; a slower answer leaves the version unknown, saying so."""

_ENV = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}  # never take the index lock


def code_version(root: Path) -> tuple[str, str, str]:
    """(commit, changes digest, note): the note says why the version is unknown, when it is."""
    if not _may_be_in_git(root):
        return _outside(root)
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
            cwd=root,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env=_ENV,
            check=False,
        )
    except FileNotFoundError:
        return "", "", "git is not installed: runs cannot be told apart by code version"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", "", f"git did not answer ({type(exc).__name__})"
    if head.returncode != 0:
        inside = subprocess.run(
            ["git", "rev-parse", "--git-dir"], cwd=root, capture_output=True, env=_ENV, check=False
        )
        if inside.returncode != 0:
            return _outside(root)
        return "", "", "the git repository has no commit yet"
    commit = head.stdout.decode().strip()
    try:
        changes = _diff_digest(root)
    except (OSError, subprocess.SubprocessError) as exc:
        return commit, "", f"git diff failed ({type(exc).__name__}): uncommitted changes unknown"
    return commit, changes, ""


def _outside(root: Path) -> tuple[str, str, str]:
    return "", "", f"{root} is not in a git repository: runs cannot be told apart by code version"


def _may_be_in_git(root: Path) -> bool:
    """Whether git could find a repository from ``root``: a ``.git`` in it or a parent, or git told
    where one is. A few ``stat`` calls, where asking git costs two processes (~5 ms of CPU)."""
    if os.environ.get("GIT_DIR"):
        return True
    return any(os.path.lexists(os.path.join(folder, ".git")) for folder in (root, *root.parents))


def _diff_digest(root: Path) -> str:
    """A digest of ``git diff HEAD`` (tracked files only), streamed: "" when the tree is clean."""
    digest = hashlib.sha256()
    size = 0
    with subprocess.Popen(
        ["git", "diff", "--no-ext-diff", "--no-textconv", "--binary", "--no-color", "HEAD"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_ENV,
    ) as git:
        assert git.stdout is not None
        while chunk := git.stdout.read(1 << 16):
            digest.update(chunk)
            size += len(chunk)
        if git.wait(GIT_TIMEOUT) != 0:
            raise subprocess.SubprocessError(f"exit status {git.returncode}")
    return digest.hexdigest()[:16] if size else ""


def start(root: Path, emit: Callable[[str, str, str], None]) -> threading.Thread:
    """Ask git in a daemon thread and hand the answer to ``emit(commit, changes, note)`` there (outside
    any repository at once, still in the thread: ``emit`` also reads the run's environment, which
    takes the secrets' rules a few milliseconds to go through)."""

    def ask() -> None:
        try:
            commit, changes, note = code_version(root) if _may_be_in_git(root) else _outside(root)
        except Exception as exc:  # never let git's trouble reach the run
            commit, changes, note = "", "", f"code version unknown: {type(exc).__name__}: {exc}"
        emit(commit, changes, note)

    thread = threading.Thread(target=ask, name="mcpdebug-code-version", daemon=True)
    thread.start()
    return thread
