"""Hangs on a uvloop event loop, end to end: its loop is C code, with no frame on the thread's stack.

The hang of a test on uvloop (``uvloop.run``, pytest-asyncio with a uvloop loop factory or policy,
anyio's plugin with ``use_uvloop``) is named at the test's ``await`` with the loop's tasks, and the
test is stopped there within the grace period, as on asyncio's own loop (tests/test_hangs_across.py).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest
from test_hangs import QUICK, hang_lines, tool_text
from test_hangs_across import line_of

from helpers import LAUNCHERS, run_inner, run_launched
from pytest_mcpdebug.hangs import native_loops
from pytest_mcpdebug.hangs import tasks as async_tasks

uvloop = pytest.importorskip("uvloop")

ON_UVLOOP = """
import asyncio

import pytest


async def take():
    assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    queue = asyncio.Queue()
    item = await queue.get()
    return item


async def retry_forever():
    assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    tries = 0
    while True:
        tries += 1
        await asyncio.sleep(0)


def test_uvloop_run():
    import uvloop

    uvloop.run(take())


@pytest.mark.asyncio
async def test_pytest_asyncio():
    await take()


@pytest.mark.anyio
async def test_anyio():
    await take()


def test_uvloop_run_spins():
    import uvloop

    uvloop.run(retry_forever())


@pytest.mark.asyncio
async def test_pytest_asyncio_spins():
    await retry_forever()


@pytest.mark.anyio
async def test_anyio_spins():
    await retry_forever()


@pytest.fixture
def anyio_backend():
    return ("asyncio", {"use_uvloop": True})


def test_after():
    pass
"""

# pytest-asyncio 1.x: the loop factory hook (1.4+), or the older `event_loop_policy` fixture (deprecated)
CONFTESTS = {
    "factory": """
import uvloop


def pytest_asyncio_loop_factories(config, item):
    return {"uvloop": uvloop.new_event_loop}
""",
    "policy": """
import pytest
import uvloop


@pytest.fixture(scope="session")
def event_loop_policy():
    return uvloop.EventLoopPolicy()
""",
}
FACTORY_HOOK = tuple(int(p) for p in importlib.metadata.version("pytest-asyncio").split(".")[:2]) >= (1, 4)


@pytest.mark.parametrize(
    ("config", "launcher"), [*(("factory", launcher) for launcher in LAUNCHERS), ("policy", "script")]
)
def test_a_test_on_uvloop_is_named_at_its_await_and_stopped_there(
    pytester: pytest.Pytester, config: str, launcher: str
) -> None:
    """A test waiting on uvloop is named at its ``await`` (not at the runner's line that entered the
    loop) and fails there with the hang; one whose coroutine runs again at once each round is named
    at its loop and cancelled with the hang's message. Both within the grace period, in the same
    process (before, each went on in a fresh process after the grace period)."""
    if config == "factory" and not FACTORY_HOOK:
        pytest.skip("pytest-asyncio's loop factory hook is 1.4's")
    pytester.makepyfile(test_uv=ON_UVLOOP)
    pytester.makeconftest(CONFTESTS[config])
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = run_launched(pytester, launcher, "--mcp-debug-timeout=1", *QUICK, "-p", "asyncio")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=6, passed=1)
    output = result.stdout.str()
    assert "fresh process" not in output  # every test was stopped in its grace period
    hangs = hang_lines(output)
    waits = line_of(ON_UVLOOP, "await queue.get()")
    loop = line_of(ON_UVLOOP, "while True")
    for name in ("test_uvloop_run", "test_pytest_asyncio", "test_anyio"):
        assert hangs[f"test_uv.py::{name}"].startswith(
            f"blocked in `item = await queue.get()` at line {waits} of take() ("
        ), hangs
        assert "the event loop is idle" in hangs[f"test_uv.py::{name}"]
    for name in ("test_uvloop_run_spins", "test_pytest_asyncio_spins", "test_anyio_spins"):
        assert hangs[f"test_uv.py::{name}"].startswith(
            f"busy loop in lines {loop}-{loop + 2} of retry_forever() ("
        ), hangs
        assert "runs again at once each round" in hangs[f"test_uv.py::{name}"]
    errors = [line for line in output.splitlines() if line.startswith("E ")]
    at_await = [line for line in errors if "HangTimeout: blocked in `item = await queue.get()`" in line]
    cancelled = [line for line in errors if "CancelledError: HangTimeout: busy loop in lines" in line]
    assert (len(at_await), len(cancelled)) == (3, 3), errors
    store = pytester.path / ".mcpdebug"
    failure = tool_text(store, "get_failure", test="test_uvloop_run")
    assert re.search(rf"^#\d+ .*test_uv\.py:{waits} in take\(\)$", failure, re.M), failure
    hang = tool_text(store, "get_hang", test="test_uv.py::test_anyio")
    assert "asyncio tasks (" in hang, hang
    calls = line_of(ON_UVLOOP, "async def test_anyio():") + 1
    assert f"    awaits through: test_anyio() (test_uv.py:{calls}) -> take() (test_uv.py:{waits})" in hang, (
        hang
    )


LOOP_THREADS = """
import asyncio
import threading
import time

