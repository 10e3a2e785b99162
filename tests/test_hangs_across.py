"""Hangs across a boundary, end to end: a child process, a pool worker, an executor's thread, a test
that cannot be stopped, any process by pid. Real inner pytest runs; py-spy reads the children."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import psutil
import pytest
from test_hangs import QUICK, hang_lines, tool_text

from conftest import MCPDEBUG
from helpers import FAST, INNER_DEADLINE, LAUNCHERS, PYTEST_SCRIPT, run_inner, run_launched
from pytest_mcpdebug.hangs.tasks import meanwhile
from pytest_mcpdebug.protocol import HangFrame, HangTask

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="py-spy and ptrace as set up on Linux")


def line_of(source: str, text: str) -> int:
    """The line of ``text`` in ``source`` as pytester writes it (dedented, blank lines around cut)."""
    lines = textwrap.dedent(source).strip("\n").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


CHILD = """\
import threading

lock = threading.Lock()
lock.acquire()
print("child started", flush=True)
lock.acquire()
"""

ACROSS = """
import multiprocessing
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


def test_child_deadlock():
    subprocess.run([sys.executable, str(Path(__file__).with_name("child.py"))], check=True)


def wait_for_go(n):
    go = multiprocessing.Event()
    go.wait()  # pool worker
    return n


def test_pool_worker():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(wait_for_go, [1]) == [1]


jobs = queue.Queue()


def work():
    return jobs.get()  # executor worker


def test_executor_in_with():
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(work)
        assert fut.result() == 1


def upload(stop):
    stop.wait()  # nothing ever sets it


@pytest.fixture
def uploader():
    thread = threading.Thread(target=upload, args=(threading.Event(),), name="uploader")
    thread.start()
    yield
    thread.join()  # teardown joins a stuck thread


def test_teardown_joins(uploader):
    pass


def test_after():
    pass
"""


def test_each_worker_is_named_at_its_own_line_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(child=CHILD, test_across=ACROSS)
    result = run_inner(pytester, "--mcp-debug-timeout=1.5", *QUICK, "-p", "no:randomly")
    result.assert_outcomes(failed=3, passed=2, errors=1)  # every test is in the summary
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    hangs = hang_lines(output)
    run = line_of(ACROSS, "subprocess.run(")
    assert re.match(
        r"waiting on child \d+ \(child\.py\), which is blocked in `lock\.acquire\(\)` at line 6 of "
        rf"<module>\(\) \(.*child\.py\); the test is blocked in subprocess\.run at line {run} of "
        r"test_child_deadlock\(\)",
        hangs["test_across.py::test_child_deadlock"],
    ), hangs
    assert re.match(
        rf"waiting on child \d+ \(.*\), which is blocked in .* at line {line_of(ACROSS, '# pool worker')} "
        r"of wait_for_go\(\)",
        hangs["test_across.py::test_pool_worker"],
    ), hangs
    work = line_of(ACROSS, "# executor worker")
    assert hangs["test_across.py::test_executor_in_with"].startswith(
        "waiting on thread 'ThreadPoolExecutor-0_0' (running the future's work item), which is blocked in "
        f"queue.Queue.get at line {work} of work() ("
    )
    joins, waits = line_of(ACROSS, "# teardown joins"), line_of(ACROSS, "# nothing ever sets it")
    assert hangs["test_across.py::test_teardown_joins"].startswith(
        f"blocked in threading.Thread.join at line {joins} of uploader() ("
    )
    assert (
        f"the joined thread 'uploader' is blocked in threading.Condition.wait / Event.wait at line {waits}"
        in (hangs["test_across.py::test_teardown_joins"])
    )
    # Interrupted in fut.result(), the test blocked again where the with block joins the worker:
    # interrupted there too, it unwound, and the run went on.
    assert "in __exit__" in output and "During handling of the above exception" in output
    assert re.search(
        r"^LEFT RUNNING by test_across\.py::test_teardown_joins: thread 'uploader'", output, re.M
    )
    store = pytester.path / ".mcpdebug"
    child = pytester.path / "child.py"
    reply = tool_text(store, "get_hang", test="test_child_deadlock")
    assert f"Where: {child}:6 in <module>()" in reply
    assert "  > 6 | lock.acquire()" in reply
    assert re.search(r"^Child processes \(1\), seen from outside with py-spy:$", reply, re.M)
    assert re.search(
        r"^- pid \d+ \([\w-]+\) `.*child\.py`: blocked in `lock\.acquire\(\)` at line 6", reply, re.M
    ), reply
    reply = tool_text(store, "get_hang", test="test_executor_in_with")
    assert "Where: " + str(pytester.path / "test_across.py") + f":{work} in work()" in reply
    assert f"  ThreadPoolExecutor-0_0: blocked in queue.Queue.get at line {work} of work()" in reply


UNKILLABLE = """
import time

