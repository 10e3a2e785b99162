"""Hang timeouts end to end: real inner pytest runs that hang, and what the user and the agent see.

The diagnoses of `fixtures/hangs` are checked against the `# HANG` comments in its sources (see its
README): the whole suite runs once, with ``-n 2``, shared by the tests of this module (also across
xdist workers of the outer run, through a lock file).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from conftest import FIXTURES, SuiteCopier
from helpers import FAST, LAUNCHERS, PYTEST_SCRIPT, recorded, run_inner, run_launched
from mcpdebug.app import build_server

HANGS = FIXTURES / "hangs"
QUICK = ("--mcp-debug-hang-grace=1",)
KINDS = {
    "busy": "busy loop",
    "polling": "polling loop",
    "blocked": "blocked",
    "gil": "C call holding the GIL",
}


def _load_expected() -> Any:
    spec = importlib.util.spec_from_file_location("hangs_expected", HANGS / "expected.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_expected = _load_expected()
_OUR_COMMENTS: re.Pattern[str] = _expected.OUR_COMMENTS


def call_tool(directory: Path, tool: str, **args: object) -> tuple[str, bool]:
    """(text, is_error) of one tool call on the store in ``directory``, through an in-memory client."""

    async def go() -> tuple[str, bool]:
        async with Client(build_server(recorded(directory))) as client:
            result = await client.call_tool(tool, args)
        assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
        return result.content[0].text, bool(result.is_error)

    return anyio.run(go)


def tool_text(directory: Path, tool: str, **args: object) -> str:
    text, is_error = call_tool(directory, tool, **args)
    assert not is_error, f"{tool}({args}) failed: {text}"
    return _OUR_COMMENTS.sub("", text)


SECTIONS = ("mcpdebug: hangs", "mcpdebug: beyond the traceback")


def hang_lines(output: str) -> dict[str, str]:
    """The terminal summary's ``HANG <nodeid>: <summary>`` lines, by node id: in the block after
    pytest's short summary ("beyond the traceback", a failed test's), else in the hangs section."""
    sections = [output.split(title, 1)[1] for title in SECTIONS if title in output]
    found = [
        hang for section in sections for hang in re.findall(r"^HANG (\S+): (.*)$", section, re.MULTILINE)
    ]
    return {nodeid: _OUR_COMMENTS.sub("", summary) for nodeid, summary in found}


def expectations() -> list[Any]:
    return list(_expected.expectations(HANGS))


# Acceptance: one run, as a user would start it ----------------------------------------------------


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_busy_loop_and_a_deadlock_are_named_and_the_run_finishes(
    pytester: pytest.Pytester, suite: SuiteCopier, launcher: str
) -> None:
    suite("hangs")
    result = run_launched(
        pytester,
        launcher,
        "--mcp-debug",
        "--mcp-debug-timeout=2",
        "test_loops.py::test_busy_loop",
        "test_blocking.py::test_lock_deadlock",
        "test_quick.py",
    )
    result.assert_outcomes(
        failed=2, passed=1
    )  # the run finished (run_launched's deadline fails one that does not)
    output = result.stdout.str()
    busy, lock = "test_loops.py::test_busy_loop", "test_blocking.py::test_lock_deadlock"
    hangs = hang_lines(output)
    store = pytester.path / ".mcpdebug"
    assert hangs[busy].startswith("busy loop in lines 8-12 of settle() (")
    assert hangs[lock].startswith("blocked in `with audit_lock:` at line 32 of test_lock_deadlock() (")
    assert hangs[busy].endswith("(mcpdebug timeout of 2 s)")
    assert "HangTimeout: busy loop in lines 8-12 of settle()" in output
    assert output.count(f"HANG {busy}:") == output.count(f"HANG {lock}:") == 1  # in the block, once
    loops, blocking = pytester.path / "test_loops.py", pytester.path / "test_blocking.py"
    for tool in ("get_failure", "get_hang"):
        reply = tool_text(store, tool, test="test_busy_loop")
        assert "busy loop in lines 8-12 of settle()" in reply
        assert re.search(
            rf"^Where: {re.escape(str(loops))}:(8|9|10|11|12) in settle\(\)$", reply, re.MULTILINE
        )
        assert '  >  8 |     while state["delta"] != 0:' in reply
        assert "  > 12 |             break" in reply
        reply = tool_text(store, tool, test="test_lock_deadlock")
        assert "blocked in `with audit_lock:` at line 32 of test_lock_deadlock()" in reply
        assert f"Where: {blocking}:32 in test_lock_deadlock()" in reply
    threads = tool_text(store, "get_hang", test="test_lock_deadlock")
    assert "  auditor (daemon):" in threads  # the other side of the deadlock, with its stack
    assert re.search(rf"#0 {re.escape(str(blocking))}:25 in audit\(\)", threads)


def test_a_gil_hang_loses_nothing_of_the_tests_before_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_g="""
        import re

        def test_a_quick():
            pass

        def test_b_regex():
            assert not re.match(r"(a+)+$", "a" * 40 + "b")
        """
    )
    result = run_inner(pytester, "-n", "1", "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=1, passed=1)
    tests = tool_text(pytester.path / ".mcpdebug", "list_tests")
    assert re.search(r"^passed .* test_g\.py::test_a_quick$", tests, re.MULTILINE), tests
    assert re.search(r"^FAILED .* test_g\.py::test_b_regex", tests, re.MULTILINE), tests


def test_a_gil_hang_that_ends_the_process_is_named_on_the_terminal(pytester: pytest.Pytester) -> None:
    """Without xdist nothing of pytest's is left to report a C call that held the GIL: faulthandler's
    backstop ends the process, and the reaper (a bare interpreter started beside the run) prints the
    diagnosis from the dump, importing the project from the test process's own path."""
    pytester.makepyfile(
        test_g="""
        import re

        def test_regex():
            assert not re.match(r"(a+)+$", "a" * 40 + "b")
        """
    )
    done = subprocess.run(  # pipes, not files: the output is whole once its last writer, the reaper, ends
        [sys.executable, "-m", "pytest", *FAST, "--mcp-debug", "--mcp-debug-timeout=1", *QUICK, "test_g.py"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert re.search(
        r"^mcpdebug: HANG test_g\.py::test_regex: held the GIL in re\.match at line 4 of test_regex\(\)",
        done.stderr,
        re.MULTILINE,
    ), done.stderr
    dump = re.search(r"^mcpdebug: the process was ended; every thread's stack is in (.+)$", done.stderr, re.M)
    assert dump is not None, done.stderr
    assert "test_regex" in Path(dump[1]).read_text(errors="replace")


# Settings: where a timeout comes from --------------------------------------------------------------

PRECEDENCE = """
    import time
    import pytest

    def test_default():
        time.sleep(1000)

    @pytest.mark.mcpdebug_timeout(0.5)
    def test_marker():
        time.sleep(1000)

    @pytest.mark.mcpdebug_timeout(0)
    def test_marker_zero():
        for _ in range(10):
            time.sleep(0.1)
"""


@pytest.mark.parametrize(
    ("cli", "env", "expected"),
    [("0.8", "0.7", "0.8"), (None, "0.7", "0.7"), (None, None, "0.6")],
    ids=["cli", "env", "ini"],
)
def test_a_marker_wins_then_cli_then_env_then_ini(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    cli: str | None,
    env: str | None,
    expected: str,
) -> None:
    pytester.makeini("[pytest]\nmcpdebug_timeout = 0.6\n")
    pytester.makepyfile(test_p=PRECEDENCE)
    if env is not None:
        monkeypatch.setenv("MCPDEBUG_TIMEOUT", env)
    args = [f"--mcp-debug-timeout={cli}"] if cli else ["-k", "default"]  # a timeout alone turns recording on
    result = run_inner(pytester, *args, *QUICK)
    output = result.stdout.str()
    hangs = hang_lines(output)
    assert hangs["test_p.py::test_default"].endswith(f"(mcpdebug timeout of {expected} s)"), hangs
    if cli:
        result.assert_outcomes(failed=2, passed=1)  # test_marker_zero ran 1 s, past every other timeout
        assert hangs["test_p.py::test_marker"].endswith("(mcpdebug timeout of 0.5 s)")
        assert "test_p.py::test_marker_zero" not in hangs
    else:
        result.assert_outcomes(failed=1, deselected=2)


def test_a_module_or_class_marker_times_its_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_module_mark="""
        import time
        import pytest

        pytestmark = pytest.mark.mcpdebug_timeout(0.5)

        def test_hangs():
            time.sleep(1000)
        """,
        test_class_mark="""
        import time
        import pytest

        @pytest.mark.mcpdebug_timeout(0.5)
        class TestGroup:
            def test_hangs(self):
                time.sleep(1000)

        def test_untimed():
            time.sleep(0.6)
        """,
    )
    result = run_inner(pytester, "--mcp-debug", *QUICK)
    result.assert_outcomes(failed=2, passed=1)
    hangs = hang_lines(result.stdout.str())
    assert hangs["test_module_mark.py::test_hangs"].endswith("(mcpdebug timeout of 0.5 s)"), hangs
    assert hangs["test_class_mark.py::TestGroup::test_hangs"].endswith("(mcpdebug timeout of 0.5 s)")


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("cli", "--mcp-debug-timeout='abc'"),
        ("env", "environment variable MCPDEBUG_TIMEOUT='abc'"),
        ("ini", "ini option mcpdebug_timeout='abc'"),
        ("marker", "@pytest.mark.mcpdebug_timeout on test_x.py::test_marked='x'"),
    ],
)
def test_a_bad_timeout_is_a_usage_error_naming_its_source(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str, message: str
) -> None:
    marker = '@pytest.mark.mcpdebug_timeout("x")' if where == "marker" else ""
    pytester.makepyfile(test_x=f"import pytest\n\n{marker}\ndef test_marked():\n    pass\n")
    args = ["--mcp-debug"]
    if where == "cli":
        args.append("--mcp-debug-timeout=abc")
    elif where == "env":
        monkeypatch.setenv("MCPDEBUG_TIMEOUT", "abc")
    elif where == "ini":
        pytester.makeini("[pytest]\nmcpdebug_timeout = abc\n")
    result = run_inner(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"mcpdebug: {message} is not a number of seconds above 0" in result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


FUNC_ONLY = """
    import time
    import pytest

    @pytest.fixture
    def slow_start():
        time.sleep(3.0)  # far past the timeout: a loaded machine's watchdog may be a second or two late

    @pytest.mark.mcpdebug_timeout(0.5, func_only=True)
    def test_func_only(slow_start):
        pass

    @pytest.mark.mcpdebug_timeout(0.5, func_only=True)
    def test_func_only_call_hangs():
        time.sleep(1000)

    def test_whole_test_timed(slow_start):
        pass
"""


def test_func_only_does_not_time_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_f=FUNC_ONLY)
    result = run_inner(pytester, "--mcp-debug-timeout=0.5", *QUICK)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    hangs = hang_lines(result.stdout.str())
    assert set(hangs) == {"test_f.py::test_func_only_call_hangs", "test_f.py::test_whole_test_timed"}
    assert hangs["test_f.py::test_whole_test_timed"].startswith(
        "blocked in `time.sleep(3.0)` at line 6 of slow_start()"
    )
    reply = tool_text(pytester.path / ".mcpdebug", "get_hang", test="test_whole_test_timed")
    assert reply.startswith("HANG test_f.py::test_whole_test_timed (setup) in run ")
    # The option does the same for every test.
    result = run_inner(pytester, "--mcp-debug-timeout=0.5", "--mcp-debug-timeout-func-only", "-k", "whole")
    result.assert_outcomes(passed=1, deselected=2)


