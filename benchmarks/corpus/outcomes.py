"""What one run of a suite showed: each test's outcome (from pytest's junit xml), the warnings summary,
the lines on stderr, the plugin's own terminal lines; and how a recorded run compares with plain ones."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

Outcomes = dict[str, str]

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_WARNING = re.compile(r"\b(\w*Warning): (.*)")
_HEADER = re.compile(r"^=+ (.*?) =+$")


def junit_outcomes(path: Path) -> Outcomes | None:
    """Test (file::class::name as junit names it) -> outcome; None if pytest wrote no report."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    found: Outcomes = {}
    for case in root.iter("testcase"):
        key = "::".join(x for x in (case.get("file"), case.get("classname"), case.get("name")) if x)
        kinds = []
        for child in case:
            if child.tag in ("failure", "error"):
                kinds.append(child.tag)
            elif child.tag == "skipped":
                kinds.append("xfail" if child.get("type") == "pytest.xfail" else "skipped")
        outcome = "+".join(sorted(kinds)) or "passed"
        # a test id seen twice (a teardown error reported on its own testcase): keep both
        found[key] = f"{found[key]}|{outcome}" if key in found else outcome
    return found


def junit_failures(path: Path, limit: int = 600) -> dict[str, str]:
    """Each failing or erroring test's message and the end of its text (what the report said)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    found: dict[str, str] = {}
    for case in root.iter("testcase"):
        key = "::".join(x for x in (case.get("file"), case.get("classname"), case.get("name")) if x)
        for child in case:
            if child.tag in ("failure", "error"):
                text = f"{child.get('message', '')}\n{(child.text or '')[-limit:]}"
                found[key] = (found.get(key, "") + text)[-2 * limit :]
    return found


def normalise(line: str) -> str:
    """A line without its numbers and addresses (line numbers, ids, timings, pids)."""
    return _NUMBERS.sub("N", line.strip())[:300]


def warnings_summary(stdout: str) -> list[str]:
    """The warnings in pytest's "warnings summary", as `Category: message` without numbers."""
    found: list[str] = []
    inside = False
    for line in stdout.splitlines():
        header = _HEADER.match(line)
        if header:
            inside = header.group(1) == "warnings summary"
            continue
        if inside:
            if line.startswith("-- Docs:"):
                inside = False
                continue
            match = _WARNING.search(line)
            if match:
                found.append(normalise(f"{match.group(1)}: {match.group(2)}"))
    return sorted(set(found))


def plugin_lines(stdout: str) -> list[str]:
    """The plugin's own terminal lines (``mcpdebug: ...``)."""
    return [line.strip() for line in stdout.splitlines() if line.startswith("mcpdebug")]


def summary_line(stdout: str) -> str:
    """pytest's closing line ("N passed, M skipped in 1.2s")."""
    for line in reversed(stdout.splitlines()):
        header = _HEADER.match(line)
        if header and (" in " in header.group(1)):
            return header.group(1)
    return ""


_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")


def counts(text: str) -> dict[str, int]:
    """The outcome counts of a summary line ("3 passed, 1 failed, 2 errors"; subtests and warnings "
    "left out)."""
    found: dict[str, int] = {}
    for number, word in _COUNT.findall(text.replace("subtests passed", "subtests")):
        found[word.rstrip("s") if word.startswith("error") else word] = int(number)
    return found


# The record's outcome of a test -> how pytest's junit xml says it (a non-strict xpass is a pass there).
_AS_JUNIT = {"failed": "failure", "xfailed": "xfail", "xpassed": "passed"}


def junit_key(nodeid: str) -> str:
    """The key `junit_outcomes` gives the test of this node id: pytest's `mangle_test_address` (the
    file's path dotted, without `.py`; its classes; the name with its parameters)."""
    path, sep, tail = nodeid.partition("::")
    dotted = re.sub(r"\.py$", "", path.replace("/", "."))
    if not sep:
        return dotted
    name_part, bracket, params = tail.partition("[")
    names = [dotted, *name_part.split("::")]
    if bracket:
        names[-1] += f"[{params.removesuffix(']')}]"
    return "::".join((".".join(names[:-1]), names[-1]))


def record_differences(tests: list[dict[str, str]], junit: Outcomes | None, limit: int = 5) -> list[str]:
    """How the record's tests (`mcpdebug show --all --json`: nodeid, status) differ from pytest's junit
    report: a test the one has and the other lacks, a test whose outcomes differ."""
    if junit is None:
        return []
    recorded: dict[str, str] = {}
    for test in tests:
        key, status = junit_key(test["nodeid"]), test["status"]
        recorded[key] = f"{recorded[key]}|{status}" if key in recorded else status
    found = []
    for key in sorted(recorded.keys() | junit.keys()):
        if key not in junit:
            found.append(f"{key}: {recorded[key]} in the record, not in pytest's report")
        elif key not in recorded:
            found.append(f"{key}: {junit[key]} in pytest's report, not in the record")
        else:
            said = set(re.split(r"[+|]", junit[key]))
            if not {_AS_JUNIT.get(s, s) for s in recorded[key].split("|")} <= said:
                found.append(f"{key}: {recorded[key]} in the record, {junit[key]} in pytest's report")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def allowed(plain: Iterable[Outcomes]) -> tuple[dict[str, set[str]], set[str]]:
    """Each test's outcomes across plain runs, and the tests every plain run had."""
    seen: dict[str, set[str]] = {}
    runs = list(plain)
    for run in runs:
        for test, outcome in run.items():
            seen.setdefault(test, set()).add(outcome)
    always = set.intersection(*(set(r) for r in runs)) if runs else set()
    return seen, always


def deviations(run: Outcomes | None, seen: dict[str, set[str]], always: set[str]) -> list[str]:
    """How a run differs from every plain run: `test: outcome (plain: ...)`, missing and extra tests."""
    if run is None:
        return ["no junit report (pytest crashed or was killed)"]
    found = []
    for test, outcome in sorted(run.items()):
        if test not in seen:
            found.append(f"{test}: {outcome} (not in any plain run)")
        elif outcome not in seen[test]:
            found.append(f"{test}: {outcome} (plain: {'/'.join(sorted(seen[test]))})")
    for test in sorted(always - set(run)):
        found.append(f"{test}: missing (plain: {'/'.join(sorted(seen[test]))})")
    return found


def varying(plain: Iterable[Outcomes]) -> list[str]:
    """The tests whose outcome is not the same in every plain run (the suite's own flakiness)."""
    runs = list(plain)
    seen, always = allowed(runs)
    return sorted(t for t, outcomes in seen.items() if len(outcomes) > 1 or t not in always)
