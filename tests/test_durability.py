"""Recording never changes a result, and nothing finished is lost: real faults in inner runs.

A file in the way, a folder this process may not write, a full disk, a process SIGKILLed between two
tests: each run exits as it would without `--mcp-debug`, says in one line what was not recorded and
why, and keeps every test that finished before the fault.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import start_server
from helpers import FAST, LAUNCHERS, UNTIL_RECORDED, run_inner, run_launched, wait_for
from mcpdebug.store import Store
from mcpdebug.views import hang as hang_view
from mcpdebug.views import lookup
from mcpdebug.views import output as output_view
from pytest_mcpdebug.output.tail import TICK
from pytest_mcpdebug.recording.reporter import Reporter

KILLED_SUITE = """
import os, signal

def test_prints():
    for i in range(20):
        print(f"line {i} of test_prints")

def test_kill():
    os.kill(os.getpid(), signal.SIGKILL)
"""


def warnings_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("mcpdebug: warning")]


def read_back(directory: Path) -> Store:
    """The store as `mcpdebug show` reads it: spool files and the dumps of dead processes taken in."""
    store = Store(directory)
    lookup.refresh(store)
    return store


def without_dac_override() -> list[str]:
    """A command prefix that runs without CAP_DAC_OVERRIDE, so file modes bind even for root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: cannot drop CAP_DAC_OVERRIDE to make a folder unwritable")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (root only): a disk that really fills up."""
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until about ``leave`` bytes are free."""
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * max(free - leave, 0))


# A file in the way, an unwritable folder ----------------------------------------------------------


def test_a_file_named_mcpdebug_is_one_warning_and_changes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    print('fine')\n")
    (pytester.path / ".mcpdebug").write_text("not a folder\n")
    result = run_inner(pytester, "--mcp-debug")
    assert result.ret == 0
    out = result.stdout.str() + result.stderr.str()
    [warning] = warnings_of(out)
    assert "was not recorded" in warning and ".mcpdebug is a file, not a folder" in warning
    assert "--mcp-debug-dir" in warning  # what to do
    assert "1 passed" in out and "INTERNALERROR" not in out


def test_an_unwritable_folder_is_one_warning_and_changes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n\ndef test_fails():\n    assert 0\n")
    folder = pytester.path / ".mcpdebug"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = pytester.run(*without_dac_override(), sys.executable, "-m", "pytest", *FAST, "--mcp-debug")
    finally:
        folder.chmod(0o755)
    assert result.ret == 1  # one test failed: the status pytest alone gives
    out = result.stdout.str() + result.stderr.str()
    [warning] = warnings_of(out)
    assert "was not recorded: no permission to write in" in warning and "--mcp-debug-dir" in warning
    assert "1 failed, 1 passed" in out
    assert list(folder.iterdir()) == []


# A full disk --------------------------------------------------------------------------------------


def test_a_nearly_full_disk_never_changes_the_exit_status(pytester: pytest.Pytester) -> None:
    """Passing runs on a nearly full tmpfs, each with a different margin, so the disk fills at open,
    mid-run or at close: every one exits 0 with at most one warning line (the acceptance's eight runs
    in eight are in benchmarks/RESULTS.md)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("i", range(30))
        def test_talks(i):
            print("some output " * 20)
        """
    )
    with small_tmpfs(pytester.path / "disk", "300k") as disk:
        for leave in (0, 6_000, 14_000, 30_000):
            shutil.rmtree(disk / ".mcpdebug", ignore_errors=True)
            (disk / "filler").unlink(missing_ok=True)
            fill(disk, leave)
            result = run_inner(pytester, "--mcp-debug", "--mcp-debug-dir", str(disk / ".mcpdebug"))
            out = result.stdout.str() + result.stderr.str()
            assert result.ret == 0, out
            assert "30 passed" in out and "Traceback" not in out and "INTERNALERROR" not in out
            found = warnings_of(out)
            assert len(found) <= 1, found
            if found:
                assert "is full" in found[0] and "not recorded" in found[0]
            # what did fit is whole lines only: the store (elsewhere: it needs more room) reads it all
            copy = shutil.copytree(disk / ".mcpdebug", pytester.path / f"copy-{leave}" / ".mcpdebug")
            for run in read_back(copy).runs():  # without its end recorded, a run reads as crashed
                assert run["status"] == "finished" or (run["status"] == "crashed" and found), found


INJECTED_ENOSPC = """
import errno
from pytest_mcpdebug.recording import spool