# Living with other timers and with tests that pass -------------------------------------------------


def test_pytest_timeout_alongside_ours_fires_second(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_t="""
        import time

        def test_sleeps():
            time.sleep(1000)

        def test_after():
            pass
        """
    )
    result = run_inner(pytester, "--timeout=30", "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=1, passed=1)
    output = result.stdout.str()
    assert "HangTimeout: blocked in `time.sleep(1000)` at line 4 of test_sleeps()" in output
    assert "Timeout >30" not in output and "INTERNALERROR" not in output
    assert "timeout: 30.0s" in output  # pytest-timeout was on


def test_a_passing_suite_with_a_timeout_passes(pytester: pytest.Pytester, suite: SuiteCopier) -> None:
    suite("passing")
    pytester.makepyfile(
        test_steps="""
        import time
        import pytest

        @pytest.fixture
        def warm():
            time.sleep(0.2)
            yield
            time.sleep(0.2)

        def test_waits_in_short_steps(warm):
            for _ in range(4):
                time.sleep(0.1)  # the same line over and over, well within the timeout
        """
    )
    result = run_inner(pytester, "--mcp-debug-timeout=5", *QUICK)  # 0.8 s of steps, 4 s to spare
    result.assert_outcomes(passed=8)
    assert "mcpdebug: hangs" not in result.stdout.str()
    text, is_error = call_tool(pytester.path / ".mcpdebug", "get_hang")
    assert not is_error and "has no hangs: no test ran past an mcpdebug timeout" in text  # an answer


def test_a_test_failing_just_before_its_deadline_does_not_end_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_d="""
        import time

        class SlowRepr:
            def __repr__(self):
                time.sleep(2.0)  # a repr that queries something, while the failure is being recorded
                return "SlowRepr()"

        def test_fails_at_0_5_s():
            value = SlowRepr()
            time.sleep(0.5)  # a second and a half before its deadline: a loaded machine may be late
            raise ValueError("its own failure")

        def test_next():
            pass
        """
    )
    result = run_inner(pytester, "--mcp-debug-timeout=2", *QUICK)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=1, passed=1)
    assert "ValueError: its own failure" in result.stdout.str()
    assert "HANG" not in result.stdout.str() + result.stderr.str()  # it failed on its own, in time


