"""What `pytest --mcp-debug` records, seen through the store, for real inner pytest runs."""

from __future__ import annotations

import socket
import sys

import pytest

from conftest import start_server
from helpers import recorded, run_inner, start_inner, wait_for
from mcpdebug.views import output as output_view


def test_failing_suite_is_recorded_without_a_server(pytester: pytest.Pytester, suite) -> None:
    suite("failing")
    result = run_inner(pytester, "--mcp-debug", "--continue-on-collection-errors")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["mcpdebug: run * saved to .mcpdebug/spool/ (* events); inspect it with `*mcpdebug show *`*"]
    )
    assert "mcpdebug: warning" not in result.stdout.str()

    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["status"] == "finished" and run["exit_status"] == 1
    assert run["rootdir"] == str(pytester.path)
    assert run["python"] == ".".join(map(str, sys.version_info[:3]))
    assert run["pytest_version"] == pytest.__version__ and run["host"] == socket.gethostname()
    assert "--mcp-debug" in run["args"] and run["label"].startswith("pytest ")
    assert run["collected"] == 7  # the module that fails to import adds none
    # the test whose teardown fails is one "error" here; pytest counts it as 1 passed + 1 error
    assert run["counts"] == {"failed": 2, "error": 2, "passed": 1, "skipped": 1, "xfailed": 1}
    # pytest's own counts, as its summary line shows them
    assert run["pytest_counts"] == {"failed": 2, "error": 3, "passed": 2, "skipped": 1, "xfailed": 1}

    problems = {(p["nodeid"], p["phase"]): p["message"] for p in store.problems(run["run_id"])}
    assert set(problems) == {
        ("test_assertion.py::test_order_total", "call"),
        ("test_fixture_error.py::test_query_users", "setup"),
        ("test_teardown_error.py::test_workspace_has_config", "teardown"),
        ("test_mixed.py::test_output_then_fail", "call"),
    }
    assert problems[("test_assertion.py::test_order_total", "call")].startswith("AssertionError: assert")
    assert (
        problems[("test_fixture_error.py::test_query_users", "setup")] == "RuntimeError: database unavailable"
    )
    assert (
        problems[("test_teardown_error.py::test_workspace_has_config", "teardown")]
        == "ValueError: cleanup failed"
    )
    assert problems[("test_mixed.py::test_output_then_fail", "call")] == "assert (1 + 1) == 3"
    (collect_error,) = store.collection_errors(run["run_id"])
    assert collect_error["nodeid"] == "test_collection_error.py"
    assert "not_a_real_module_xyz" in collect_error["message"]

    nodeid = "test_mixed.py::test_output_then_fail"
    stdout = output_view.get_output(store, run, nodeid, stream="stdout", phase="call").text
    assert "\n1: step 1: loading config\n2: step 2: connecting\n3: step 3: computing\n" in stdout
    assert "4:" not in stdout  # three lines, nothing else
    stderr = output_view.get_output(store, run, nodeid, stream="stderr").text
    assert "\n1: warning: using fallback arithmetic\n" in stderr
    combined = output_view.get_output(store, run, nodeid).text
    assert combined.startswith(f"Lines 1-4 of 4 ({nodeid}; run {run['run_id']}")
    skipped = store.test(run["run_id"], "test_mixed.py::test_skip")
    assert skipped is not None and skipped["message"] == "not on this platform"


def test_exit_status_and_output_are_unchanged(pytester: pytest.Pytester, suite) -> None:
    suite("failing")
    plain = run_inner(pytester, "-p", "no:mcpdebug", "--continue-on-collection-errors")
    recorded_run = run_inner(pytester, "--mcp-debug", "--continue-on-collection-errors")
    assert plain.ret == recorded_run.ret == 1
    assert plain.parseoutcomes() == recorded_run.parseoutcomes()


