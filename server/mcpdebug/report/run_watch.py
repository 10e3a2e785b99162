"""The project's recorded runs as `mcpdebug tui` shows them, read from the store as `mcpdebug show` does.

No textual here, so it is tested on its own. Each `RunWatch.look()` takes in what was written since
the last one (spool files of runs with no server, hang dumps: `lookup.refresh`, as every reading
command does), lists the runs, and reads the chosen run's tests again only when the run changed.
Failures and hangs that appeared since the previous look are returned as news. The texts a person
opens (a run's summary, a test's failure or detail) are the views' own, in the terminal's style: the
same words `mcpdebug show` and `mcpdebug failure` print.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from mcpdebug.names import StoreError
from mcpdebug.store import PROBLEM_OUTCOMES, Store
from mcpdebug.views import calls, lookup
from mcpdebug.views import hang as hang_view
from mcpdebug.views import output as output_view
from mcpdebug.views import runs as runs_view
from mcpdebug.views.time_text import seconds

RUNS: Final = 30
"""Runs listed, newest first."""
OUTPUT_TAIL: Final = 50
"""Lines of a test's output its detail shows (`mcpdebug show RUN TEST`'s default)."""
LABELS: Final = {**runs_view.LABELS, "hung": "HUNG", "held": "HELD"}
PROBLEMS: Final = (*PROBLEM_OUTCOMES, "hung", "held")
READ_ERRORS: Final = (StoreError, sqlite3.Error, OSError, lookup.NotFound)
"""What reading a store can meet (being rebuilt, locked, deleted, not a store): said, not raised."""

T = TypeVar("T")


@dataclass(frozen=True)
class TestRow:
    nodeid: str
    outcome: str
    """The store's status, or ``hung`` (a hang was reported) or ``held`` (held for an agent now)."""
    duration: float | None
    worker: str
    message: str

    @property
    def label(self) -> str:
        return LABELS.get(self.outcome, self.outcome)

    @property
    def problem(self) -> bool:
        return self.outcome in PROBLEMS

    @property
    def time(self) -> str:
        return seconds(self.duration) if self.duration is not None else ""


@dataclass
class RunLook:
    run: dict[str, Any]
    tests: list[TestRow]
    collection_errors: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return str(self.run["run_id"])

    @property
    def head(self) -> str:
        """Two lines about the run: what it is and where it stands."""
        run = self.run
        tests = f"{run['collected']} collected; " if run.get("collected") is not None else ""
        errors = len(self.collection_errors)
        more = f"; {errors} collection error{'s' if errors != 1 else ''}" if errors else ""
        took = seconds(runs_view.run_duration(run))
        command = run["label"] or "(command not yet known)"
        return (
            f"Run {run['run_id']} ({run['kind']}): {runs_view.status_text(run)}, {took}\n"
            f"{tests}{runs_view.counts_text(run['counts'])}{more} · {command}"
        )


@dataclass
class Look:
    runs: list[dict[str, Any]] = field(default_factory=list)
    chosen: RunLook | None = None
    news: list[tuple[str, str]] = field(default_factory=list)
    """(severity, text) of what happened since the last look: failures, hangs, a new run."""
    note: str = ""
    """Why there is nothing to show (no store yet, a store that cannot be read)."""