import pytest


@pytest.fixture
def stubborn():
    yield
    while True:  # a cleanup that swallows every interruption
        try:
            time.sleep(100)
        except BaseException:
            pass


def test_first():
    pass


def test_stubborn(stubborn):
    time.sleep(100)


def test_after():
    pass


def test_after_fails():
    assert 1 == 2
"""


def test_a_test_that_cannot_be_stopped_does_not_cost_the_rest_of_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_u=UNKILLABLE)
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-rfE")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # as one process would exit, not 3
    result.assert_outcomes(failed=2, passed=2, errors=1)  # one summary, counting every test
    output = result.stdout.str()
    assert output.count("short test summary info") == 1
    line = line_of(UNKILLABLE, "time.sleep(100)")
    assert f"ERROR test_u.py::test_stubborn - blocked in `time.sleep(100)` at line {line} of s" in output
    assert "test_stubborn could not be stopped; the run goes on in a fresh process (2 tests done)" in output
    text = tool_text(pytester.path / ".mcpdebug", "list_tests")
    for nodeid in ("test_first", "test_after"):
        assert re.search(rf"^passed .* test_u\.py::{nodeid}$", text, re.M), text
    assert re.search(
        rf"^FAILED .* test_u\.py::test_stubborn - blocked in `time.sleep\(100\)` at line {line} of stubborn\(\)",
        text,
        re.M,
    ), text
    summary = tool_text(pytester.path / ".mcpdebug", "get_run_summary")
    assert "exit status 1" in summary and "4 collected" in summary, summary


def test_a_timer_the_stuck_test_armed_does_not_kill_the_fresh_process(pytester: pytest.Pytester) -> None:
    """A real-time timer survives exec: pytest-timeout's signal method (or a test's ``signal.alarm``)
    armed for the stuck test fired in the fresh process before anything there handled it ("Alarm
    clock", no summary, the rest of the run lost). Here it repeats every 0.2 s, so it is due at once
    in the fresh process whatever the load."""
    pytester.makepyfile(
        test_u=UNKILLABLE.replace(
            "def test_stubborn(stubborn):\n",
            "def test_stubborn(stubborn):\n"
            "    import signal\n"
            "    signal.signal(signal.SIGALRM, lambda *_: None)\n"
            "    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)\n",
        )
    )
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-rfE")
    assert "Alarm clock" not in result.stderr.str()
    result.assert_outcomes(failed=2, passed=2, errors=1)
    assert "the run goes on in a fresh process (2 tests done)" in result.stdout.str()


def test_under_xdist_a_stuck_worker_is_replaced(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_u=UNKILLABLE)
    result = run_inner(pytester, "-n", "1", "--mcp-debug-timeout=1", *QUICK)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=3, passed=2)  # the stuck test counts as its worker's crash
    assert "could not be stopped" not in result.stdout.str()


def test_mcpdebug_hang_names_the_line_of_a_deadlocked_process(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "child started\n"
        done = subprocess.run(  # how long it takes (2.3-2.5 s): benchmarks/latencies.py
            [MCPDEBUG, "hang", str(process.pid)], capture_output=True, text=True, timeout=60
        )
    finally:
        process.kill()
        process.wait()
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(
        f"PID {process.pid} `{sys.executable} {script}`: blocked in `lock.acquire()` at line 6"
    )
    assert f"Where: {script}:6 in <module>()" in done.stdout
    missing = subprocess.run([MCPDEBUG, "hang", "999999999"], capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and "there is no process 999999999" in missing.stderr


def test_detect_hang_by_pid_over_mcp(tmp_path: Path) -> None:
    from test_hangs import call_tool

    busy = tmp_path / "spin.py"
    busy.write_text("print('spinning', flush=True)\ntotal = 0\nwhile True:\n    total += 1\n")
    process = subprocess.Popen([sys.executable, str(busy)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "spinning\n"  # at its loop
        text, is_error = call_tool(tmp_path / ".mcpdebug", "detect_hang", pid=process.pid, timeout=1)
    finally:
        process.kill()
        process.wait()
    assert not is_error, text
    assert text.startswith(f"PID {process.pid} ") and "busy loop in lines 3-4 of <module>() (" in text
    text, is_error = call_tool(tmp_path / ".mcpdebug", "detect_hang", pid=process.pid, timeout=1)
    assert is_error and "there is no process" in text


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv"
)
def test_where_py_spy_may_not_attach_the_report_says_what_to_change(tmp_path: Path) -> None:
    """As an unprivileged user, the survey of a root process is refused by ptrace: said, with advice."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    target = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    probe = (
        "import sys; from pytest_mcpdebug.hangs import processes; "
        f"print(processes.spy([{target.pid}])[{target.pid}].error)"
    )
    try:
        assert target.stdout is not None and target.stdout.readline() == "child started\n"
        done = subprocess.run(
            [
                "/usr/bin/setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-c",
                probe,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    finally:
        target.kill()
        target.wait()
    if done.returncode != 0 and "pytest_mcpdebug/" not in done.stderr:
        pytest.skip(f"this Python cannot run as an unprivileged user here: {done.stderr[-200:]}")
    error = done.stdout.strip()
    assert error.startswith(f"py-spy may not attach to pid {target.pid} (ptrace not permitted): "), done
    assert "CAP_SYS_PTRACE" in error


ASYNC = """
import asyncio

import pytest


@pytest.mark.asyncio
async def test_async_hangs():
    ev = asyncio.Event()
    retries = 3
    await asyncio.wait_for(ev.wait(), 60)


async def spin():
    n = 0
    while True:
        n += 1


@pytest.mark.asyncio
async def test_async_busy():
    await spin()


@pytest.mark.anyio
async def test_anyio_hangs():
    import anyio

    done = anyio.Event()
    await done.wait()


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_after():
    pass
"""


@pytest.mark.parametrize(
    ("mode", "launcher"),
    [("strict", "script"), ("strict", "module"), ("strict", "main"), ("auto-reruns", "script")],
)
def test_an_async_test_is_diagnosed_at_its_await(pytester: pytest.Pytester, mode: str, launcher: str) -> None:
    """However pytest is launched (the console script's frame, runpy's, a script's ``pytest.main()``
    sit under the event loop), the headline names the test's ``await``."""
    pytester.makepyfile(test_co=ASYNC)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    reruns = ["--asyncio-mode=auto", "-p", "rerunfailures", "--reruns", "1"]
    args = reruns if mode == "auto-reruns" else ["--asyncio-mode=strict"]
    result = run_launched(pytester, launcher, "--mcp-debug-timeout=1", *QUICK, "-p", "asyncio", *args)
    result.assert_outcomes(failed=3, passed=1)
    assert result.parseoutcomes().get("rerun", 0) == (3 if "reruns" in mode else 0)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the rest of the run completed
    output = result.stdout.str()
    hangs = hang_lines(output)
    prefix = "(attempt 2) " if "reruns" in mode else ""
    awaits = line_of(ASYNC, "await asyncio.wait_for")
    assert hangs["test_co.py::test_async_hangs"].startswith(
        f"{prefix}blocked in `await asyncio.wait_for(ev.wait(), 60)` at line {awaits} of test_async_hangs() ("
    ), hangs
    assert hangs["test_co.py::test_anyio_hangs"].startswith(
        f"{prefix}blocked in `await done.wait()` at line {line_of(ASYNC, 'await done.wait()')} of test_anyio_hangs() ("
    ), hangs
    loop = line_of(ASYNC, "while True")
    assert hangs["test_co.py::test_async_busy"].startswith(
        f"{prefix}busy loop in lines {loop}-{loop + 1} of spin() ("
    ), hangs
    store = pytester.path / ".mcpdebug"
    failure = tool_text(store, "get_failure", test="test_async_hangs")
    assert re.search(rf"^#\d+ .*test_co\.py:{awaits} in test_async_hangs\(\)$", failure, re.M), failure
    assert "      retries (int) = 3" in failure  # the coroutine's locals, as a sync test's
    hang = tool_text(store, "get_hang", test="test_async_hangs")
    assert f"Where: {pytester.path / 'test_co.py'}:{awaits} in test_async_hangs()" in hang
    assert "Locals of test_async_hangs()" in hang
    if "reruns" in mode:  # every attempt was interrupted, and recorded
        assert re.search(r"^- 1\. rerun \(call\) in .*HangTimeout", failure, re.M), failure
        assert re.search(r"^- 2\. failed \(call\) in .*HangTimeout", failure, re.M), failure


LOOP_THREADS = """
import asyncio
import threading

import anyio.from_thread


async def waiter(ev):
    await ev.wait()


async def main():
    await asyncio.create_task(waiter(asyncio.Event()))


def test_joins_a_loop_thread():
    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    thread.join()


def test_waits_on_a_coroutine_in_a_loop_thread():
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(waiter(asyncio.Event()), loop).result()


def test_calls_through_a_portal():
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.call(waiter, anyio.Event())
"""


def test_a_test_waiting_on_an_event_loop_in_another_thread_is_named_at_its_task(
    pytester: pytest.Pytester,
) -> None:
    """The test's thread is in join() or a future's wait, the loop's thread in select(): the
    headline follows into the loop's tasks. The joined thread and the loop a future is chained to
    are certain; a portal's loop is named when it is the only loop thread waiting in the project's
    code, and not guessed among several (the earlier tests' threads still wait)."""
    pytester.makepyfile(test_lt=LOOP_THREADS)
    await_line = line_of(LOOP_THREADS, "await ev.wait()")
    named = (
        f"(an asyncio event loop), which is blocked in `await ev.wait()` at line {await_line} of waiter() ("
    )
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=3)
    hangs = hang_lines(result.stdout.str())
    assert named in hangs["test_lt.py::test_joins_a_loop_thread"], hangs
    assert (
        "; the test is blocked in threading.Thread.join at line"
        in hangs["test_lt.py::test_joins_a_loop_thread"]
    )
    assert named in hangs["test_lt.py::test_waits_on_a_coroutine_in_a_loop_thread"], hangs
    assert hangs["test_lt.py::test_calls_through_a_portal"].startswith(
        "blocked in threading.Condition.wait"
    ), hangs
    alone = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-k", "portal")
    alone.assert_outcomes(failed=1)
    portal = hang_lines(alone.stdout.str())["test_lt.py::test_calls_through_a_portal"]
    assert portal.startswith("waiting on thread 'asyncio-portal-") and named in portal, portal


SAME_NAMES = """
import asyncio

import anyio.from_thread


async def waiter(ev):
    asyncio.current_task().set_name("job")
    await ev.wait()


async def poller():
    asyncio.current_task().set_name("job")
    await asyncio.sleep(3600)


def test_calls_through_a_portal_beside_a_same_named_task():
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.start_task_soon(poller)
        portal.call(waiter, anyio.Event())
"""


def test_a_loop_threads_other_tasks_are_told_apart_from_the_waiting_one_by_identity_not_name(
    pytester: pytest.Pytester,
) -> None:
    """Two tasks named alike on a portal's loop, both waiting in the project's code: the headline
    follows one, and "meanwhile" names the other (a filter by name dropped both)."""
    pytester.makepyfile(test_same=SAME_NAMES)
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=1)
    line = hang_lines(result.stdout.str())[
        "test_same.py::test_calls_through_a_portal_beside_a_same_named_task"
    ]
    assert line.startswith("waiting on thread 'asyncio-portal-"), line
    named = re.search(r"which is blocked in `await \S+` at line \d+ of (\w+)\(\)", line)
    assert named is not None, line
    other = {"waiter": "poller", "poller": "waiter"}[named.group(1)]
    assert re.search(rf"; meanwhile job \([^)]*\) waits in [^;]*\b{other}\(\)", line), line


