"""Per-test line coverage with ``sys.monitoring`` (Python 3.12+): the lines coverage.py's C tracer
records, at a fraction of its cost.

coverage.py 7.17's own ``sys.monitoring`` core does not support dynamic contexts (``switch_context``
warns "Dynamic contexts aren't supported with core=sysmon" and the data loses them), so a context
per test needs its C tracer, which sees every line event of every measured frame. Here each code
object of a measured file gets ``LINE`` events of its own (``set_local_events``) when it first starts,
and each line location reports once and is disabled (``DISABLE``) until the next context: a test
pays one callback per distinct line it runs, then nothing. At a switch only the code objects that
reported are re-armed (local events off and on again, which undoes their ``DISABLE``); code outside
the measured files is disabled at its first start and never costs again.

The data is coverage.py's (a ``CoverageData`` file with a context per test), so `coverage.data` reads
both alike. It is written at most once a second (and at the end), all waiting tests in one
transaction: coverage.py writes at every switch, and on a busy disk each write waited ~10 ms, more
than a quick test takes. A process killed mid-run loses at most its last second of coverage.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import CodeType
from typing import Any, Final

WRITE_INTERVAL: Final = 1.0
"""Seconds between writes of the data file."""
TOOL_IDS: Final = (1, 2, 5)
"""coverage's own id first (this is a coverage tool), then ids no debugger or tracer here claims
(`tracing.backends` uses 3 and 4)."""


class MonitorUnavailable(Exception):
    """No free ``sys.monitoring`` tool id (or no ``sys.monitoring``): the caller uses coverage.py."""


class LineMonitor:
    def __init__(self, data_file: Path, *, source: str, omit: Iterable[str]) -> None:
        self.data_file = data_file
        self._source = os.path.join(os.path.realpath(source), "")
        self._omit = tuple(omit)
        self._omitted: Any = None
        """coverage.py's own matcher of the ``omit`` patterns (its globs: ``*`` stops at a slash)."""
        self._measured: dict[str, str | None] = {}
        """co_filename -> its absolute path when measured, else None."""
        self._armed: set[CodeType] = set()
        self._hits: list[tuple[CodeType, int]] = []
        self._context = ""
        self._data: Any = None
        self._pending: list[tuple[str, dict[str, set[int]]]] = []
        self._db: sqlite3.Connection | None = None
        """Our own connection to the data file, once coverage.py has created it."""
        self._file_ids: dict[str, int] = {}
        self._written = time.monotonic()
        self.tool: int | None = None
        self._started = False

    # Start and stop ---------------------------------------------------------------------------------

    def start(self) -> None:
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            raise MonitorUnavailable("sys.monitoring needs Python 3.12")
        for tool in TOOL_IDS:
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "mcpdebug-coverage")
                self.tool = tool
                break
        else:
            raise MonitorUnavailable(f"sys.monitoring tool ids {TOOL_IDS} are all in use")
        from coverage import CoverageData
        from coverage.files import GlobMatcher

        self._omitted = GlobMatcher(self._omit, "omit")
        self._data = CoverageData(basename=str(self.data_file))
        events = mon.events
        mon.register_callback(self.tool, events.PY_START, self._start)
        mon.register_callback(self.tool, events.LINE, self._line)
        mon.set_events(self.tool, events.PY_START)
        self._started = True

    def stop(self) -> None:
        if self.tool is None:
            return
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        mon.set_events(self.tool, 0)
        for code in self._armed:
            mon.set_local_events(self.tool, code, 0)
        mon.register_callback(self.tool, mon.events.PY_START, None)
        mon.register_callback(self.tool, mon.events.LINE, None)
        mon.free_tool_id(self.tool)
        self.tool = None
        self._started = False

    def save(self) -> None:
        self._flush()
        self._write()
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._data is not None:
            self._data.write()

    # Contexts ---------------------------------------------------------------------------------------

    def switch_context(self, context: str) -> str:
        """Lines from now on belong to ``context``; returns the context it replaces."""
        previous = self._context
        fired = self._flush()
        tool = self.tool
        if tool is not None:
            mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
            line = mon.events.LINE
            for code in fired:  # undo their DISABLEs: each line reports once more
                mon.set_local_events(tool, code, 0)
                mon.set_local_events(tool, code, line)
        self._context = context
        return previous

    def _flush(self) -> set[CodeType]:
        """The current context's lines, kept for the next write; returns the code objects that reported."""
        hits, self._hits = self._hits, []
        if not hits:
            return set()
        by_file: dict[str, set[int]] = {}
        fired = set()
        for code, line in hits:
            fired.add(code)
            path = self._measured.get(code.co_filename)
            if path is not None:
                by_file.setdefault(path, set()).add(line)
        if by_file:
            self._pending.append((self._context, by_file))
        if time.monotonic() - self._written >= WRITE_INTERVAL:
            self._write()
        return fired

    def _write(self) -> None:
        pending, self._pending = self._pending, []
        self._written = time.monotonic()
        data = self._data
        if not pending or data is None:
            return
        if self._db is None:  # coverage.py creates the file, its schema and says it holds lines
            context, by_file = pending.pop(0)
            data.set_context(context)
            data.add_lines(by_file)
        if pending:
            try:
                self._insert(pending)
            except sqlite3.Error:  # a schema of another coverage.py: its API, slower
                for context, by_file in pending:
                    data.set_context(context)
                    data.add_lines(by_file)

    def _insert(self, pending: list[tuple[str, dict[str, set[int]]]]) -> None:
        """Many contexts in one transaction, in coverage.py's tables (``context``, ``file``,
        ``line_bits`` of numbits): a quarter of what its API costs a context."""
        from coverage.numbits import numbits_union, nums_to_numbits

        if self._db is None:
            self._db = sqlite3.connect(str(self.data_file), isolation_level=None)
        db = self._db
        db.execute("BEGIN")
        try:
            for context, by_file in pending:
                db.execute("INSERT OR IGNORE INTO context (context) VALUES (?)", (context,))
                (context_id,) = db.execute("SELECT id FROM context WHERE context=?", (context,)).fetchone()
                for path, lines in by_file.items():
                    file_id = self._file_ids.get(path)
                    if file_id is None:
                        db.execute("INSERT OR IGNORE INTO file (path) VALUES (?)", (path,))
                        (file_id,) = db.execute("SELECT id FROM file WHERE path=?", (path,)).fetchone()
                        self._file_ids[path] = file_id
                    bits = nums_to_numbits(lines)
                    old = db.execute(
                        "SELECT numbits FROM line_bits WHERE file_id=? AND context_id=?",
                        (file_id, context_id),
                    ).fetchone()
                    if old is not None:  # the context came back (a test after its failure's report)
                        bits = numbits_union(old[0], bits)
                    db.execute(
                        "INSERT OR REPLACE INTO line_bits (file_id, context_id, numbits) VALUES (?, ?, ?)",
                        (file_id, context_id, bits),
                    )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # Callbacks --------------------------------------------------------------------------------------

    def _start(self, code: CodeType, offset: int) -> Any:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        name = code.co_filename
        path = self._measured.get(name, "")
        if path == "":
            path = self._measured[name] = self._decide(name)
        if path is not None and code not in self._armed:
            self._armed.add(code)
            mon.set_local_events(self.tool, code, mon.events.LINE)
        return mon.DISABLE

    def _line(self, code: CodeType, line: int) -> Any:
        self._hits.append((code, line))
        return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]

    def _decide(self, filename: str) -> str | None:
        """coverage.py's ``source`` and ``omit`` for one file: its absolute path, or None."""
        if not filename.endswith(".py") or filename.startswith("<"):
            return None
        path = os.path.realpath(filename)
        if not path.startswith(self._source):
            return None
        if self._omitted is not None and self._omitted.match(path):
            return None
        return path