import uvloop


async def waiter(ev):
    await ev.wait()


async def main():
    await asyncio.create_task(waiter(asyncio.Event()))


def test_joins_a_loop_thread():
    thread = threading.Thread(target=uvloop.run, args=(main(),), daemon=True)
    thread.start()
    thread.join()


def test_waits_on_a_coroutine_in_a_loop_thread():
    loop = uvloop.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(waiter(asyncio.Event()), loop).result()


def test_sleeps_beside_a_loop_thread():
    loop = uvloop.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(waiter(asyncio.Event()), loop)
    time.sleep(60)
"""


def test_a_test_waiting_on_a_uvloop_thread_is_named_at_its_task(pytester: pytest.Pytester) -> None:
    """The loop a test joins or waits on runs in another thread: named at its task's ``await``. A test
    that only holds a running loop (it sleeps beside it) is not taken for that loop's thread."""
    pytester.makepyfile(test_lt=LOOP_THREADS)
    result = run_inner(pytester, "--mcp-debug-timeout=1", *QUICK)
    result.assert_outcomes(failed=3)
    hangs = hang_lines(result.stdout.str())
    await_line = line_of(LOOP_THREADS, "await ev.wait()")
    named = (
        f"(an asyncio event loop), which is blocked in `await ev.wait()` at line {await_line} of waiter() ("
    )
    assert named in hangs["test_lt.py::test_joins_a_loop_thread"], hangs
    assert named in hangs["test_lt.py::test_waits_on_a_coroutine_in_a_loop_thread"], hangs
    sleeps = line_of(LOOP_THREADS, "time.sleep(60)")
    assert hangs["test_lt.py::test_sleeps_beside_a_loop_thread"].startswith(
        f"blocked in `time.sleep(60)` at line {sleeps} of test_sleeps_beside_a_loop_thread() ("
    ), hangs


# The finding itself, on live threads of this process --------------------------------------------


@contextmanager
def loop_thread(loop: asyncio.AbstractEventLoop) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=loop.run_forever, name="loop-under-test", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def frame_of(thread: threading.Thread) -> FrameType | None:
    assert thread.ident is not None
    return sys._current_frames().get(thread.ident)


def until(found: object, get: object, deadline: float = 30.0) -> None:
    """Poll ``get()`` until it is ``found`` (the thread may still be starting its loop)."""
    assert callable(get)
    end = time.monotonic() + deadline
    while get() is not found:
        assert time.monotonic() < end, f"{get()!r} is not {found!r}"
        time.sleep(0.01)


def test_the_thread_running_a_uvloop_is_found_and_not_one_holding_it() -> None:
    loop = uvloop.new_event_loop()
    with loop_thread(loop) as thread:
        until(loop, lambda: async_tasks.loop_of(frame_of(thread)))
        assert native_loops.depth(frame_of(thread)) == 0  # idle in C under Thread.run
        assert async_tasks.idle_in_native_loop(frame_of(thread))
        here = sys._getframe()  # this frame holds `loop` too, and is not running it
        assert async_tasks.loop_of(here) is None


def test_an_asyncio_loop_is_still_found_by_its_frames_alone() -> None:
    loop = asyncio.new_event_loop()
    with loop_thread(loop) as thread:
        until(loop, lambda: async_tasks.loop_of(frame_of(thread)))
        assert native_loops.running_loop(frame_of(thread)) is None  # asyncio's has frames: not C's
        assert not async_tasks.idle_in_native_loop(frame_of(thread))
