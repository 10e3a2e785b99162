"""Another store's runs copied into the merged store, table by table, in one transaction a run.

A store keeps no events, only what they made: its rows are copied as they are (SQLite copies them
between the two databases itself), its output files beside them under new unit ids, its coverage data
files with their paths made the merged store's. A run whose every event the merged store has already
is skipped: a store merged twice is merged once. The source is only read (an artifact may be
read-only: it is opened as such, as a snapshot if even its lock files cannot be made).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Final

from mcpdebug.merging.conflicts import Conflict, RunMerge, compare, shard_conflict, stored_ends
from mcpdebug.merging.sources import Source, SourceError
from mcpdebug.store import Store, shards
from mcpdebug.store.output_files import UNITS_FILE, safe_name
from mcpdebug.store.recovery import read_only_uri

TEST_TABLES: Final = ("tests", "phases", "failures", "hangs", "attempts", "traces", "history")
"""Tables of a test's records: a conflicting test's rows are left out of each."""
RUN_TABLES: Final = (
    "processes",
    "collection_errors",
    "holds",
    "versions",
    "process_sessions",
    "process_states",
)
"""Tables the source's rows are added to, a row already there kept."""


def merge_store(store: Store, source: Source, conflicts: list[Conflict]) -> dict[str, RunMerge]:
    assert source.database is not None
    db = _open(store, source.database)
    try:
        version = db.execute("SELECT value FROM src.meta WHERE key='schema'").fetchone()
        if version is None or int(version[0]) < 2:
            raise SourceError(
                f"{source.database} was written by an old pytest-mcpdebug (schema "
                f"{version[0] if version else '?'}): open it once with `mcpdebug runs --dir "
                f"{source.path}` to upgrade it, then merge it"
            )
        run_ids = [r[0] for r in db.execute("SELECT run_id FROM src.runs ORDER BY started")]
        return {rid: _merge_run(db, store, rid, source, conflicts) for rid in run_ids}
    finally:
        db.close()


def _open(store: Store, source: Path) -> sqlite3.Connection:
    """The merged store's database with the source's attached (as ``src``), read-only."""
    db = sqlite3.connect(f"file:{store.path}", uri=True, timeout=30.0, isolation_level=None)
    db.row_factory = sqlite3.Row
    for immutable in (False, True):
        try:
            db.execute("ATTACH DATABASE ? AS src", (read_only_uri(source, immutable=immutable),))
            db.execute("SELECT count(*) FROM src.runs").fetchone()
            return db
        except sqlite3.OperationalError as exc:
            error = exc
            if _attached(db):
                db.execute("DETACH DATABASE src")
    db.close()
    raise SourceError(f"cannot read the store {source}: {error}")


def _attached(db: sqlite3.Connection) -> bool:
    return any(row[1] == "src" for row in db.execute("PRAGMA database_list"))


def _merge_run(
    db: sqlite3.Connection, store: Store, run_id: str, source: Source, conflicts: list[Conflict]
) -> RunMerge:
    known = db.execute("SELECT 1 FROM main.runs WHERE run_id=?", (run_id,)).fetchone() is not None
    new_events = db.execute(
        "SELECT count(*) FROM src.events s WHERE s.run_id=? AND NOT EXISTS (SELECT 1 FROM main.events m "
        "WHERE m.run_id=s.run_id AND m.process=s.process AND m.seq=s.seq)",
        (run_id,),
    ).fetchone()[0]
    incoming = stored_ends(db, run_id, "src")
    if known and not new_events:
        return RunMerge(known_tests=len(incoming))  # every record of it is here already
    name, source_spools = str(source.path), source.spools
    merge = compare(run_id, stored_ends(db, run_id, "main", among=incoming), incoming, name, conflicts)
    for label, process in _source_shards(db, run_id):
        if shard_conflict(db, run_id, label, process, name, conflicts):
            merge.processes_left_out.add(process)
    copied: list[Path] = []
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TEMP TABLE IF NOT EXISTS left_out (nodeid TEXT PRIMARY KEY)")
        db.execute("DELETE FROM temp.left_out")
        db.executemany("INSERT INTO temp.left_out VALUES (?)", [(n,) for n in merge.left_out])
        _copy_rows(db, run_id, known, run_records=not merge.processes_left_out)
        link = _finished(db, run_id) and not any(p.name.startswith(f"{run_id}.") for p in source_spools)
        copied += _copy_outputs(db, store, run_id, run_units=not merge.processes_left_out, link=link)
        copied += _copy_coverage(db, store, run_id)
        shards.aggregate(db, run_id)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        for path in copied:
            path.unlink(missing_ok=True)
        raise
    return merge