YIELDING = """
import asyncio
import unittest

import pytest


async def retry_forever():
    tries = 0
    while True:
        tries += 1
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_async_yielding_loop():
    await retry_forever()


def test_sync_runs_a_yielding_loop():
    asyncio.run(retry_forever())


class TestUnittest(unittest.TestCase):
    def test_runs_a_yielding_loop(self):
        asyncio.run(retry_forever())


def test_after():
    pass
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_coroutine_looping_on_an_await_done_at_once_is_named_at_its_loop(
    pytester: pytest.Pytester, launcher: str
) -> None:
    """A loop that awaits something done at once (a retry without a pause) runs a step a round; the
    sampler only ever sees the event loop's select() (it gets the GIL there), so the headline
    comes from the task that runs again at once. It is stopped by cancelling that task with the
    hang's message between two steps (interrupting the thread could land in asyncio's own code,
    which logged it and never scheduled the task again: the runner's teardown then waited for it)."""
    pytester.makepyfile(test_y=YIELDING)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = run_launched(pytester, launcher, "--mcp-debug-timeout=1", *QUICK, "-p", "asyncio")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the rest of the run completed
    result.assert_outcomes(failed=3, passed=1)  # no teardown waiting for a task that lost its step
    output = result.stdout.str()
    stopped = [
        line
        for line in output.splitlines()
        if line.startswith("E ") and "CancelledError: HangTimeout: busy loop in lines" in line
    ]
    assert len(stopped) == 3, stopped  # traceback lines only: the short summary's width varies
    hangs = hang_lines(output)
    loop = line_of(YIELDING, "while True")
    for nodeid in (
        "test_y.py::test_async_yielding_loop",
        "test_y.py::test_sync_runs_a_yielding_loop",
        "test_y.py::TestUnittest::test_runs_a_yielding_loop",
    ):
        assert hangs[nodeid].startswith(f"busy loop in lines {loop}-{loop + 2} of retry_forever() ("), hangs
        assert "asyncio task Task-" in hangs[nodeid] and "runs again at once each round" in hangs[nodeid]


