"""Which store a `mcpdebug` command reads: --dir, $MCPDEBUG_DIR, or the nearest `.mcpdebug/` upwards."""

from __future__ import annotations

import os
from pathlib import Path

from mcpdebug.names import StoreError
from pytest_mcpdebug.folder import DIRNAME, find_store, store_in


def find_dir(given: str | None, *, create: bool) -> Path:
    """The store to use: from --dir (else $MCPDEBUG_DIR, else the current folder), which may be a
    project folder or a `.mcpdebug` folder; a project's store is its nearest `.mcpdebug/` upwards.

    ``create`` (serve): with no store found, a new one is made as `.mcpdebug/` in the folder given
    (or the current one), never in a folder that is not named so.
    """
    raw = given or os.environ.get("MCPDEBUG_DIR")
    start = Path(raw).expanduser().resolve() if raw else Path.cwd().resolve()
    if raw and not start.exists() and start.name != DIRNAME:
        raise StoreError(f"{start} does not exist; give a project folder or its {DIRNAME} folder")
    found = find_store(start)
    if found is not None:
        return found
    if create:
        return store_in(start)
    from pytest_mcpdebug.commands import program

    looked = start if start.name == DIRNAME else f"{start / DIRNAME} or the {DIRNAME}/ of a parent folder"
    raise StoreError(
        f"no recorded runs: looked for {looked}. Record a run with `{program('pytest')} --mcp-debug` "
        f"in the project first (or set it up once with `{program('mcpdebug')} init`), or pass --dir "
        "PROJECT (or its .mcpdebug folder)"
    )