def _source_shards(db: sqlite3.Connection, run_id: str) -> list[tuple[str, str]]:
    """(label, controlling process) of each shard of the source's run (a store from before shards:
    its one controlling process, unlabelled)."""
    rows = db.execute("SELECT label, process FROM src.shards WHERE run_id=?", (run_id,)).fetchall()
    if rows or not _has_table(db, "src", "shards"):
        return [(r[0], r[1]) for r in rows if r[1]]
    row = db.execute(
        "SELECT process FROM src.processes WHERE run_id=? AND worker IN ('main', 'controller') LIMIT 1",
        (run_id,),
    ).fetchone()
    return [("", row[0])] if row else []


def _copy_rows(db: sqlite3.Connection, run_id: str, known: bool, *, run_records: bool) -> None:
    _insert(db, "events", "run_id=?", (run_id,))
    if not known:
        _insert(db, "runs", "run_id=?", (run_id,))
    else:
        db.execute(
            "UPDATE main.runs SET started=min(started, s_started), last_event=max(last_event, s_last), "
            "bytes=bytes+s_bytes, stored=? FROM (SELECT started AS s_started, last_event AS s_last, bytes AS "
            "s_bytes FROM src.runs WHERE run_id=?) WHERE main.runs.run_id=?",
            (time.time(), run_id, run_id),
        )
    if run_records and _has_table(db, "src", "shards"):
        _insert(db, "shards", "run_id=?", (run_id,))
    elif run_records:  # a store from before shards: its run was one
        db.execute(
            "INSERT OR IGNORE INTO main.shards (run_id, label, process, host, pid, args, started, finished, "
            "duration, exit_status, collected, counts, workers, status) SELECT run_id, '', coalesce((SELECT "
            "process FROM src.processes p WHERE p.run_id=r.run_id AND p.worker IN ('main', 'controller') "
            "LIMIT 1), ''), host, pid, args, started, finished, duration, exit_status, collected, "
            "pytest_counts, workers, status FROM src.runs r WHERE run_id=?",
            (run_id,),
        )
    for table in TEST_TABLES:
        if _has_table(db, "src", table):
            _insert(db, table, "run_id=? AND nodeid NOT IN (SELECT nodeid FROM temp.left_out)", (run_id,))
    for table in RUN_TABLES:
        if _has_table(db, "src", table):
            _insert(db, table, "run_id=?", (run_id,))


def _finished(db: sqlite3.Connection, run_id: str) -> bool:
    row = db.execute("SELECT status FROM src.runs WHERE run_id=?", (run_id,)).fetchone()
    return row is not None and row[0] != "running"


def _copy_outputs(
    db: sqlite3.Connection, store: Store, run_id: str, *, run_units: bool, link: bool
) -> list[Path]:
    """The source's output units the merged store lacks, under ids of its own, with their files
    (hard links when ``link``: a finished run's files are never written again, in either store)."""
    units = db.execute(
        "SELECT s.id, s.unit, s.worker FROM src.outputs s WHERE s.run_id=? AND s.unit NOT IN "
        "(SELECT unit FROM main.outputs WHERE run_id=?) AND s.unit NOT IN (SELECT nodeid FROM temp.left_out) "
        "ORDER BY s.id",
        (run_id, run_id),
    ).fetchall()
    if not run_units:
        units = [u for u in units if u["unit"] and not u["unit"].startswith("@")]
    if not units:
        return []
    base = db.execute("SELECT coalesce(max(id), 0) FROM main.outputs WHERE run_id=?", (run_id,)).fetchone()[0]
    mapping = [(u["id"], base + n) for n, u in enumerate(units, 1)]
    db.execute("CREATE TEMP TABLE IF NOT EXISTS unit_map (src INTEGER PRIMARY KEY, dst INTEGER)")
    db.execute("DELETE FROM temp.unit_map")
    db.executemany("INSERT INTO temp.unit_map VALUES (?, ?)", mapping)
    out_cols = [c for c in _columns(db, "main", "outputs") if c in _columns(db, "src", "outputs")]
    seg_cols = [c for c in _columns(db, "main", "segments") if c in _columns(db, "src", "segments")]
    pick = ", ".join("m.dst" if c == "id" else f"s.{c}" for c in out_cols)
    db.execute(
        f"INSERT INTO main.outputs ({', '.join(out_cols)}) SELECT {pick} FROM src.outputs s "
        "JOIN temp.unit_map m ON m.src = s.id WHERE s.run_id=?",
        (run_id,),
    )
    pick = ", ".join("m.dst" if c == "unit_id" else f"s.{c}" for c in seg_cols)
    db.execute(
        f"INSERT OR IGNORE INTO main.segments ({', '.join(seg_cols)}) SELECT {pick} FROM src.segments s "
        "JOIN temp.unit_map m ON m.src = s.unit_id WHERE s.run_id=?",
        (run_id,),
    )
    return _copy_unit_files(db, store, run_id, units, dict(mapping), link)