TASK_GROUPS = """
import asyncio
import sys

import anyio
import pytest


async def consumer(ev):
    await take(ev)


async def take(ev):
    await ev.wait()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is 3.11's")
@pytest.mark.asyncio
async def test_asyncio_task_group():
    async with asyncio.TaskGroup() as tg:
        tg.create_task(consumer(asyncio.Event()))


@pytest.mark.anyio
async def test_anyio_task_group():
    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer, anyio.Event())


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def test_a_task_group_waiting_for_its_child_is_named_at_the_childs_await(pytester: pytest.Pytester) -> None:
    """The test's task waits at the end of ``async with`` (the group's own future); what keeps it is
    the child's ``await``: the headline follows into the child (found in the anyio trials)."""
    pytester.makepyfile(test_tg=TASK_GROUPS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-p", "asyncio")
    groups = ["test_anyio_task_group"] + (["test_asyncio_task_group"] if sys.version_info >= (3, 11) else [])
    result.assert_outcomes(failed=len(groups), skipped=2 - len(groups))
    hangs = hang_lines(result.stdout.str())
    line = line_of(TASK_GROUPS, "await ev.wait()")
    for name in groups:
        assert hangs[f"test_tg.py::{name}"].startswith(
            f"blocked in `await ev.wait()` at line {line} of take() ("
        ), hangs
    # the child's await chain, outermost first: where a fault one call up would be
    reply = tool_text(pytester.path / ".mcpdebug", "get_hang", test="test_anyio_task_group")
    calls = line_of(TASK_GROUPS, "await take(ev)")
    assert f"    awaits through: consumer() (test_tg.py:{calls}) -> take() (test_tg.py:{line})" in reply, (
        reply
    )


SERVER = """
import asyncio


class Reader:
    def __init__(self, data):
        self.buf, self.eof, self.waiter = data, True, None

    async def _wait(self):
        self.waiter = asyncio.get_running_loop().create_future()
        await self.waiter

    async def readline(self):
        while b"\\n" not in self.buf:
            await self._wait()  # the fault: waits before it looks at eof
            if self.eof:
                break
        line, _, self.buf = self.buf.partition(b"\\n")
        return line


async def handle(reader, reply):
    lines = []
    while line := await reader.readline():
        lines.append(line)
    reply.set_result(lines)


async def post(data):
    reply = asyncio.get_running_loop().create_future()
    handler = asyncio.ensure_future(handle(Reader(data), reply))
    return await reply
"""

REPLIES = """
import asyncio

import pytest

from server import post


@pytest.mark.asyncio
async def test_async_post():
    assert await post(b"a\\nb") == [b"a", b"b"]


def test_sync_post():
    assert asyncio.run(post(b"a\\nb")) == [b"a", b"b"]
"""


def test_a_test_awaiting_a_reply_names_where_the_other_task_waits(pytester: pytest.Pytester) -> None:
    """The test's task waits for a bare future another task owes it (a server's handler): the
    headline, in pytest's own output, adds where that task waits and its caller, where a fault one
    call up is (found in the aiohttp trial: the handler waited in ``readuntil()``)."""
    pytester.makepyfile(server=SERVER, test_replies=REPLIES)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-p", "asyncio")
    result.assert_outcomes(failed=2)
    wait, readline = line_of(SERVER, "await self.waiter"), line_of(SERVER, "await self._wait()")
    meanwhile = re.compile(
        rf"; meanwhile Task-\d+ \(handle\) waits in _wait\(\) \(\S*server\.py:{wait}\), "
        rf"from readline\(\) \(server\.py:{readline}\) \(mcpdebug timeout"
    )
    hangs = hang_lines(result.stdout.str())
    for name in ("test_async_post", "test_sync_post"):
        assert meanwhile.search(hangs[f"test_replies.py::{name}"]), hangs
    assert len(re.findall(r"^E .*; meanwhile Task-\d+ \(handle\)", result.stdout.str(), re.M)) == 2
    # get_hang: that task's await chain, its innermost calls with their source lines
    reply = tool_text(pytester.path / ".mcpdebug", "get_hang", test="test_sync_post")
    assert f"      server.py:{wait} in _wait(): await self.waiter\n" in reply, reply
    assert f"      server.py:{readline} in readline(): await self._wait()" in reply, reply


def test_a_headline_names_at_most_two_other_waiting_tasks_deepest_first() -> None:
    frame = partial(HangFrame, file="/p/srv.py", line=1)
    shallow = HangTask(
        name="T2",
        coro="idle",
        state="pending",
        awaiting="<Future pending>",
        frames=[frame(function="sleep", library=True), frame(function="idle")],
    )
    deep = HangTask(
        name="T3",
        coro="handle",
        state="pending",
        awaiting="<Future pending>",
        frames=[
            frame(function="_wait", line=9),
            frame(function="readline", line=15),
            frame(function="handle"),
        ],
    )
    parent = HangTask(
        name="T4",
        coro="gather",
        state="pending",
        awaiting="task T3 (handle)",
        frames=[frame(function="gather")],
    )
    done = HangTask(name="T5", coro="x", state="done", frames=[frame(function="x")])
    third = HangTask(
        name="T6",
        coro="logger",
        state="pending",
        awaiting="<Future pending>",
        frames=[frame(function="get", library=True)],
    )
    text = meanwhile([shallow, parent, done, third, deep], short=lambda p: p)
    assert text == (
        "; meanwhile T3 (handle) waits in _wait() (/p/srv.py:9), from readline() (srv.py:15); "
        "T2 (idle) waits in sleep() (/p/srv.py:1), from idle() (srv.py:1) (and 1 more tasks waiting)"
    )
    assert meanwhile([parent, done], short=lambda p: p) == ""
    # both innermost calls a library's (an anyio Event over asyncio's): the project's frame too
    lib = partial(HangFrame, file="/lib/locks.py", line=213, library=True)
    nested = HangTask(
        name="T7",
        coro="run",
        state="pending",
        awaiting="<Future pending>",
        frames=[lib(function="wait"), lib(function="wait", line=2009), frame(function="waiter", line=8)],
    )
    assert meanwhile([nested], short=lambda p: p) == (
        "; meanwhile T7 (run) waits in wait() (/lib/locks.py:213), from wait() (locks.py:2009), "
        "under waiter() (srv.py:8)"
    )


ONE_WORKER = """
from concurrent.futures import ThreadPoolExecutor

POOL = ThreadPoolExecutor(1, thread_name_prefix="pool")  # a one-CPU runner's pool


def nested():
    return POOL.submit(int).result()  # queued behind itself: the only worker waits for ever


def test_nested():
    assert POOL.submit(nested).result() == 0


def test_uses_the_pool_after():
    assert POOL.submit(int).result() == 0
"""


def test_a_hang_that_an_earlier_ones_stuck_thread_holds_names_that_hang(pytester: pytest.Pytester) -> None:
    """The first hang leaves the pool's only worker blocked; the next test that needs it hangs too,
    and its headline says the worker has not moved since the first one hung (found in dask's suite on
    one CPU: three identical "blocked in queue.Queue.get" hangs, the agent read the last first)."""
    pytester.makepyfile(test_pool=ONE_WORKER)
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=2)
    hangs = hang_lines(result.stdout.str())
    since = (
        "; thread 'pool_0' has not moved since test_pool.py::test_nested hung: that hang may hold this one"
    )
    assert since in hangs["test_pool.py::test_uses_the_pool_after"], hangs
    assert "has not moved" not in hangs["test_pool.py::test_nested"], hangs