room = [ROOM]
real_write = spool._write_all

def write_until_full(fd, data):
    if len(data) > room[0]:
        raise OSError(errno.ENOSPC, "No space left on device")
    room[0] -= len(data)
    real_write(fd, data)

spool._write_all = write_until_full
"""


@pytest.mark.parametrize("fault", ["tmpfs", "injected"])
def test_a_disk_full_mid_run_counts_what_was_dropped(pytester: pytest.Pytester, fault: str) -> None:
    """A real full disk where the machine allows it (root: a small tmpfs); an injected ENOSPC in the
    spool's writes everywhere."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("i", range(40))
        def test_talks(i):
            print("x" * 4000)
            assert i != 3
        """
    )
    if fault == "injected":
        pytester.makeconftest(INJECTED_ENOSPC.replace("ROOM", "40_000"))
        result = run_inner(pytester, "--mcp-debug")
    else:
        with small_tmpfs(pytester.path / "disk", "300k") as disk:
            fill(disk, 60_000)  # room for the first tests' events only
            result = run_inner(pytester, "--mcp-debug", "--mcp-debug-dir", str(disk / ".mcpdebug"))
    out = result.stdout.str()
    assert result.ret == 1 and "1 failed, 39 passed" in out
    [warning] = warnings_of(out)
    assert "events were not recorded: the disk holding" in warning and "is full" in warning
    assert "what was recorded" in warning and "is kept" in warning


# SIGKILL between two tests --------------------------------------------------------------------------


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["no-xdist", "xdist"])
def test_a_kill_keeps_every_finished_test_spooled(pytester: pytest.Pytester, xdist: list[str]) -> None:
    pytester.makepyfile(test_k=KILLED_SUITE)
    run_inner(pytester, "--mcp-debug", *xdist)
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    output = output_view.output_tail(store, run, "test_k.py::test_prints", 50)
    assert all(f"line {i} of test_prints" in output for i in range(20))
    assert store.test(run["run_id"], "test_k.py::test_prints")["status"] == "passed"  # type: ignore[index]
    if xdist:  # the worker died, the run went on: the test is named crashed
        assert run["status"] == "finished"
        assert "crashed" in hang_view.failure_or_hang(store, run, "test_k.py::test_kill").text
    else:  # pytest itself died: the run is named crashed, with the test that was running
        assert run["status"] == "crashed"
        assert "its process (main, pid" in hang_view.failure_or_hang(store, run, "test_kill").text


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["no-xdist", "xdist"])
def test_a_kill_keeps_every_finished_test_streamed(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """Streaming, the finished test's events are in a write-ahead copy that the store reads once the
    killed process is gone (its clean end would have deleted the copy)."""
    pytester.makepyfile(test_k=KILLED_SUITE)
    directory = pytester.path / ".mcpdebug"
    server = start_server(directory)
    try:
        result = run_inner(pytester, "--mcp-debug", *xdist)
        if xdist:
            assert "streamed to" in result.stdout.str()
        store = read_back(directory)
        [run] = store.runs()
        output = output_view.output_tail(store, run, "test_k.py::test_prints", 50)
        assert all(f"line {i} of test_prints" in output for i in range(20))
        assert store.test(run["run_id"], "test_k.py::test_prints")["status"] == "passed"  # type: ignore[index]
        assert run["status"] == ("finished" if xdist else "crashed")
        assert not list((directory / "spool").glob("*.wal"))  # read, then deleted
    finally:
        server.stop()


CANCELLED_SUITE = """
import os, signal, sys, threading


