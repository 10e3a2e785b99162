"""An event loop the hung test waits on from another thread.

The test joins the thread that runs the loop (``threading.Thread(target=asyncio.run, ...)``) or waits
on a future that loop is to complete (anyio's blocking portal, ``run_coroutine_threadsafe``). Its own
thread sits in ``Thread.join`` or ``Condition.wait``, the loop's thread in ``select()``: neither says
where the waiting really is. That is in the loop's tasks, followed down what they await (`tasks`),
as for an async test's own loop.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import tasks as async_tasks
from pytest_mcpdebug.hangs import waits
from pytest_mcpdebug.protocol import HangFrame


@dataclass
class LoopThread:
    name: str
    state: async_tasks.AsyncState
    blocked: async_tasks.Blocked
    """Where its task waits, in the project's code."""


def waited_loop(
    test_frame: FrameType,
    frames: dict[int, FrameType],
    names: dict[int, str],
    future: concurrent.futures.Future[Any] | None,
    *,
    frames_of: Callable[[tuple[classifier.Frame, ...]], list[HangFrame]],
    is_library: Callable[[str], bool],
) -> LoopThread | None:
    """The thread running an event loop the test waits on, with its task waiting in the project's
    code: the thread the test joins, else the one whose loop runs the task ``future`` mirrors
    (``run_coroutine_threadsafe``), else the only such thread; None rather than a guess among several
    (a loop thread an earlier hung test left behind still waits too)."""
    joined = waits.joined_thread(test_frame)
    wanted = joined.ident if joined is not None else None
    mirrored = waits.mirrored_task(future)
    loop = mirrored.get_loop() if mirrored is not None else None
    candidates: dict[int, LoopThread] = {}
    for ident, frame in frames.items():
        name = names.get(ident)
        running = async_tasks.loop_of(frame)
        if frame is test_frame or name is None or running is None:
            continue  # the test's own thread, the plugin's threads (not named), a thread without a loop
        if loop is not None and running is loop:
            wanted = ident
        state = async_tasks.state(frame, None, frames_of=frames_of, is_library=is_library)
        blocked = state.blocked if state is not None else None
        if blocked is None or is_library(blocked.frame.f_code.co_filename):  # its main task is the
            waiting = async_tasks.waiting_in_project(running, is_library)  # library's (a portal's)
            blocked = waiting[0] if waiting else None
        if state is not None and blocked is not None:
            candidates[ident] = LoopThread(name, state, blocked)
    if wanted is not None:
        return candidates.get(wanted)
    return next(iter(candidates.values())) if len(candidates) == 1 else None
