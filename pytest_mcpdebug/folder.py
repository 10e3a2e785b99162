"""Where things live in a `.mcpdebug/` folder, and how a test process finds a running server.

Shared by the plugin and the server (no pytest import here). The folder holds:

- ``server.json``: the running server's ingest URL, token and pid, and with ``--http`` its MCP URL and
  bearer token (mode 0600, removed on clean exit)
- ``spool/``: one ``*.jsonl`` file per test process that recorded without a server, and the ``*.wal``
  write-ahead copy of a streaming process (deleted when it ends cleanly, ingested if it died)
- ``store.sqlite3``: the store, written only by the server and the CLI
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Final

from pytest_mcpdebug.record import Record

DIRNAME: Final = ".mcpdebug"
SERVER_FILE: Final = "server.json"
SPOOL_DIR: Final = "spool"
SPOOL_SUFFIX: Final = ".jsonl"
WAL_SUFFIX: Final = ".wal"
"""A streaming process's write-ahead copy of each finished test's events: read only if it died."""
STORE_FILE: Final = "store.sqlite3"
IGNORE_HEADER: Final = "# Created by pytest-mcpdebug: recorded test runs, not source."


class FolderError(ValueError):
    """A folder that is not a store was about to be written into; the message says what to give instead."""


def is_store(path: Path) -> bool:
    """Whether ``path`` is a store this project made: it has our ``.gitignore`` (written first, unless
    the disk was full), a store database, or spool files (``spool/*.jsonl``, ``spool/*.wal``). A project's own
    ``output/`` folder, or a ``spool/`` folder of other files, proves nothing."""
    if os.path.isfile(os.path.join(path, STORE_FILE)):
        return True
    try:
        with open(os.path.join(path, ".gitignore"), "rb") as ignore:
            if ignore.read(len(IGNORE_HEADER)) == IGNORE_HEADER.encode():
                return True
    except OSError:
        pass
    # Every recorded run asks (its closing line's command): a scan, not `Path.glob`, whose patterns
    # are compiled to regexes on each call.
    try:
        with os.scandir(os.path.join(path, SPOOL_DIR)) as entries:
            return any(entry.name.endswith((SPOOL_SUFFIX, WAL_SUFFIX)) for entry in entries)
    except OSError:
        return False


def store_in(path: Path) -> Path:
    """The store a user means by ``path``: the folder itself if it is a store or is named
    ``.mcpdebug``, else the ``.mcpdebug`` inside it (``path`` is then a project folder)."""
    return path if path.name == DIRNAME or is_store(path) else path / DIRNAME


def find_store(start: Path) -> Path | None:
    """The store of the project ``start`` is in: ``.mcpdebug`` of ``start`` or its nearest parent."""
    start = start.resolve()
    if start.name == DIRNAME or is_store(start):
        return start if start.is_dir() else None
    for folder in (start, *start.parents):
        candidate = folder / DIRNAME
        if candidate.is_dir() and is_store(candidate):
            return candidate
    return None


COVERAGE_DIR: Final = "coverage"
"""Per-test coverage (``--mcp-debug-coverage``): ``<run id>.coverage``, a coverage.py data file with a
context per test, and while an xdist run lasts ``<run id>/<process>.coverage`` per worker."""
RESUME_ENV: Final = "MCPDEBUG_RESUME"
"""The state file a replacement process resumes from (`hangs.resume`; removed from its environment
at once)."""
PARENT_RUN_ENV: Final = "MCPDEBUG_PARENT_RUN"
PARENT_WORKER_ENV: Final = "MCPDEBUG_PARENT_WORKER"
"""Set by a recording test process for the processes its tests start: a `mcpdebug run` session
started by a test is linked to its run, and its lines are shown with that run's failures."""


def ensure_dir(path: Path) -> Path:
    """Create the store folder with a `.gitignore` that keeps it out of version control.

    Only a folder named ``.mcpdebug`` or one that already is a store is written into: a project
    folder given by mistake must never get our files (a ``.gitignore`` of ``*`` there would hide
    its sources from git).
    """
    if path.name != DIRNAME and path.is_dir() and not is_store(path) and any(path.iterdir()):
        raise FolderError(
            f"{path} is not a pytest-mcpdebug store and not empty: nothing is written there; "
            f"give the project folder or its {DIRNAME} folder instead"
        )
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text(IGNORE_HEADER + "\n*\n")
    return path


def spool_dir(path: Path) -> Path:
    return path / SPOOL_DIR


def coverage_file(path: Path, run_id: str) -> Path:
    """The run's combined coverage data file."""
    return path / COVERAGE_DIR / f"{run_id}.coverage"


def coverage_parts(path: Path, run_id: str) -> Path:
    """The folder of a run's per-process coverage data files (xdist workers), until combined."""
    return path / COVERAGE_DIR / run_id


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class ServerInfo(Record):
    """What ``server.json`` holds (not a msgspec Struct: `mcpdebug run` reads it before msgspec is loaded)."""

    url: str
    token: str
    pid: int
    host: str = ""
    mcp_url: str = ""  # `mcpdebug serve --http` only: its MCP endpoint and the bearer token it requires
    mcp_token: str = ""


def read_server_info(path: Path) -> ServerInfo | None:
    """The live server advertised in ``path/server.json``; None if absent, unreadable or dead.

    A file left behind by a server that was killed names a dead pid and is ignored, so a stale file
    never makes a test run wait on a connection that cannot succeed.
    """
    import json  # here, and socket below: `mcpdebug run` starts its command before either is needed
    import socket

    try:
        data = json.loads((path / SERVER_FILE).read_text())
        info = ServerInfo(
            url=str(data["url"]),
            token=str(data["token"]),
            pid=int(data["pid"]),
            host=str(data.get("host", "")),
            mcp_url=str(data.get("mcp_url", "")),
            mcp_token=str(data.get("mcp_token", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if info.host and info.host != socket.gethostname():
        return None
    return info if pid_alive(info.pid) else None


def write_server_info(path: Path, info: ServerInfo) -> Path:
    """Write ``server.json`` readable by its owner only (it holds the token)."""
    ensure_dir(path)
    target = path / SERVER_FILE
    tmp = path / f".{SERVER_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)  # also when a leftover temporary file had another mode
    import json

    with os.fdopen(fd, "w") as fh:
        json.dump(info._asdict(), fh)
    os.replace(tmp, target)
    return target


def display(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` (where pytest was started) when it is inside it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def dir_arg(directory: Path, base: Path) -> str:
    """`` --dir X`` when the CLI, started in ``base``, would not find this store by itself."""
    args = dir_args(directory, base)
    return f" {shlex.join(args)}" if args else ""


def dir_args(directory: Path, base: Path) -> list[str]:
    """``["--dir", X]`` when the CLI, started in ``base``, would not find this store by itself."""
    if find_store(base) == directory.resolve():
        return []
    target = directory.parent if directory.name == DIRNAME else directory
    return ["--dir", display(target, base) or "."]
