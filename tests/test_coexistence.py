"""The plugins most suites carry, with and without `--mcp-debug`: same outcomes, same exit status, and
records that say what pytest said.

Each case runs a suite of `fixtures/coexist/` twice, plainly and with `--mcp-debug`. A small observer
plugin writes the outcome pytest counted for each test (from the terminal reporter's own tallies, as
in pytest's summary line) and the order the tests ran in; the two runs must agree on those, on the
summary counts and on the exit status, and the recorded run must hold the same outcome per test.

The project's other inner runs block these plugins (`helpers.FAST`); here each case loads its own
explicitly and blocks the others, so every case is that plugin alone with the recorder.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import FIXTURES
from helpers import EXTRA_PLUGINS, INNER_DEADLINE, recorded

OBSERVER = """
import json

import pytest

KINDS = ("failed", "error", "xpassed", "xfailed", "skipped", "passed")  # a test's worst outcome wins
order = []


def pytest_runtest_logstart(nodeid):
    if nodeid not in order:
        order.append(nodeid)


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):
        return
    outcomes = {}
    for kind, reports in terminalreporter.stats.items():
        for report in reports:
            if kind in KINDS and isinstance(report, pytest.TestReport):
                known = outcomes.get(report.nodeid)
                if known is None or KINDS.index(kind) < KINDS.index(known):
                    outcomes[report.nodeid] = kind
    with open("observed.json", "w") as f:
        json.dump({"outcomes": outcomes, "order": order}, f)
"""

EXTRAS = (*EXTRA_PLUGINS, "cov")
"""Plugins this matrix loads one at a time (each case blocks the others)."""


@dataclass(frozen=True)
class Case:
    suite: str
    args: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    """Of `EXTRAS`, the ones the case loads."""
    outcomes: tuple[tuple[str, int], ...] = ()
    """pytest's summary counts the plain run must show (so a case cannot pass by running nothing)."""


ASYNCIO = ("-o", "asyncio_default_fixture_loop_scope=function")
CASES = {
    "pytest-asyncio strict": Case(
        "asyncio", (*ASYNCIO, "-p", "asyncio"), ("asyncio",), (("passed", 2), ("failed", 2))
    ),
    "pytest-asyncio auto": Case(
        "asyncio", (*ASYNCIO, "-p", "asyncio", "-o", "asyncio_mode=auto"), ("asyncio",), (("passed", 3),)
    ),
    "anyio": Case("anyio", (), (), (("passed", 1), ("failed", 1))),
    "pytest-cov": Case(
        "cov", ("-p", "pytest_cov", "--cov=calc", "--cov-report=term-missing"), ("cov",), (("failed", 1),)
    ),
    "pytest-rerunfailures": Case(
        "reruns",
        ("-p", "rerunfailures", "--reruns", "1"),
        ("rerunfailures",),
        (("rerun", 4), ("passed", 3), ("failed", 1)),
    ),
    "pytest-randomly": Case(
        "mixed", ("-p", "randomly", "-p", "no:xdist", "--randomly-seed=1234"), ("randomly",), (("failed", 2),)
    ),
    "pytest-timeout": Case("timeout", (), (), (("failed", 1), ("passed", 1))),
    "hypothesis": Case("hypothesis", (), ("hypothesispytest",), (("failed", 1), ("passed", 1))),
    "xdist": Case("mixed", ("-n", "2"), (), (("passed", 4), ("failed", 2), ("errors", 2))),
    "doctest": Case(
        "doctests", ("--doctest-modules", "--doctest-glob=*.txt"), (), (("failed", 2), ("passed", 2))
    ),
    "unittest": Case("unittest", (), (), (("skipped", 1), ("xfailed", 1))),
}


@dataclass
class Run:
    ret: int
    counts: dict[str, int]
    outcomes: dict[str, str]
    order: list[str]
    text: str


