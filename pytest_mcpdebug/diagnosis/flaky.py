"""A failure read against its test's history: new, known flaky, or failing since an earlier run.

A *code version* is a commit plus a digest of the uncommitted changes to tracked files. A test that
both passed and failed on one code version is flaky; a failure right after passes on other code is
new, and the last passing commit is where to look. Runs without a known version (no git) are never
called flaky: a pass and a failure on unknown code may be two different programs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

PASSES = ("passed",)
FAILS = ("failed", "error", "rerun")


@dataclass(frozen=True)
class Entry:
    run_id: str
    finished: float
    outcome: str
    commit: str = ""
    changes: str = ""
    attempt: int = 1
    message: str = ""
    nodeid: str = ""

    @classmethod
    def of(cls, row: dict[str, Any]) -> Entry:
        return cls(
            run_id=row["run_id"],
            finished=float(row["finished"]),
            outcome=row["outcome"],
            commit=row.get("commit_id") or "",
            changes=row.get("changes") or "",
            attempt=int(row.get("attempt") or 1),
            message=row.get("message") or "",
            nodeid=row.get("nodeid") or "",
        )

    @property
    def version(self) -> str | None:
        if not self.commit:
            return None
        return f"{self.commit}+{self.changes}" if self.changes else self.commit

    @property
    def passed(self) -> bool:
        return self.outcome in PASSES

    @property
    def failed(self) -> bool:
        return self.outcome in FAILS


def describe_version(commit: str, changes: str) -> str:
    if not commit:
        return "unknown code"
    return f"commit {commit[:10]}" + (" with uncommitted changes" if changes else "")


@dataclass(frozen=True)
class Verdict:
    kind: Literal["new", "flaky", "failing", "first"]
    text: str
    passes_before: int = 0
    """Consecutive passes right before this failure (new)."""
    last_pass: Entry | None = None
    since: Entry | None = None
    """The first failure of the current streak (failing)."""


def classify(current: Entry, earlier: Sequence[Entry]) -> Verdict:
    """``current`` failed; ``earlier`` are the test's entries before it, newest first."""
    known = [e for e in earlier if e.passed or e.failed]
    version = current.version
    same = [e for e in known if version is not None and e.version == version and e.passed]
    if same:
        return Verdict(
            "flaky",
            f"known flaky: it passed on this same code ({describe_version(current.commit, current.changes)}) "
            f"in run {same[0].run_id}",
            last_pass=same[0],
        )
    if not known:
        return Verdict("first", "no earlier record of this test")
    flaky_before = _flaky_versions(known)
    note = f" (it was flaky on {flaky_before[0]})" if flaky_before else ""
    if known[0].passed:
        passes = 0
        for e in known:
            if not e.passed:
                break
            passes += 1
        last = known[0]
        where = describe_version(last.commit, last.changes)
        unknown = " (code versions unknown: no git)" if not last.commit or version is None else ""
        return Verdict(
            "new",
            f"new: first failure after {passes} pass{'es' if passes != 1 else ''}; passed at {where} "
            f"(run {last.run_id}){unknown}{note}",
            passes_before=passes,
            last_pass=last,
        )
    streak = [known[0]]
    for e in known[1:]:
        if e.passed:
            break
        streak.append(e)
    first = streak[-1]
    last_pass = next((e for e in known if e.passed), None)
    text = f"failing since run {first.run_id} ({len(streak) + 1} runs in a row)"
    if last_pass is not None:
        where = describe_version(last_pass.commit, last_pass.changes)
        text += f"; last passed at {where} (run {last_pass.run_id})"
    return Verdict("failing", text + note, since=first, last_pass=last_pass)


def _flaky_versions(entries: Iterable[Entry]) -> list[str]:
    seen: dict[str, set[bool]] = {}
    names: dict[str, str] = {}
    for e in entries:
        if e.version is None or not (e.passed or e.failed):
            continue
        seen.setdefault(e.version, set()).add(e.passed)
        names[e.version] = describe_version(e.commit, e.changes)
    return [names[v] for v, kinds in seen.items() if len(kinds) == 2]


@dataclass
class FlakyTest:
    nodeid: str
    passes: int = 0
    failures: int = 0
    runs: set[str] = field(default_factory=set)
    versions: list[str] = field(default_factory=list)
    """The code versions on which it both passed and failed."""
    last_failure: Entry | None = None
    versioned: bool = True
    """False when it passed and failed only on unknown code (no git): maybe flaky, maybe changed."""


def flaky_tests(entries: Iterable[Entry]) -> list[FlakyTest]:
    """Tests that both passed and failed on one code version, most failures first; then tests that
    did so on unknown code versions (``versioned`` False)."""
    by_test: dict[str, list[Entry]] = {}
    for e in entries:
        if e.passed or e.failed:
            by_test.setdefault(e.nodeid, []).append(e)
    found: list[FlakyTest] = []
    for nodeid, tests in by_test.items():
        versions = _flaky_versions(tests)
        unversioned = [e for e in tests if e.version is None]
        maybe = any(e.passed for e in unversioned) and any(e.failed for e in unversioned)
        if not versions and not maybe:
            continue
        failures = [e for e in tests if e.failed]
        found.append(
            FlakyTest(
                nodeid,
                passes=sum(e.passed for e in tests),
                failures=len(failures),
                runs={e.run_id for e in tests},
                versions=versions,
                last_failure=max(failures, key=lambda e: e.finished),
                versioned=bool(versions),
            )
        )
    found.sort(
        key=lambda f: (not f.versioned, -f.failures, -(f.last_failure.finished if f.last_failure else 0))
    )
    return found