def test_a_wait_longer_than_the_sampling_window_says_how_long(pytester: pytest.Pytester) -> None:
    """The classifier looks at the last 50 samples (0.5 s at 0.01 s); a test blocked at one place for
    its whole 2 s timeout is said to be blocked for about that long, not for the window's length."""
    pytester.makepyfile(
        test_w="""
        import threading

        def test_waits():
            threading.Event().wait()
        """
    )
    result = run_inner(pytester, "--mcp-debug-timeout=2", "--mcp-debug-sample-interval=0.01")
    headline = re.search(r"HANG test_w.py::test_waits: .* for the last ([\d.]+) s", result.stdout.str())
    assert headline, result.stdout.str()
    assert float(headline[1]) > 1.0  # the window alone would say 0.5 s


# The whole hangs suite, run once -------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteRun:
    path: Path
    result: pytest.RunResult

    @contextmanager
    def store(self) -> Iterator[Path]:
        """The run's `.mcpdebug`, one reader at a time (outer xdist workers share it)."""
        with _locked(self.path.with_suffix(".lock")):
            yield self.path / ".mcpdebug"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _inner_env() -> dict[str, str]:
    drop = ("MCPDEBUG", "PYTEST_XDIST", "PYTEST_CURRENT_TEST")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


@pytest.fixture(scope="module")
def hangs_suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the outer session's folder, shared by its workers
    folder = base / "hangs-suite"
    with _locked(folder.with_suffix(".lock")):
        saved = folder / "result.json"
        if not saved.exists():
            folder.mkdir(exist_ok=True)
            SuiteCopier(folder)("hangs")
            # test_gil.py first: the regex is the first test of its worker, so the events of no
            # earlier test are lost with that worker (see test_a_gil_hang_loses_nothing_of_the_tests_before_it).
            files = sorted(p.name for p in HANGS.glob("test_*.py") if p.name != "test_gil.py")
            argv = [*FAST, "-n", "2", "--mcp-debug-timeout=1", *QUICK, "test_gil.py", *files]
            started = time.monotonic()
            done = subprocess.run(  # the console script: the other hang tests run python -m pytest
                [str(PYTEST_SCRIPT), *argv],
                cwd=folder,
                env=_inner_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
            )
            outcome = {"ret": done.returncode, "out": done.stdout, "err": done.stderr}
            saved.write_text(json.dumps({**outcome, "duration": time.monotonic() - started}))
            recorded(folder / ".mcpdebug")  # the spool taken in once, under the lock
        outcome = json.loads(saved.read_text())
    result = pytest.RunResult(
        outcome["ret"], outcome["out"].splitlines(), outcome["err"].splitlines(), outcome["duration"]
    )
    return SuiteRun(folder, result)


