"""The sender thread follows the test thread's CPU (`recording.colocate`), and only its own affinity changes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import cast

import pytest

from pytest_mcpdebug.recording.colocate import Colocation, _last_cpu

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two CPUs"
)


def in_thread(work: object) -> object:
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(work()))  # type: ignore[operator]
    thread.start()
    thread.join(60)
    return result[0]


def test_the_background_thread_moves_to_the_test_threads_cpu_and_back() -> None:
    everywhere = os.sched_getaffinity(0)
    colocation = Colocation()

    def follow_then_release() -> tuple[set[int], int, set[int]]:
        stat = os.open(f"/proc/self/task/{threading.main_thread().native_id}/stat", os.O_RDONLY)
        try:
            # The test thread blocks in join() on the CPU it last ran on, but it may still be on its way
            # there (woken by start(), moved by a loaded scheduler): look until it stayed put throughout.
            for _ in range(100):
                before = _last_cpu(stat)
                colocation.follow()
                pinned = os.sched_getaffinity(0)
                main_cpu = _last_cpu(stat)
                if main_cpu == before:
                    break
                time.sleep(0.01)
        finally:
            os.close(stat)
        colocation.release()
        colocation.close()
        return pinned, main_cpu, os.sched_getaffinity(0)

    pinned, main_cpu, released = cast("tuple[set[int], int, set[int]]", in_thread(follow_then_release))
    assert len(pinned) == 1
    assert pinned <= everywhere
    assert pinned == {main_cpu}  # the CPU the test thread last ran on
    assert released == everywhere
    assert os.sched_getaffinity(0) == everywhere, "the test thread's own affinity is never touched"


def test_a_thread_that_cannot_be_read_turns_it_off_quietly() -> None:
    gone = cast("threading.Thread", SimpleNamespace(native_id=2**31 - 1))
    colocation = Colocation(gone)
    in_thread(colocation.follow)
    assert not colocation.enabled
    in_thread(colocation.follow)  # and stays a no-op


def test_what_the_thread_starts_unpinned_runs_anywhere_and_the_thread_is_pinned_again() -> None:
    everywhere = os.sched_getaffinity(0)
    colocation = Colocation()

    def start_a_process() -> tuple[set[int], set[int], set[int]]:
        colocation.follow()
        pinned = os.sched_getaffinity(0)
        with colocation.unpinned():
            child = subprocess.Popen(
                [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
            )
        try:
            started = os.sched_getaffinity(child.pid)
        finally:
            child.communicate(timeout=30)
        after = os.sched_getaffinity(0)
        colocation.release()
        colocation.close()
        return pinned, started, after

    pinned, started, after = cast("tuple[set[int], set[int], set[int]]", in_thread(start_a_process))
    assert len(pinned) == 1
    assert started == everywhere, "the process inherited the sender thread's pin"
    assert after == pinned, "the thread went back to the test thread's CPU"
