"""A store file that cannot be used as it is: corrupted, deleted or replaced under us, or read-only.

Corruption and deletion are survived by moving what is left aside and starting a fresh store, which
the ingest layer then rebuilds from what still exists (see `mcpdebug.ingest.recovery`); a read-only
store is opened read-only, so it can still be read. Nothing here imports the ingest layer.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Final
from urllib.parse import quote

from mcpdebug.store.output_files import OUTPUT_DIR

ASIDE_PREFIX: Final = "damaged-store-"
_CORRUPTION: Final = ("file is not a database", "malformed", "disk image", "file is encrypted")
_READ_ONLY: Final = ("readonly database", "read-only", "unable to open database file")


def is_corruption(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and any(m in str(exc) for m in _CORRUPTION)


def is_read_only(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(m in str(exc) for m in _READ_ONLY)


def identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is now (device, inode), or None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def read_only_uri(path: Path, *, immutable: bool = False) -> str:
    """SQLite's read-only URI; ``immutable`` also skips locking (a folder where not even the lock
    files can be made: the store is then read as a snapshot)."""
    return f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")


def set_aside(store_file: Path) -> Path:
    """Move the store file (with its -wal and -shm) and the output files next to it into a folder of
    their own, ``damaged-store-<time>/``; returns that folder."""
    folder = store_file.parent / f"{ASIDE_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while folder.exists():
        n += 1
        folder = folder.with_name(f"{folder.name.split('.')[0]}.{n}")
    folder.mkdir()
    for suffix in ("", "-wal", "-shm", "-journal"):
        source = store_file.with_name(store_file.name + suffix)
        if source.exists():
            os.replace(source, folder / source.name)
    outputs = store_file.parent / OUTPUT_DIR
    if outputs.is_dir():
        os.replace(outputs, folder / OUTPUT_DIR)
    return folder