def test_passes():
    pass


def test_blocks():
    lock = threading.Lock()
    lock.acquire()
    main = threading.main_thread().ident

    def cancel_the_job():  # as a CI runner does at its time limit, once the test is blocked
        while sys._current_frames()[main].f_lineno != BLOCKED:
            threading.Event().wait(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=cancel_the_job, daemon=True).start()
    lock.acquire()  # blocked here


BLOCKED = next(n for n, line in enumerate(open(__file__), 1) if line.rstrip().endswith("# blocked here"))
"""


def test_a_cancelled_job_keeps_the_stops_diagnosis(pytester: pytest.Pytester) -> None:
    """SIGTERM (a CI job cancelled): the process says where it was before it goes, and the store keeps
    that over the dump its death leaves (which says only that the process ended during the test)."""
    pytester.makepyfile(test_c=CANCELLED_SUITE)
    result = run_inner(pytester, "--mcp-debug", "-p", "no:randomly")
    assert result.ret == -signal.SIGTERM
    assert "killed by SIGTERM while running test_c.py::test_blocks" in result.stderr.str()
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    assert run["status"] == "killed"
    [hang] = store.hangs(run["run_id"])
    assert (hang["nodeid"], hang["kind"]) == ("test_c.py::test_blocks", "killed")
    text = hang_view.failure_or_hang(store, run, "test_c.py::test_blocks").text
    assert "killed by SIGTERM" in text and "lock.acquire()" in text, text


INTERRUPTED_SUITE = """
import os, signal

import pytest


def test_handles_its_own_ctrl_c():  # a CLI's test of its Ctrl-C handling (dask, click)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


def test_after():
    pass


def test_interrupted():
    os.kill(os.getpid(), signal.SIGINT)


