"""xdist workers that share nothing with their controller but execnet's connection, for real.

Each worker runs in network and mount namespaces of its own (``unshare``), with a tmpfs over the
project's `.mcpdebug/`: it can reach neither the server's loopback ingest nor the controller's store,
as a worker on another host (``--tx ssh=...``) cannot. Its events reach the controller through a
channel of its execnet gateway, and the controller delivers them as its own. Where namespaces are
not allowed, ``MCPDEBUG_WORKER_CHANNEL=1`` sends every worker's events through the channel all the same.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RunningServer
from helpers import recorded, run_inner, start_inner, wait_for
from mcpdebug.store import Store
from mcpdebug.views import hang as hang_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view

SUITE = """
import time

def test_prints():
    print("hello from the worker", flush=True)
    time.sleep(0.3)

def test_fails():
    tiers = "a, b,c".split(",")
    assert tiers == ["a", "b", "c"]
"""


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "--fork", "true"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


NAMESPACES = _namespaces_work()


def isolated_python(pytester: pytest.Pytester) -> str:
    """A python that runs in namespaces of its own, its `.mcpdebug/` a tmpfs (the issue's WRAPPER)."""
    if not NAMESPACES:
        pytest.skip("unshare --net --mount is not permitted here (see MCPDEBUG_WORKER_CHANNEL tests)")
    store = pytester.path / ".mcpdebug"
    store.mkdir(exist_ok=True)
    wrapper = pytester.path / "isolated-python"
    wrapper.write_text(
        "#!/bin/bash\n"
        f"exec unshare --net --mount --fork bash -c 'mount -t tmpfs none {store} && "
        f'exec {sys.executable} "$@"\' python "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def workers(pytester: pytest.Pytester, count: int = 2) -> tuple[str, ...]:
    return ("--tx", f"{count}*popen//python={isolated_python(pytester)}", "--dist", "load")


def test_isolated_workers_are_recorded_through_their_channel(pytester: pytest.Pytester) -> None:
    """The issue's run: without the channel the store said "2 collected; no tests"."""
    pytester.makepyfile(test_iso=SUITE)
    result = run_inner(pytester, "--mcp-debug", *workers(pytester))
    result.assert_outcomes(passed=1, failed=1)
    store = recorded(pytester.path / ".mcpdebug")
    [run] = store.runs()
    rid = run["run_id"]
    assert {t["nodeid"]: t["status"] for t in store.tests(rid)} == {
        "test_iso.py::test_prints": "passed",
        "test_iso.py::test_fails": "failed",
    }
    assert "hello from the worker" in output_view.output_tail(store, run, "test_iso.py::test_prints", 10)
    failure = hang_view.failure_or_hang(store, run, "test_fails").text
    assert "tiers (list) = ['a', ' b', 'c']" in failure
    workers_seen = {p["worker"] for p in store.processes(rid)}
    assert {"gw0", "gw1"} <= workers_seen  # each worker announced itself through its channel
    assert "saved to .mcpdebug/spool/" in result.stdout.str()


HELD_SUITE = """
import os, time
from pathlib import Path

def test_prints_and_waits():
    print("a line written on the remote worker", flush=True)
    flag = Path(os.environ["RELEASE_FLAG"])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
"""


def _running_line(store_dir: Path) -> bool:
    store = recorded(store_dir)
    try:
        runs = store.runs()
        if not runs:
            return False
        run = runs[0]
        test = store.test(run["run_id"], "test_held.py::test_prints_and_waits")
        text = output_view.output_tail(store, run, "test_held.py::test_prints_and_waits", 5)
        return test is not None and test["status"] == "running" and "written on the remote" in text
    except lookup.NotFound:  # the test is not stored yet
        return False
    finally:
        store.close()


def test_a_remote_workers_line_is_readable_while_its_test_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No server: the controller spools the worker's lines as they come (measured: benchmarks)."""
    pytester.makepyfile(test_held=HELD_SUITE)
    flag = pytester.path / "release"
    monkeypatch.setenv("RELEASE_FLAG", str(flag))
    inner = start_inner(pytester, "--mcp-debug", *workers(pytester, 1))
    try:
        wait_for(lambda: _running_line(pytester.path / ".mcpdebug"), timeout=60, interval=0.05)
    finally:
        flag.touch()
        out, _ = inner.communicate(timeout=120)
    assert inner.returncode == 0, out.decode()


def test_a_server_gets_a_remote_workers_events_live(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, server: RunningServer
) -> None:
    """The worker cannot reach the loopback ingest; the controller streams its events there."""
    pytester.makepyfile(test_held=HELD_SUITE)
    flag = pytester.path / "release"
    monkeypatch.setenv("RELEASE_FLAG", str(flag))
    inner = start_inner(pytester, "--mcp-debug", *workers(pytester, 1))
    directory = pytester.path / ".mcpdebug"

    def streamed_line() -> bool:
        store = Store(directory)  # read as the server wrote it: nothing spooled to take in
        try:
            runs = store.runs()
            return bool(runs) and "written on the remote" in output_view.output_tail(
                store, runs[0], "test_held.py::test_prints_and_waits", 5
            )
        except lookup.NotFound:  # the test is not stored yet
            return False
        finally:
            store.close()

    try:
        wait_for(streamed_line, timeout=60)
    finally:
        flag.touch()
        out, _ = inner.communicate(timeout=120)
    text = out.decode()
    assert inner.returncode == 0, text
    assert "streamed to" in text
    assert not list((directory / "spool").glob("*.gw0-*.jsonl"))  # nothing needed spooling


KILLED_SUITE = """
import os, signal

def test_prints():
    for i in range(20):
        print(f"line {i} of test_prints")

def test_kill():
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_what_a_killed_remote_worker_sent_stays(pytester: pytest.Pytester) -> None:
    """Each test's end goes through the channel before the next test starts: a worker killed
    during the next one has lost nothing of the tests before."""
    pytester.makepyfile(test_k=KILLED_SUITE)
    run_inner(pytester, "--mcp-debug", "-p", "no:randomly", *workers(pytester, 1))
    store = recorded(pytester.path / ".mcpdebug")
    [run] = store.runs()
    output = output_view.output_tail(store, run, "test_k.py::test_prints", 50)
    assert all(f"line {i} of test_prints" in output for i in range(20))
    assert store.test(run["run_id"], "test_k.py::test_prints")["status"] == "passed"  # type: ignore[index]
    assert "crashed" in hang_view.failure_or_hang(store, run, "test_k.py::test_kill").text


BREAKING_CONFTEST = """
import pytest

channels = []

@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    channels.append(node.workerinput["mcpdebug"]["channel"])

def pytest_runtest_logreport(report):
    if report.when == "teardown" and report.nodeid.endswith("test_first"):
        for channel in channels:
            channel.close("closed by the test")
"""

BREAKING_SUITE = """
import time

def test_first():
    print("before the break")

def test_second():
    time.sleep(1.0)
    print("after the break")
"""


def test_a_broken_channel_spools_on_the_workers_host_and_says_where(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker through its channel (no namespaces needed); the controller closes the channel
    after the first test: the worker spools the rest in its own folder and the summary says so."""
    monkeypatch.setenv("MCPDEBUG_WORKER_CHANNEL", "1")
    pytester.makeconftest(BREAKING_CONFTEST)
    pytester.makepyfile(test_b=BREAKING_SUITE)
    result = run_inner(pytester, "--mcp-debug", "-n", "1", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "lost its channel to the controller" in out and "mcpdebug merge" in out
    spool = pytester.path / ".mcpdebug" / "spool"
    local = [p for p in spool.glob("*.gw0-*.jsonl") if b"after the break" in p.read_bytes()]
    assert local, "the worker's own spool holds what came after the break"
    store = recorded(pytester.path / ".mcpdebug")
    [run] = store.runs()
    assert "before the break" in output_view.output_tail(store, run, "test_first", 5)
    assert "after the break" in output_view.output_tail(store, run, "test_second", 5)


RELAYS_CONFTEST = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    recorder = session.config.pluginmanager.get_plugin("mcpdebug-recorder")
    if recorder is not None and recorder.relays is not None:
        print("RELAYED", len(recorder.relays.senders()))
"""


def test_forced_channel_records_like_a_local_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCPDEBUG_WORKER_CHANNEL=1: the same record as workers writing the store themselves."""
    monkeypatch.setenv("MCPDEBUG_WORKER_CHANNEL", "1")
    pytester.makeconftest(RELAYS_CONFTEST)
    pytester.makepyfile(test_iso=SUITE)
    result = run_inner(pytester, "--mcp-debug", "-n", "2", "-s")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RELAYED 2*"])
    store = recorded(pytester.path / ".mcpdebug")
    [run] = store.runs()
    assert run["counts"] == {"passed": 1, "failed": 1}
    assert "tiers (list) = ['a', ' b', 'c']" in hang_view.failure_or_hang(store, run, "test_fails").text


def test_local_workers_never_use_their_channel(pytester: pytest.Pytester) -> None:
    """A worker that reaches the store writes its own spool file, as before: no relay starts."""
    pytester.makeconftest(RELAYS_CONFTEST)
    pytester.makepyfile(test_iso=SUITE)
    result = run_inner(pytester, "--mcp-debug", "-n", "2", "-s")
    result.stdout.fnmatch_lines(["*RELAYED 0*"])
    names = sorted(p.name for p in (pytester.path / ".mcpdebug" / "spool").glob("*.jsonl"))
    assert len(names) == 3  # the controller's and each worker's own


def test_coverage_of_isolated_workers_reaches_the_controller(pytester: pytest.Pytester) -> None:
    """A remote worker's per-test coverage data file is shipped over its channel and combined."""
    pytester.makepyfile(
        mod="def tiers(text):\n    return text.split(',')\n",
        test_cov="from mod import tiers\n\ndef test_tiers():\n    assert tiers('a,b') == ['a', 'b']\n",
    )
    run_inner(pytester, "--mcp-debug-coverage", *workers(pytester, 1))
    store = recorded(pytester.path / ".mcpdebug")
    [run] = store.runs()
    files = store.db.execute(
        "SELECT path, combined, tests FROM coverage_files WHERE run_id=?", (run["run_id"],)
    )
    combined = [dict(r) for r in files if r["combined"]]
    assert combined and combined[0]["tests"] == 1
    assert Path(combined[0]["path"]).is_file()


@pytest.mark.parametrize(
    ("url", "tried"),
    [
        ("ws://127.0.0.1:8765/?token=t", False),
        ("ws://localhost:8765/", False),
        ("ws://[::1]:8765/", False),
        ("wss://mcpdebug.ci.example:443/?token=t", True),
        (None, False),
    ],
)
def test_a_remote_worker_leaves_its_controllers_loopback_server_to_the_controller(
    url: str | None, tried: bool
) -> None:
    """On another host a loopback URL is that host's own: the controller streams for the worker."""
    from pytest_mcpdebug.recording.via_controller import reachable

    assert reachable(url) == (url if tried else None)