LEFT_BEHIND = """
import multiprocessing
import subprocess
import sys


def block(lock):
    lock.acquire()
    lock.acquire()  # never: held by itself


def test_joins_a_stuck_child():
    lock = multiprocessing.get_context("fork").Lock()
    child = multiprocessing.get_context("fork").Process(target=block, args=(lock,))  # not a daemon
    child.start()
    child.join()


def test_waits_on_a_stuck_command():
    # the command inherits the run's stdout, as a server or a tool started by a test does
    command = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"])
    command.wait()


def test_after():
    pass
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_what_hung_tests_left_running_is_ended_so_the_run_ends(
    pytester: pytest.Pytester, launcher: str
) -> None:
    """A hung test's child outlives it: a non-daemon ``multiprocessing`` child held pytest's exit
    for ever (its exit joins them), and any child kept the run's output pipe open, so `pytest | tee`
    never ended (found with billiard's pool in the trials). After the session they are ended, and
    the run says so."""
    pytester.makepyfile(test_left=LEFT_BEHIND)
    command = [sys.executable, "-m", "pytest"] if launcher == "module" else [str(PYTEST_SCRIPT)]
    done = subprocess.run(  # pipes, read to their end, as a shell pipeline or CI's log reads them
        [*command, *FAST, "--mcp-debug", "--mcp-debug-timeout=1", *QUICK, "-q"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=INNER_DEADLINE,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout, done.stdout
    ended = re.search(r"^mcpdebug: ended what hung tests left running: (.*)$", done.stderr, re.M)
    assert ended is not None, done.stderr
    pids = [int(pid) for pid in re.findall(r"child (\d+) \(", ended[1])]
    assert len(pids) == 2, ended[1]
    for pid in pids:  # gone, or a zombie until init reaps it
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_every_attempt_of_a_rerun_test_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_r="""
        import time
        from pathlib import Path

        MARK = Path(__file__).with_name("hung-once")

        def test_hangs_then_passes():
            if not MARK.exists():
                MARK.write_text("1")
                time.sleep(100)

        def test_fails_twice():
            assert 1 == 2
        """
    )
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK, "-p", "rerunfailures", "--reruns", "1")
    result.assert_outcomes(failed=1, passed=1)
    assert result.parseoutcomes()["rerun"] == 2
    store = pytester.path / ".mcpdebug"
    tests = tool_text(store, "list_tests")
    assert re.search(r"^passed .* test_r\.py::test_hangs_then_passes$", tests, re.M), tests
    reply = tool_text(store, "get_failure", test="test_hangs_then_passes")
    assert "Attempts (2); the last is the outcome pytest reports:" in reply
    assert re.search(
        r"^- 1\. rerun \(call\) in .*: .*HangTimeout: blocked in `time.sleep\(100\)`", reply, re.M
    )
    assert re.search(
        r"^  hung: blocked in `time.sleep\(100\)` at line 9 of test_hangs_then_passes", reply, re.M
    )
    assert re.search(r"^- 2\. passed in ", reply, re.M), reply
    reply = tool_text(store, "get_failure", test="test_fails_twice")
    assert re.search(r"^- 1\. rerun \(call\) in .*: assert 1 == 2$", reply, re.M), reply
    assert re.search(r"^- 2\. failed \(call\) in .*: assert 1 == 2$", reply, re.M), reply


def test_last_failed_and_stepwise_runs_are_recorded_as_they_ran(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_l="""
        def test_ok():
            pass

        def test_bad():
            assert False

        def test_later():
            pass
        """
    )
    store = pytester.path / ".mcpdebug"

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(
            "-p", "no:hypothesispytest", "-p", "no:randomly", "--mcp-debug", *args, timeout=60
        )

    run("--sw").assert_outcomes(failed=1, passed=1)  # stops at the first failure
    run("--lf").assert_outcomes(failed=1, passed=0)
    tests = tool_text(store, "list_tests")
    assert re.search(r"^FAILED .* test_l\.py::test_bad - assert False$", tests, re.M), tests
    assert "test_ok" not in tests, tests
    run("--sw").assert_outcomes(failed=1)  # starts again at the failing test, stops there
    tests = tool_text(store, "list_tests")
    assert "test_ok" not in tests and "test_later" not in tests and "test_bad" in tests, tests