def run(pytester: pytest.Pytester, case: Case, *extra: str) -> Run:
    """One inner run of the case's suite; ``.mcpdebug/`` and hypothesis's database start empty."""
    for folder in (".mcpdebug", ".hypothesis"):
        shutil.rmtree(pytester.path / folder, ignore_errors=True)
    blocked = [arg for name in EXTRAS if name not in case.plugins for arg in ("-p", f"no:{name}")]
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *blocked, *case.args, *extra, timeout=INNER_DEADLINE
    )
    observed = json.loads((pytester.path / "observed.json").read_text())
    return Run(
        result.ret, result.parseoutcomes(), observed["outcomes"], observed["order"], result.stdout.str()
    )


@pytest.mark.parametrize("name", list(CASES))
def test_same_outcomes_and_exit_status_with_and_without_mcp_debug(
    pytester: pytest.Pytester, name: str
) -> None:
    case = CASES[name]
    for item in (FIXTURES / "coexist" / case.suite).iterdir():
        shutil.copy(item, pytester.path / item.name)
    pytester.makeconftest(OBSERVER)

    plain = run(pytester, case)
    for outcome, count in case.outcomes:
        assert plain.counts.get(outcome) == count, plain.text
    recording = run(pytester, case, "--mcp-debug")
    assert recording.ret == plain.ret, recording.text
    assert recording.counts == plain.counts, recording.text
    assert recording.outcomes == plain.outcomes

    store = recorded(pytester.path / ".mcpdebug")
    stored_run = store.run(store.run_ids(1)[0])
    assert stored_run is not None and stored_run["exit_status"] == plain.ret
    tests = store.tests(stored_run["run_id"])
    assert {t["nodeid"]: t["status"] for t in tests} == plain.outcomes
    check_details(name, plain, recording, store, stored_run)


def check_details(name: str, plain: Run, recording: Run, store: Any, stored_run: dict[str, Any]) -> None:
    """What each plugin adds that the record or the terminal must keep."""
    rid = stored_run["run_id"]
    failures = {f["nodeid"]: f["snapshot"] for f in store.failures(rid)}
    if name == "pytest-randomly":
        assert recording.order == plain.order != sorted(plain.order)  # the seed's order, both times
        assert [t["nodeid"] for t in store.tests(rid)] == plain.order
    elif name == "pytest-cov":
        total = [line for line in plain.text.splitlines() if line.startswith("TOTAL")]
        assert total and total == [line for line in recording.text.splitlines() if line.startswith("TOTAL")]
    elif name.startswith("pytest-asyncio") or name == "anyio":
        failed = next(s for n, s in failures.items() if "fails" in n)
        test_frame = [f for f in failed.frames if not f.library][-1]
        assert test_frame.function.startswith("test_") and test_frame.locals  # the coroutine's locals
    elif name == "hypothesis":
        (snapshot,) = failures.values()
        assert any("n=500" in note for note in snapshot.notes)  # hypothesis's failing example
        assert ("n", "500") in [(v.name, v.value) for f in snapshot.frames for v in f.locals]  # shrunk
    elif name == "xdist":
        assert {t["worker"] for t in store.tests(rid)} == {"gw0", "gw1"}
    elif name == "doctest":
        examples = {n: s.doctest[0] for n, s in failures.items()}
        assert examples["calc.py::calc.add"].want == "5\n" and examples["calc.py::calc.add"].got == "4\n"
        assert examples["calc.py::calc.ratio"].exception.startswith("ZeroDivisionError")
    elif name == "pytest-timeout":
        interrupted = failures["test_timeout.py::test_too_slow"]
        assert "Timeout" in interrupted.exception.message
        assert [(f.function, f.line) for f in interrupted.frames if not f.library] == [("test_too_slow", 10)]
    elif name == "unittest":
        failed = failures["test_cases.py::Orders::test_fail"]
        assert [v.name for v in [f for f in failed.frames if not f.library][-1].locals] == ["self", "items"]
