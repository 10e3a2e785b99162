"""What a path given to `mcpdebug merge` holds: stores and spool files, wherever they are inside it.

An unpacked CI artifact is a shard's `.mcpdebug/` folder, or the folder its job uploaded it from, or a
folder of several such (``actions/download-artifact`` puts each artifact in a folder of its name). A
store is found by what makes it one (`folder.is_store`); its spool files are its own. Anything else
found holding spool files (``*.jsonl``, ``*.wal``) is a spool folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytest_mcpdebug.folder import DIRNAME, SPOOL_DIR, SPOOL_SUFFIX, STORE_FILE, WAL_SUFFIX, is_store

MAX_DEPTH: Final = 6
"""How deep a path is searched for stores: an artifact nests one in a few folders, not more."""


class SourceError(ValueError):
    """A path that holds nothing to merge; the message says what was looked for."""


@dataclass
class Source:
    path: Path
    """The store folder, or the folder holding the spool files."""
    database: Path | None = None
    """The store's database, if it has one (a store of spool files only has none)."""
    spools: list[Path] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "store" if self.database is not None else "spool folder"


def find(paths: list[Path], destination: Path) -> list[Source]:
    """Every source in ``paths``, in the order given; the destination store itself is left out."""
    found: list[Source] = []
    for path in paths:
        sources = list(_walk(path.expanduser().resolve(), destination.resolve()))
        if not sources:
            raise SourceError(
                f"{path} holds no recorded runs: no store ({DIRNAME}/ with {STORE_FILE}) and no spool "
                f"files (*{SPOOL_SUFFIX}); give a shard's {DIRNAME} folder, the folder it was uploaded "
                "from, or the folder its artifacts were downloaded into"
            )
        found += [s for s in sources if all(s.path != f.path for f in found)]
    return found


def _walk(path: Path, destination: Path, depth: int = 0) -> list[Source]:
    if not path.exists():
        raise SourceError(f"{path} does not exist")
    if path.is_file():
        if path.name.endswith((SPOOL_SUFFIX, WAL_SUFFIX)):
            return [Source(path.parent, spools=[path])]
        raise SourceError(f"{path} is a file, not a store or a spool file (*{SPOOL_SUFFIX})")
    if path == destination:
        return []
    if is_store(path):
        return [_store(path)]
    if depth >= MAX_DEPTH:
        return []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    found: list[Source] = []
    loose = [Path(e.path) for e in entries if e.is_file() and e.name.endswith((SPOOL_SUFFIX, WAL_SUFFIX))]
    if loose:
        found.append(Source(path, spools=loose))
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".git"):
            found += _walk(Path(entry.path), destination, depth + 1)
    return found


def _store(path: Path) -> Source:
    database = path / STORE_FILE
    spool = path / SPOOL_DIR
    try:
        spools = sorted(p for p in spool.iterdir() if p.name.endswith((SPOOL_SUFFIX, WAL_SUFFIX)))
    except OSError:
        spools = []
    return Source(path, database if database.is_file() else None, spools)