@pytest.mark.parametrize(
    ("how", "args", "env"),
    [("ini", (), {}), ("env", (), {"MCPDEBUG": "1"}), ("off", (), {}), ("env-off", (), {"MCPDEBUG": "0"})],
)
def test_enabling(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    args: tuple[str, ...],
    env: dict[str, str],
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    if how == "ini":
        pytester.makeini("[pytest]\nmcpdebug = true\n")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = run_inner(pytester, *args)
    assert result.ret == 0
    enabled = how in ("ini", "env")
    assert (pytester.path / ".mcpdebug").exists() == enabled
    assert ("mcpdebug: run" in result.stdout.str()) == enabled


def test_bad_env_value_says_where_it_came_from(pytester: pytest.Pytester, monkeypatch) -> None:
    pytester.makepyfile("def test_ok(): pass")
    monkeypatch.setenv("MCPDEBUG", "maybe")
    result = run_inner(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable MCPDEBUG='maybe' is not a boolean*"])


def test_bad_url_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = run_inner(pytester, "--mcp-debug", "--mcp-debug-url", "http://localhost:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mcp-debug-url 'http://localhost:1' is not a WebSocket URL*"])


def test_unreachable_server_is_one_warning_and_spools(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass\ndef test_bad(): assert 0")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/?token=s3cr3t-t0ken"
    result = run_inner(pytester, "--mcp-debug", "--mcp-debug-url", url)
    assert result.ret == 1
    warnings = [line for line in result.stdout.lines if line.startswith("mcpdebug: warning")]
    assert len(warnings) == 1 and "unreachable" in warnings[0] and ".mcpdebug/spool/" in warnings[0]
    assert f"ws://127.0.0.1:{port}/ unreachable" in warnings[0]
    assert "s3cr3t-t0ken" not in result.stdout.str() + result.stderr.str()  # CI logs keep no token
    # Said before the first test's result (the attempt runs during collection, the loop waits for it).
    first_result = next(i for i, line in enumerate(result.stdout.lines) if line.endswith("[100%]"))
    assert result.stdout.lines.index(warnings[0]) < first_result
    store = recorded(pytester.path / ".mcpdebug")
    assert store.counts(store.runs()[0]["run_id"]) == {"passed": 1, "failed": 1}


def test_a_run_that_never_reaches_its_tests_says_the_unreachable_server_in_its_summary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(:\n    pass")  # a collection error: no test runs
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_inner(pytester, "--mcp-debug", "--mcp-debug-url", f"ws://127.0.0.1:{port}/")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert any(f"ws://127.0.0.1:{port}/ unreachable" in line for line in result.stdout.lines)


def test_custom_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder given is a project folder (its .mcpdebug/ is the store) unless it is a .mcpdebug
    folder or a store already: nothing is ever written into a folder that is not a store."""
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "elsewhere").mkdir()
    (pytester.path / "elsewhere" / "notes.txt").write_text("mine")
    run_inner(pytester, "--mcp-debug", "--mcp-debug-dir", "elsewhere")
    assert sorted(p.name for p in (pytester.path / "elsewhere").iterdir()) == [".mcpdebug", "notes.txt"]
    assert (pytester.path / "elsewhere/.mcpdebug/spool").is_dir()
    assert (pytester.path / "elsewhere/.mcpdebug/.gitignore").read_text().strip().endswith("*")
    run_inner(pytester, "--mcp-debug", "--mcp-debug-dir", "named/.mcpdebug")
    assert (pytester.path / "named/.mcpdebug/spool").is_dir()
    monkeypatch.setenv("MCPDEBUG_DIR", str(pytester.path / "fromenv"))
    run_inner(pytester, "--mcp-debug")
    assert recorded(pytester.path / "fromenv" / ".mcpdebug").runs()


def test_xdist_records_every_test_once_with_its_worker(pytester: pytest.Pytester, suite) -> None:
    suite("xdist")
    result = run_inner(pytester, "--mcp-debug", "-n", "2")
    assert result.ret == 1
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["status"] == "finished" and run["exit_status"] == 1 and run["workers"] == 2
    assert run["collected"] == 12
    tests = store.tests(run["run_id"])
    assert len(tests) == len({t["nodeid"] for t in tests}) == 12
    assert {t["worker"] for t in tests} == {"gw0", "gw1"}
    assert run["counts"] == {"passed": 10, "failed": 2}
    assert {p["worker"] for p in store.processes(run["run_id"])} == {"controller", "gw0", "gw1"}


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_module_skipped_at_collection_is_a_skipped_test_as_pytest_counts_it(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    """``pytest.skip(allow_module_level=True)`` and a failed ``importorskip``: pytest's summary counts
    each module as a skipped test; the record did not (found in asgiref's suite by the corpus)."""
    pytester.makepyfile(
        test_skipped_module='import pytest\n\npytest.skip("needs a GPU", allow_module_level=True)\n',
        test_missing_import='import pytest\n\npytest.importorskip("no_such_module_here")\n',
        test_runs="def test_one():\n    pass\n",
    )
    result = run_inner(pytester, "--mcp-debug", *workers)
    result.assert_outcomes(passed=1, skipped=2)
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["counts"] == {"passed": 1, "skipped": 2}
    tests = {t["nodeid"]: (t["status"], t["message"]) for t in store.tests(run["run_id"])}
    assert tests["test_skipped_module.py"] == ("skipped", "needs a GPU")
    assert tests["test_missing_import.py"][0] == "skipped"
    assert "no_such_module_here" in tests["test_missing_import.py"][1]


def test_live_events_reach_a_running_server(pytester: pytest.Pytester, suite, server, monkeypatch) -> None:
    suite("slow")
    monkeypatch.setenv("SLOW_WAIT", "120")  # the slow test waits until released (below)
    inner = start_inner(pytester, "--mcp-debug")
    store = recorded(server.directory)

    def sleeping_test_running() -> bool:
        runs = store.runs()
        return bool(runs) and any(
            t["nodeid"].endswith("test_sleeps") for t in store.tests(runs[0]["run_id"], ("running",))
        )

    try:
        wait_for(sleeping_test_running)
        assert inner.poll() is None, "the test was seen running only after the run ended"
    finally:
        (pytester.path / "release").touch()
    out = inner.communicate(timeout=120)[0].decode()
    assert inner.returncode == 0, out
    assert f"streamed to {server.url}" in out
    run = store.runs()[0]
    assert run["status"] == "finished" and run["counts"] == {"passed": 2}


QUICK_UNTIL_RELEASED = """
import os, time, pytest

@pytest.mark.parametrize("i", range({count}))
def test_step(i):
    if not os.path.exists("release"):  # quick tests for as long as the outer test needs them
        time.sleep({pause})
"""
"""Quick tests that keep coming until the outer test creates `release` (each one quicker still from
then on): however slow a loaded machine makes the outer test's look, the run is still going on."""


def test_quick_tests_reach_a_running_server_while_the_run_goes_on(pytester: pytest.Pytester, server) -> None:
    """Quick tests wake no thread (`recording.ticker`): the test thread streams their ends itself, a
    tick at a time, so the server counts them while the run goes on, not at its end."""
    pytester.makepyfile(test_quick=QUICK_UNTIL_RELEASED.format(count=6000, pause=0.01))
    inner = start_inner(pytester, "--mcp-debug")
    store = recorded(server.directory)

    def passed() -> int:
        runs = store.runs()
        return len(store.tests(runs[0]["run_id"], ("passed",))) if runs else 0

    try:
        wait_for(lambda: passed() >= 20)
        assert inner.poll() is None, "the quick tests reached the server only after the run ended"
        first = passed()
        wait_for(lambda: passed() > first)
        assert inner.poll() is None
    finally:
        (pytester.path / "release").touch()
    out = inner.communicate(timeout=120)[0].decode()
    assert inner.returncode == 0, out
    assert f"streamed to {server.url}" in out
    run = store.runs()[0]
    assert run["status"] == "finished" and run["counts"] == {"passed": 6000}


def test_server_killed_mid_run_loses_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_many=QUICK_UNTIL_RELEASED.format(count=400, pause=0.05) + "    assert i != 7\n")
    directory = pytester.path / ".mcpdebug"
    first = start_server(directory)
    inner = start_inner(pytester, "--mcp-debug", "-n", "2")
    store = recorded(directory)
    try:
        wait_for(lambda: store.runs() and sum(store.runs()[0]["counts"].values()) >= 5)
        first.stop(9)  # SIGKILL: no clean-up, server.json left behind with a dead pid
    finally:
        (pytester.path / "release").touch()
    out = inner.communicate(timeout=120)[0].decode()
    assert inner.returncode == 1, out
    assert "lost the server" in out

    second = start_server(directory)
    try:
        run = recorded(directory).runs()[0]
        assert run["status"] == "finished" and run["exit_status"] == 1
        assert run["counts"] == {"passed": 399, "failed": 1}
    finally:
        second.stop()


def test_a_server_started_mid_run_is_streamed_the_rest_of_it(pytester: pytest.Pytester) -> None:
    """A run spooling quick tests has its sender asleep (`recording.ticker`): ``server.json`` appearing
    wakes it, and it hands the server what it spooled and streams the rest."""
    pytester.makepyfile(test_steps=QUICK_UNTIL_RELEASED.format(count=2400, pause=0.05))
    directory = pytester.path / ".mcpdebug"
    inner = start_inner(pytester, "--mcp-debug")
    try:
        wait_for(lambda: any((directory / "spool").glob("*.jsonl")))  # spooling, tests passing
        server = start_server(directory)
        try:
            store = recorded(directory)
            try:
                wait_for(lambda: bool(store.runs()) and store.runs()[0]["status"] == "running")
                assert inner.poll() is None, "the server met the run only after it ended"
            finally:
                (pytester.path / "release").touch()
            out = inner.communicate(timeout=120)[0].decode()
            assert inner.returncode == 0, out
            assert f"streamed to {server.url}" in out
            run = recorded(directory).runs()[0]
            assert run["status"] == "finished" and run["counts"] == {"passed": 2400}
        finally:
            server.stop()
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(10)


def test_a_quick_test_is_one_event_and_keeps_its_place(pytester: pytest.Pytester) -> None:
    """A test that ends within a tick sends no `TestStarted`: its `TestFinished` says where it is,
    and its phases and output are recorded as before."""
    pytester.makepyfile(
        test_quick="""
        import logging

        def test_quick():
            print("quick line")
            logging.getLogger("app").warning("quick record")
        """
    )
    result = run_inner(pytester, "--mcp-debug")
    assert result.ret == 0
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    test = store.test(run["run_id"], "test_quick.py::test_quick")
    assert test is not None
    assert (test["status"], test["file"], test["line"]) == ("passed", "test_quick.py", 3)
    text = output_view.get_output(store, run, "test_quick.py::test_quick", phase="call").text
    assert "quick line" in text and "WARNING app: quick record" in text


def test_without_pytests_capture_plugin_records_keep_their_phase(pytester: pytest.Pytester) -> None:
    """``-p no:capture``: no capture call to stand in front of; the phases come from hooks."""
    pytester.makepyfile(
        test_nocap="""
        import logging
        import pytest

        @pytest.fixture
        def resource():
            logging.getLogger("app").warning("setting up")
            yield
            logging.getLogger("app").warning("tearing down")

        def test_uses(resource):
            logging.getLogger("app").warning("in the test")
        """
    )
    result = run_inner(pytester, "--mcp-debug", "-p", "no:capture")
    assert result.ret == 0
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    nodeid = "test_nocap.py::test_uses"
    for phase, text in (("setup", "setting up"), ("call", "in the test"), ("teardown", "tearing down")):
        assert text in output_view.get_output(store, run, nodeid, phase=phase).text


def test_the_recorded_command_keeps_its_quoting(pytester: pytest.Pytester) -> None:
    """A run's label is its command as a shell takes it (found in the paramiko trial: `-k not sftp`)."""
    pytester.makepyfile(test_q="def test_fast():\n    pass\n\n\ndef test_slow():\n    pass\n")
    run_inner(pytester, "--mcp-debug", "-k", "not slow").assert_outcomes(passed=1)
    (run,) = recorded(pytester.path / ".mcpdebug").runs()
    assert run["label"].startswith("pytest ") and run["label"].endswith(" -k 'not slow'"), run["label"]