def test_never_runs():
    pass
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_ctrl_c_is_recorded_as_the_runs_stop_only_when_it_stops_the_run(
    pytester: pytest.Pytester, launcher: str
) -> None:
    """SIGINT: a test that catches its own KeyboardInterrupt goes on and passes, and leaves no stop
    behind (found in dask's suite: "Hangs and stops: interrupted by SIGINT" in a run that passed);
    the one that ends the session is recorded where it was."""
    pytester.makepyfile(test_i=INTERRUPTED_SUITE)
    result = run_launched(pytester, launcher, "--mcp-debug", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert result.stderr.str().count("mcpdebug: interrupted by SIGINT") == 1, result.stderr.str()
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    [stop] = store.hangs(run["run_id"])
    assert (stop["nodeid"], stop["kind"]) == ("test_i.py::test_interrupted", "interrupted")
    outcomes = {t["nodeid"]: t["status"] for t in store.tests(run["run_id"])}
    assert outcomes["test_i.py::test_handles_its_own_ctrl_c"] == "passed"
    assert outcomes["test_i.py::test_after"] == "passed"


XDIST_CANCELLED = """
import pathlib, time


def test_b():
    pathlib.Path("started-b").touch()
    time.sleep(120)  # b waits here


def test_c():
    pathlib.Path("started-c").touch()
    time.sleep(120)  # c waits here
"""


def test_a_cancelled_xdist_job_keeps_each_workers_stop_not_the_controllers(pytester: pytest.Pytester) -> None:
    """A CI job with `-n 2` cancelled while both workers' tests run: each test's stop is its worker's
    (at its own line), and the controller's, which runs no test, is the run's (it was recorded under the
    last test started and shadowed that worker's stop with the controller's own wait)."""
    pytester.makepyfile(test_x=XDIST_CANCELLED)
    job = subprocess.Popen(
        [sys.executable, "-m", "pytest", *FAST, "--mcp-debug", "-n", "2", "-p", "xdist"],
        cwd=pytester.path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (pytester.path / "started-b").exists() and (pytester.path / "started-c").exists())
        os.killpg(job.pid, signal.SIGTERM)  # as a runner cancels a job: every process of it
        output = job.communicate(timeout=120)[0].decode()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    stops = {(h["nodeid"], h["kind"]): h for h in store.hangs(run["run_id"])}
    for name in ("b", "c"):
        text = hang_view.failure_or_hang(store, run, f"test_x.py::test_{name}").text
        assert (
            f"time.sleep(120)  # {name} waits here" in text and "threading.py" not in text.split("\n")[0]
        ), text
    assert ("", "killed") in stops, sorted(stops)
    assert "the xdist controller, waiting for its workers" in output, output


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_cancelled_job_still_writes_its_html_report(pytester: pytest.Pytester, launcher: str) -> None:
    """`--mcp-debug-html` in a CI job cancelled at its time limit (SIGTERM): the report, an artifact
    the job uploads, is written before the process goes, with the stop's diagnosis in it (through the
    console script and `python -m pytest`: the signal's handler is the process's)."""
    pytester.makepyfile(test_c=CANCELLED_SUITE)
    args = ("--mcp-debug", "-p", "no:randomly", "--mcp-debug-html=ci/report.html")
    result = run_launched(pytester, launcher, *args)
    assert result.ret == -signal.SIGTERM
    assert "mcpdebug: HTML report: ci/report.html" in result.stderr.str(), result.stderr.str()
    page = (pytester.path / "ci" / "report.html").read_text(encoding="utf-8")
    assert "test_blocks" in page and "killed by SIGTERM" in page and "lock.acquire()" in page


RUNNING_SUITE = """
import os, signal

def test_prints_then_dies():
    print("written before the kill", flush=True)
    until_recorded("written before the kill")  # read while the test runs: a tick after, when idle
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_kill_keeps_what_the_running_test_wrote_more_than_a_tick_before(pytester: pytest.Pytester) -> None:
    """The sender thread reads a running test's output once the test is a tick old, and every tick
    after: a kill costs at most its last tick of output. The test is killed once its line was read
    (a loaded machine may take more than a tick); never read while the test runs, it would wait for
    ever (its helper fails it after two minutes)."""
    pytester.makepyfile(test_r=UNTIL_RECORDED + RUNNING_SUITE)
    run_inner(pytester, "--mcp-debug")
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    assert run["status"] == "crashed"
    output = output_view.output_tail(store, run, "test_r.py::test_prints_then_dies", 10)
    assert "written before the kill" in output


def test_a_test_is_young_for_one_tick_and_never_when_the_clock_went_back() -> None:
    """What the sender thread's look relies on (`Recorder._tick`): the seconds until the running test
    is a tick old; none once it is, none without a test, and none when the wall clock was set back
    since the test started (it is read as an old one rather than left alone for that long)."""
    reporter = Reporter.__new__(Reporter)  # only the running test matters here
    reporter._running = None
    assert reporter.younger_than(TICK) is None
    location = ("test_a.py", 1, "test_a")
    reporter._running = ("test_a.py::test_a", location, time.time())
    left = reporter.younger_than(TICK)
    assert left is not None and 0 < left <= TICK
    reporter._running = ("test_a.py::test_a", location, time.time() - 2 * TICK)
    assert reporter.younger_than(TICK) is None
    reporter._running = ("test_a.py::test_a", location, time.time() + 3600)  # the clock went back an hour
    assert reporter.younger_than(TICK) is None


# Honest closing line ---------------------------------------------------------------------------------


def test_the_closing_line_counts_the_events_of_every_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("i", range(20))
        def test_talks(i):
            print(f"hello {i}")
        """
    )
    result = run_inner(pytester, "--mcp-debug", "-n", "2")
    line = next(x for x in result.stdout.lines if x.startswith("mcpdebug: run "))
    assert "from 3 processes" in line  # the controller and its two workers
    events = int(line.split("saved to .mcpdebug/spool/ (")[1].split(" events")[0].replace(",", ""))
    store = read_back(pytester.path / ".mcpdebug")
    [run] = store.runs()
    stored = store.db.execute("SELECT count(*) FROM events WHERE run_id=?", (run["run_id"],)).fetchone()[0]
    assert events == stored