class RunWatch:
    def __init__(self, directory: Path | None) -> None:
        from pytest_mcpdebug.commands import program
        from pytest_mcpdebug.folder import dir_args

        self.directory = directory
        self.hints = (program("mcpdebug"), dir_args(directory, Path.cwd()) if directory else [])
        """How the texts' hints name commands: as the CLI started here would (`mcpdebug` or its path,
        and ``--dir`` when the store is not found from here)."""
        self.store: Store | None = None
        self._seen_runs: set[str] | None = None
        self._signature: tuple[Any, ...] | None = None
        self._last: RunLook | None = None
        self._outcomes: dict[str, dict[str, str]] = {}
        """Per run looked at: each test's outcome at the last look (to tell what is new)."""

    def open(self) -> Store | None:
        """The store, once there is one (a store file or spool files): a project's first run may
        start after the TUI."""
        if self.store is None and self.directory is not None:
            self.store = Store(self.directory, create=False)
        return self.store

    def look(self, run_id: str | None = None) -> Look:
        """The runs, and the tests of ``run_id`` (default: the newest test run)."""
        if self.directory is None:
            return Look(note="No store: give the project with --dir.")
        try:
            store = self.open()
        except StoreError as exc:
            return Look(note=f"{exc}. Runs appear here as they are recorded.")
        assert store is not None
        try:
            lookup.refresh(store)
            runs = store.runs(RUNS)
            found = Look(runs=runs)
            found.news += self._new_runs(runs)
            chosen = store.resolve_run(run_id) if run_id else store.resolve_run(None)
            chosen = chosen or (runs[0]["run_id"] if runs else None)
            if chosen is not None:
                found.chosen = self._run(store, chosen, found.news)
        except READ_ERRORS as exc:
            return Look(note=f"cannot read the store {store.path}: {exc}")
        if not runs:
            found.note = (
                f"No runs recorded in {store.dir} yet. Run `pytest --mcp-debug` in the project: "
                "its tests appear here as they run."
            )
        return found

    def _new_runs(self, runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        ids = {r["run_id"] for r in runs}
        before, self._seen_runs = self._seen_runs, ids
        if before is None:
            return []
        return [
            ("information", f"Run {r['run_id']} started: {r['label'] or r['kind']}")
            for r in reversed(runs)
            if r["run_id"] not in before
        ]

    def _run(self, store: Store, rid: str, news: list[tuple[str, str]]) -> RunLook | None:
        run = store.run(rid)
        if run is None:
            return None
        counts = tuple(sorted(run["counts"].items()))
        signature = (rid, run["status"], run["last_event"], run["stored"], counts)
        if signature == self._signature and self._last is not None:
            self._last.run = run  # a running run's duration moves on
            return self._last
        hung = {h["nodeid"] for h in store.hangs(rid)}
        held = {h["nodeid"] for h in store.holds(rid) if h["resumed"] is None}
        tests = [
            TestRow(
                nodeid=t["nodeid"],
                outcome="held" if t["nodeid"] in held else "hung" if t["nodeid"] in hung else t["status"],
                duration=t["duration"],
                worker=t["worker"] or "",
                message=t["message"] if t["status"] in runs_view.WITH_MESSAGE or t["nodeid"] in hung else "",
            )
            for t in store.tests(rid)
        ]
        news += self._news(rid, tests)
        self._signature = signature
        self._last = RunLook(run, tests, store.collection_errors(rid))
        return self._last

    def _news(self, rid: str, tests: list[TestRow]) -> list[tuple[str, str]]:
        """Tests that failed, erred, hung or were held since this run was last looked at."""
        before = self._outcomes.get(rid)
        self._outcomes[rid] = {t.nodeid: t.outcome for t in tests}
        if before is None:
            return []
        return [
            ("error" if t.outcome in PROBLEM_OUTCOMES else "warning", f"{t.label} {t.nodeid}: {t.message}")
            for t in tests
            if t.problem and before.get(t.nodeid) != t.outcome
        ]

    # The texts a person opens -----------------------------------------------------------------------

    def run_text(self, run_id: str) -> str:
        """The run's summary: what `mcpdebug show RUN` prints first (a process session's summary)."""
        store = self._store()
        return self._in_terminal(lambda: runs_view.summary(store, lookup.run(store, run_id)).text)

    def test_text(self, run_id: str, nodeid: str, *, failure: bool = True) -> str:
        """A failing or hung test's failure, as `mcpdebug failure RUN TEST` prints it (frames, locals,
        source, output); with ``failure=False``, or for a test that did not fail, what `mcpdebug
        show RUN TEST` prints (outcome, phases, pytest's report, the output's tail)."""
        store = self._store()

        def render() -> str:
            run = lookup.run(store, run_id)
            test = lookup.test(store, run, nodeid)
            if failure:
                try:
                    return hang_view.failure_or_hang(store, run, test["nodeid"]).text
                except lookup.NotFound:
                    pass  # it did not fail: its detail says how it went
            phases = store.phases(run["run_id"], test["nodeid"])
            output = output_view.output_tail(store, run, test["nodeid"], OUTPUT_TAIL)
            return runs_view.test_detail(run, test, phases, output).text

        return self._in_terminal(render)

    def _in_terminal(self, render: Callable[[], T]) -> T:
        """``render()`` with the views naming `mcpdebug` commands, as the CLI has them (in a context of
        its own: the TUI's threads start without the CLI's)."""

        def styled() -> T:
            calls.for_terminal(*self.hints)
            return render()

        return contextvars.copy_context().run(styled)

    def _store(self) -> Store:
        store = self.open()
        if store is None:
            raise StoreError("no store: give the project with --dir")
        return store


class Reader:
    """The one thread the TUI reads the store in: SQLite gives each thread a connection of its own
    (`Store.db`), so a thread per look would leave a connection behind at each."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mcpdebug-tui-reader")

    async def __call__(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(read, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