def _copy_unit_files(
    db: sqlite3.Connection,
    store: Store,
    run_id: str,
    units: list[sqlite3.Row],
    ids: dict[int, int],
    link: bool,
) -> list[Path]:
    source_root = Path(_database_of(db, "src")).parent / "output" / safe_name(run_id)
    target_root = store.outputs.root / safe_name(run_id)
    target_root.mkdir(parents=True, exist_ok=True)
    blocks: dict[int, list[int]] = {}
    for unit_id, block in db.execute(
        "SELECT DISTINCT unit_id, block FROM src.segments WHERE run_id=? AND block > 0", (run_id,)
    ):
        blocks.setdefault(unit_id, []).append(block)
    copied: list[Path] = []
    index = []
    for unit in units:
        new = ids[unit["id"]]
        src_id = unit["id"]
        for block in [0, *blocks.get(src_id, [])]:
            name = f"{src_id}.log" if block == 0 else f"{src_id}.tail{block}.log"
            target = store.outputs.path(run_id, new, block)
            try:
                _place(source_root / name, target, link)
            except FileNotFoundError:
                continue  # evicted or never written there: its segments read as empty
            copied.append(target)
        index.append(json.dumps([new, unit["worker"], unit["unit"]]) + "\n")
    with open(target_root / UNITS_FILE, "a", encoding="utf-8") as out:
        out.writelines(index)
    return copied


def _place(source: Path, target: Path, link: bool) -> None:
    """``source`` at ``target``: linked (another file system, or no right to: copied), or copied."""
    if link:
        try:
            target.unlink(missing_ok=True)
            os.link(source, target)
            return
        except FileNotFoundError:
            raise
        except OSError:
            pass
    shutil.copyfile(source, target)


def _copy_coverage(db: sqlite3.Connection, store: Store, run_id: str) -> list[Path]:
    """A shard's coverage data file, beside the merged store's, under a name of its own."""
    if not _has_table(db, "src", "coverage_files"):
        return []
    copied = []
    rows = db.execute("SELECT * FROM src.coverage_files WHERE run_id=?", (run_id,)).fetchall()
    for row in rows:
        source = Path(row["path"])
        if not source.is_file():  # a CI machine's path: the file sits in the artifact's coverage/
            source = Path(_database_of(db, "src")).parent / "coverage" / source.name
        target = store.dir / "coverage" / f"{safe_name(run_id)}.{safe_name(row['process'])}.coverage"
        if not source.is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
        values = {**dict(row), "path": str(target)}
        db.execute(
            f"INSERT OR IGNORE INTO main.coverage_files ({', '.join(values)}) VALUES "
            f"({', '.join('?' * len(values))})",
            list(values.values()),
        )
    return copied


def _insert(db: sqlite3.Connection, table: str, where: str, params: tuple[object, ...]) -> None:
    columns = [c for c in _columns(db, "main", table) if c in _columns(db, "src", table)]
    names = ", ".join(columns)
    db.execute(
        f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM src.{table} WHERE {where}", params
    )


def _columns(db: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA {schema}.table_info({table})")]


def _has_table(db: sqlite3.Connection, schema: str, table: str) -> bool:
    return bool(_columns(db, schema, table))


def _database_of(db: sqlite3.Connection, schema: str) -> str:
    return str(next(row[2] for row in db.execute("PRAGMA database_list") if row[1] == schema))