def test_the_hangs_suite_runs_to_the_end_under_xdist(hangs_suite: SuiteRun) -> None:
    result = hangs_suite.result
    result.assert_outcomes(failed=9, passed=2, errors=2)  # the run finished, within the fixture's deadline
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    # The GIL-holding regex ended its worker; the controller put the diagnosis in the crash report.
    assert re.search(r"worker 'gw\d' crashed while running 'test_gil.py::test_regex_gil'", output)
    assert "mcpdebug: held the GIL in re.match at line 10 of test_regex_gil() (" in output
    assert len(hang_lines(output)) == 11
    with hangs_suite.store() as store:
        tests = tool_text(store, "list_tests")
    assert re.search(r"^passed .* test_quick\.py::test_quick$", tests, re.MULTILINE), tests


@pytest.mark.parametrize("expected", expectations(), ids=lambda e: e.id)
def test_each_hang_is_diagnosed_at_its_line(hangs_suite: SuiteRun, expected: Any) -> None:
    with hangs_suite.store() as store:
        reply = tool_text(store, "get_hang", test=expected.nodeid)
    headline, kind = reply.splitlines()[:2]
    summary = headline.split(" in run ", 1)[1].split(": ", 1)[1]
    assert headline.startswith(f"HANG {expected.nodeid} ({expected.phase}) in run "), headline
    terminal = hang_lines(hangs_suite.result.stdout.str())[expected.nodeid]
    assert terminal.startswith(summary), terminal
    where = f"{hangs_suite.path / expected.file}:"
    function = f"{expected.function}()"
    if expected.thread:  # the thread the test joins: said after the test's own diagnosis
        assert (
            f"the joined thread '{expected.thread}' is blocked in {expected.call} at line {expected.line} of {function}"
            in summary
        )
    elif expected.kind in ("busy", "polling"):
        assert kind.startswith(f"Kind: {KINDS[expected.kind]}."), kind
        assert f"{KINDS[expected.kind]} in lines {expected.first}-{expected.last} of {function}" in summary
        at = re.search(rf"^Where: {re.escape(where)}(\d+) in {re.escape(function)}$", reply, re.MULTILINE)
        assert at and expected.first <= int(at[1]) <= expected.last, reply  # the line it was caught at
        if expected.call:
            assert f"waiting in `{expected.call}" in summary, summary
    else:
        assert kind.startswith(f"Kind: {KINDS[expected.kind]}."), kind
        assert f"Where: {where}{expected.line} in {function}" in reply
        assert f"line {expected.line} of {function}" in summary
        assert expected.call in summary, summary
