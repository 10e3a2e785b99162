"""The helper process that wakes the sender thread (`recording.ticker`): it pokes once a test is a tick
old and not while tests are quick, it is nobody's child, and it ends with the test process however that
ends. Driven through the real dump header the test thread writes (`hangs.gil_dump.DumpFile`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_inner
from pytest_mcpdebug.hangs.gil_dump import DumpFile
from pytest_mcpdebug.output.written import WriteWatch
from pytest_mcpdebug.recording.ticker import OUTPUT_WRITTEN, SERVER_CHANGED, TICK_DUE, Ticker

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_spawn"), reason="the helper needs posix_spawn")

TICK = 0.4
"""Long enough that a busy CI machine does not stall a loop of quick tests for a whole tick."""


@pytest.fixture
def header(tmp_path: Path) -> Iterator[DumpFile]:
    dump = DumpFile(tmp_path / "hangs" / "run.main-1.txt", threading.get_ident())
    yield dump
    dump.close()


@pytest.fixture
def ticker(tmp_path: Path, header: DumpFile) -> Iterator[Ticker]:
    started = Ticker.start(header.path, tmp_path / "server.json", TICK)
    assert started is not None
    yield started
    started.close()


def helper_pids(header: Path) -> list[int]:
    """The helpers watching ``header`` (found by their command line)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if str(header).encode() in cmdline.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def wait_gone(header: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while helper_pids(header):
        assert time.monotonic() < deadline, f"the helper of {header} is still running"
        time.sleep(0.02)


def test_quick_tests_are_not_poked_and_a_test_a_tick_old_is_every_tick(
    header: DumpFile, ticker: Ticker
) -> None:
    assert not ticker.wait(0.1), "poked with no test and no server"
    for i in range(200):  # quick tests, 2 ms each, for about as long as two ticks
        header.set_test(f"test_quick.py::test_{i}")
        time.sleep(0.002)
        header.clear_test()
        if i % 50 == 0:
            assert not ticker.wait(0), f"poked during quick tests (test {i})"
    assert not ticker.wait(0)

    header.set_test("test_slow.py::test_sleeps")
    started = time.monotonic()
    assert ticker.wait(10 * TICK) == TICK_DUE, "a test running for ten ticks was never poked"
    assert time.monotonic() - started >= TICK * 0.9  # a tick after it started (how much after: load)
    assert ticker.wait(10 * TICK) == TICK_DUE, "not poked again while the test kept running"
    header.clear_test()


def test_no_test_for_two_ticks_is_poked_and_so_is_a_server_appearing(
    tmp_path: Path, header: DumpFile, ticker: Ticker
) -> None:
    started = time.monotonic()
    assert ticker.wait(10 * TICK) == TICK_DUE, "no test ran for ten ticks (collection, the end): no poke"
    assert time.monotonic() - started >= TICK  # two ticks after it started looking
    header.set_test("test_a.py::test_one")  # a test runs: only its age counts now
    while ticker.wait(0):
        pass
    (tmp_path / "server.json").write_text("{}")
    reasons, deadline = b"", time.monotonic() + 60
    while SERVER_CHANGED not in reasons:  # within a quarter tick when idle; the test's age pokes too
        assert time.monotonic() < deadline, "a server.json written now was never noticed"
        reasons += ticker.wait(TICK)


def test_output_written_is_poked_once_the_test_is_a_quarter_tick_old(
    tmp_path: Path, header: DumpFile
) -> None:
    """A remote worker's watch of pytest's capture files (`written`): a write pokes the sender (``o``),
    a young test's once it is a quarter tick old (its end may take it sooner), and no write, no ``o``."""
    watch = WriteWatch.start()
    if watch is None:
        pytest.skip("no inotify here")
    with tempfile.TemporaryFile(buffering=0) as capture:  # deleted, as pytest's are
        assert watch.watch(capture.fileno())
        ticker = Ticker.start(header.path, tmp_path / "server.json", TICK, watch.fd)
        assert ticker is not None
        try:
            header.set_test("test_a.py::test_prints")
            started = time.monotonic()
            capture.write(b"a line\n")
            said, deadline = b"", started + 60
            while OUTPUT_WRITTEN not in said:
                assert time.monotonic() < deadline, "a line written was never poked"
                said += ticker.wait(TICK)
            assert time.monotonic() - started >= TICK / 4 * 0.9, "poked while the test was younger"

            while ticker.wait(0):
                pass
            time.sleep(TICK / 2)  # the same test, older than a quarter tick now: no write, no poke
            assert OUTPUT_WRITTEN not in ticker.wait(0)
            capture.write(b"another\n")
            said, deadline = b"", time.monotonic() + 60
            while OUTPUT_WRITTEN not in said:
                assert time.monotonic() < deadline, "a line written by an older test was never poked"
                said += ticker.wait(10 * TICK)
        finally:
            ticker.close()
            watch.close()
    wait_gone(header.path)


def test_the_helper_is_nobodys_child_and_ends_when_closed(header: DumpFile, tmp_path: Path) -> None:
    ticker = Ticker.start(header.path, tmp_path / "server.json", TICK)
    assert ticker is not None
    started = time.monotonic()
    while True:  # the helper's parent exits at once, and is reaped by a thread of the ticker's
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # a test waiting for its children never meets the helper
            break
        assert time.monotonic() - started < 60, "the helper's parent is still a child of this process"
        time.sleep(0.01)
    pids = helper_pids(header.path)
    assert len(pids) == 1
    assert pids[0] != os.getpid()
    ticker.close()
    wait_gone(header.path)
    assert not ticker.wait(0)


def test_the_helper_ends_when_the_test_process_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, threading, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from pathlib import Path
        from pytest_mcpdebug.hangs.gil_dump import DumpFile
        from pytest_mcpdebug.recording.ticker import SERVER_CHANGED, TICK_DUE, Ticker
        dump = DumpFile(Path({str(tmp_path)!r}) / "hangs" / "killed.main-1.txt", threading.get_ident())
        ticker = Ticker.start(dump.path, Path({str(tmp_path)!r}) / "server.json", 0.1)
        print(dump.path, flush=True)
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        path = Path(process.stdout.readline().strip())
        assert helper_pids(path), "the helper did not start"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        wait_gone(path)
    finally:
        process.kill()
        process.wait(10)


def test_a_child_forked_by_a_test_does_not_keep_the_helper_alive(tmp_path: Path) -> None:
    """A test that forks a daemon (no exec) which outlives the run: the helper still ends with the
    test process, not with the daemon."""
    script = textwrap.dedent(
        f"""
        import os, sys, threading, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from pathlib import Path
        from pytest_mcpdebug.hangs.gil_dump import DumpFile
        from pytest_mcpdebug.recording.ticker import Ticker
        dump = DumpFile(Path({str(tmp_path)!r}) / "hangs" / "forked.main-1.txt", threading.get_ident())
        ticker = Ticker.start(dump.path, Path({str(tmp_path)!r}) / "server.json", 0.1)
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        print(dump.path, child, flush=True)
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert process.stdout is not None
        path, child_pid = process.stdout.readline().split()
        child = int(child_pid)
        assert helper_pids(Path(path)), "the helper did not start"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        os.kill(child, 0)  # the forked child lives on ...
        wait_gone(Path(path))  # ... and the helper ended with the test process
    finally:
        process.kill()
        process.wait(10)
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_a_recorded_run_starts_the_helper_from_its_sender_thread(pytester: pytest.Pytester) -> None:
    """The sender thread starts the helper after its first interval (a run over sooner never does):
    a test that waits for it finds it watching a dump header of its own run's folder, nobody's child,
    free to run on any CPU."""
    pytester.makepyfile(
        test_slow="""
        import os, time
        from pathlib import Path

        HANGS = str(Path.cwd() / ".mcpdebug" / "hangs").encode()  # this run's, not another test's

        def helpers():
            found = []
            for entry in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                        args = cmdline.read().split(b"\\0")
                    with open(f"/proc/{entry}/stat") as stat:
                        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if b"-I" in args and any(arg.startswith(HANGS) for arg in args):
                    found.append((int(entry), parent))
            return found

        def test_sees_the_helper():
            # Spawned by the test process, the helper's first process forks it and exits at once: on a
            # busy machine it may be seen before that, as a child of ours. It must not stay one.
            deadline = time.monotonic() + 120
            while not (found := [(pid, parent) for pid, parent in helpers() if parent != os.getpid()]):
                assert time.monotonic() < deadline, f"no helper that is nobody's child: {helpers()}"
                time.sleep(0.05)
            ((pid, parent),) = found
            # The sender thread that started it keeps to this thread's CPU (`colocate`): the helper
            # must not, or it wakes 40 times a second on the CPU the tests run on.
            assert os.sched_getaffinity(pid) == os.sched_getaffinity(0), "the helper inherited a pin"
        """
    )
    result = run_inner(pytester, "--mcp-debug")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*1 passed*"])


def test_a_helper_that_dies_is_noticed_so_the_sender_ticks_again(header: DumpFile, ticker: Ticker) -> None:
    (pid,) = helper_pids(header.path)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while ticker.alive:
        ticker.wait(0.5)
        assert time.monotonic() < deadline, "the helper's end was not noticed"
    assert not ticker.wait(0)


def test_wake_ends_a_wait_at_once(ticker: Ticker) -> None:
    threading.Timer(0.05, ticker.wake).start()
    started = time.monotonic()
    ticker.wait(30)
    assert time.monotonic() - started < 20  # woken, not at its 30 s
