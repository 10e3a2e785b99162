"""A debuggee started before its job: the interpreter up and the slow imports done, waiting to be told
what to run (`mcpdebug serve` keeps one spare, `mcpdebug.debug.spares`).

Run by path, like the launcher beside it (nothing of ``pytest_mcpdebug`` is imported before pytest
loads it as a plugin, so pytest finds it as in a fresh process)::

    python warm.py --job FD --parent PID tests     # then pytest, as `python -m pytest ARGS` would
    python warm.py --job FD --parent PID script    # then the launcher, as `python launcher.py ARGS`

Two JSON lines arrive on FD. The first, at once, names the modules to import while nobody waits:
debugpy's server (pydevd: ~150 ms of CPU) always, pytest for a test run, and what the previous
debug run of the project imported before its tests that may come first (`preimports`). The
second is the job: ``{"cwd": ..., "env": {...}, "argv": [...]}``. Its environment replaces this
process's (the server sends only jobs whose start-up variables match: `startup_variable`), its
folder becomes the current one. End of file instead of a job: the server no longer wants this
process, which exits quietly.

If a file of a module imported here has changed since (a package reinstalled), the job is not run
on stale code: the process becomes a fresh one (``exec``) that runs it from the start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import warnings
from typing import IO, Any

PARENT_POLL = 0.5
WATCH_THREAD = "mcpdebug-parent-watch"
"""The launcher's name for it: the launcher starts no second one."""

STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "PYDEVD", "DEBUGPY")
STARTUP_NAMES = ("LANG", "LANGUAGE", "TZ", "HOME", "TMPDIR", "TEMP", "TMP")


def startup_variable(name: str) -> bool:
    """Read when the interpreter or the preimported modules start: a job cannot change it here."""
    return name.startswith(STARTUP_PREFIXES) or name in STARTUP_NAMES


def _line(pipe: IO[bytes]) -> dict[str, Any] | None:
    data = pipe.readline().strip()
    if not data:
        return None
    message: dict[str, Any] = json.loads(data)
    return message


def _prepare(kind: str, modules: list[str]) -> None:
    """The imports a run of ``kind`` would make first, made while nobody waits."""
    with contextlib.suppress(ImportError):  # the launcher says debugpy is missing, as in a cold start
        import debugpy.server.api  # noqa: F401  (pydevd, its bundle and its schema)
    if kind != "tests":
        return
    import pytest  # noqa: F401

    rewritten = _plugin_packages()
    with warnings.catch_warnings():  # a library's import-time warning is not the run's to show
        warnings.simplefilter("ignore")
        for name in modules:
            if name.partition(".")[0] in rewritten or name in sys.modules:
                continue
            try:
                __import__(name)
            except Exception:  # the run imports it again, and says what is wrong
                continue


def _plugin_packages() -> set[str]:
    """Top-level names of pytest plugins' distributions: pytest rewrites their asserts (and warns
    about any imported before it)."""
    from importlib import metadata

    names = set()
    for dist in metadata.distributions():
        if any(ep.group == "pytest11" for ep in dist.entry_points):
            for file in dist.files or []:
                parts = file.parts
                if len(parts) == 1 and parts[0].endswith(".py"):
                    names.add(parts[0][:-3])
                elif len(parts) > 1 and parts[-1] == "__init__.py":
                    names.add(parts[0])
    return names


def _changed_since(started: float) -> bool:
    """Whether a file of an imported module was modified (or removed) after ``started``."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            try:
                if os.stat(file).st_mtime > started:
                    return True
            except OSError:
                return True
    return False


def _watch_parent(parent: int) -> None:
    """End this process group once ``parent`` (the server) is gone: a spare never outlives it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        with contextlib.suppress(OSError):  # nobody may read it any more (the server's pipe went with it)
            os.write(
                2, b"\nmcpdebug: the mcpdebug server that was debugging this process is gone; ending it.\n"
            )
        if os.getpgrp() == os.getpid():  # started in its own group: what it started ends with it
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(137)

    thread = threading.Thread(target=watch, name=WATCH_THREAD, daemon=True)
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]  # pydevd neither traces nor
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]  # suspends this thread
    thread.start()


def main(argv: list[str]) -> None:
    fd, parent, kind = int(argv[argv.index("--job") + 1]), int(argv[argv.index("--parent") + 1]), argv[-1]
    _watch_parent(parent)
    here = sys.path.pop(0)  # this folder: its modules must not stand in for libraries of those names
    started = time.time()
    with os.fdopen(fd, "rb") as pipe:
        first = _line(pipe) or {}
        started_with = dict(os.environ)
        _prepare(kind, [str(m) for m in first.get("preimport", [])])
        added = {k: v for k, v in os.environ.items() if k not in started_with}  # debugpy's own settings
        job = _line(pipe)
    if job is None:
        raise SystemExit(0)
    os.chdir(str(job["cwd"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in job["env"].items()})
    args = [str(a) for a in job["argv"]]
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
    if _changed_since(started):
        command = ["-m", "pytest"] if kind == "tests" else [launcher]
        os.execv(sys.executable, [sys.executable, *command, *args])
    os.environ.update(added)
    import runpy

    if kind == "tests":
        sys.path.insert(0, os.getcwd())  # as `python -m` puts it
        sys.argv = ["pytest", *args]
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, here)  # as `python launcher.py` has it (the launcher then puts the script's)
        sys.argv = [launcher, *args]
        runpy.run_path(launcher, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
