"""A run's per-test line coverage, read from the coverage.py data files its test processes wrote.

The store knows which files a run announced (`coverage_files`); a folder copied from CI without
them is still read, by the file names the plugin uses (``coverage/<run id>.coverage`` and the
per-worker parts of a run whose controller never combined them). Results are cached per file
version: ranking the same run again costs nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug.coverage.rendering import RENDER_SUFFIX, is_rendering
from pytest_mcpdebug.folder import coverage_file, coverage_parts

# Limits
CACHED_RUNS: Final = 4

_PHASE_SUFFIXES: Final = ("|setup", "|run", "|teardown")
"""pytest-cov's ``--cov-context=test`` names contexts ``<node id>|<phase>``: one test, three contexts."""


@dataclass
class RunCoverage:
    lines: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)
    """(absolute file, line) -> node ids of the tests that ran it."""
    tests: set[str] = field(default_factory=set)
    rendered: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)
    """Lines run only while a failure was shown (``<node id>|render``, `coverage.rendering`): kept
    apart, never counted as the test's."""
    files: list[Path] = field(default_factory=list)
    """The data files read."""
    missing: list[str] = field(default_factory=list)
    """Files the run announced that are gone (moved, or another machine's)."""


def find_files(directory: Path, run_id: str, announced: list[dict[str, Any]]) -> tuple[list[Path], list[str]]:
    """The data files to read for a run: its combined file if there is one, else its parts."""
    missing: list[str] = []
    local = coverage_file(directory, run_id)
    for row in announced:
        if row["combined"]:
            path = Path(row["path"])
            if path.is_file():
                return [path], []
            if local.is_file():
                return [local], []
            missing.append(row["path"])
    if local.is_file():
        return [local], missing
    found: dict[str, Path] = {}
    for row in announced:
        path = Path(row["path"])
        if not row["combined"]:
            if path.is_file():
                found[path.name] = path
            else:
                missing.append(row["path"])
    parts = coverage_parts(directory, run_id)
    if parts.is_dir():
        for path in parts.glob("*.coverage"):
            found.setdefault(path.name, path)
            missing = [m for m in missing if Path(m).name != path.name]
    return sorted(found.values()), missing


_cache: OrderedDict[tuple[tuple[str, int, int], ...], RunCoverage] = OrderedDict()
_lock = threading.Lock()


def load(paths: list[Path]) -> RunCoverage:
    """Every (file, line) and the tests that ran it, over all ``paths`` (a test's lines are the union
    of its contexts)."""
    key = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    from coverage import CoverageData

    covers: dict[tuple[str, int], set[str]] = {}
    rendered: dict[tuple[str, int], set[str]] = {}
    tests: set[str] = set()
    for path in paths:
        data = CoverageData(basename=str(path))
        data.read()
        for name in data.measured_files():
            for line, contexts in data.contexts_by_lineno(name).items():
                ran = {_test_of(c) for c in contexts if c and not is_rendering(c)}
                if ran:
                    covers.setdefault((name, line), set()).update(ran)
                    tests |= ran
                shown = {c[: -len(RENDER_SUFFIX)] for c in contexts if is_rendering(c)}
                if shown:
                    rendered.setdefault((name, line), set()).update(shown)
    result = RunCoverage(
        lines={k: frozenset(v) for k, v in covers.items()},
        tests=tests,
        rendered={k: frozenset(v) for k, v in rendered.items()},
        files=list(paths),
    )
    with _lock:
        _cache[key] = result
        while len(_cache) > CACHED_RUNS:
            _cache.popitem(last=False)
    return result


def _test_of(context: str) -> str:
    for suffix in _PHASE_SUFFIXES:
        if context.endswith(suffix):
            return context[: -len(suffix)]
    return context
