"""The asyncio side of a hang: the test's own task, what it awaits, and how to interrupt it there.

An async test (pytest-asyncio, anyio's plugin, or ``asyncio.run`` in a sync test) that waits leaves
its thread idle in the event loop's ``select()``: the thread's stack says nothing about the test. The
test's coroutine is found among the loop's tasks (the one whose await chain runs the test's
function, else the task the loop was started with), and followed down what it awaits: its own
coroutines, then a task it awaits, and so on. The hang is at the deepest frame of the project on
that path, with that coroutine's locals.

Interrupting there, rather than in ``select()``, gives the test's failure the coroutine frames a
sync test's has: the exception is set on the future the innermost task waits for, from the loop's
own thread (`interrupt`), and travels up the awaits to the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import native_loops
from pytest_mcpdebug.protocol import HangFrame, HangTask

# Limits
MAX_TASKS: Final = 30
MAX_DEPTH: Final = 40
"""Coroutine frames followed per task, and tasks followed down an await chain."""
MAX_MEANWHILE: Final = 2
"""Other waiting tasks a headline names."""

TestFunction = tuple[str, str]
"""(absolute file, function name) of the test being timed."""


@dataclass
class Blocked:
    """Where the test's task waits: the deepest frame of the project on its await path."""

    frame: FrameType
    task: str
    """The task that frame runs in."""
    path: list[str] = field(default_factory=list)
    """Tasks followed from the test's own task to the innermost one (names)."""
    awaiting: str = ""
    """What the innermost task waits for (a future's repr)."""
    ids: set[int] = field(default_factory=set)
    """The ``id()`` of each task on the path (names may repeat: Python 3.10's pure-Python tasks, as
    pytest-asyncio's runner backport makes them, count apart from C tasks)."""


@dataclass
class AsyncState:
    tasks: list[HangTask]
    blocked: Blocked | None
    leaf: asyncio.Future[Any] | None = None
    """The future at the end of the test's await path (it may mirror a ``concurrent.futures`` one)."""
    others: list[HangTask] = field(default_factory=list)
    """The tasks not on the test's await path."""
    ids: list[int] = field(default_factory=list)
    """The ``id()`` of each task in ``tasks``, in order (to tell same-named tasks apart)."""

    def not_on(self, path: Blocked) -> list[HangTask]:
        """The tasks that are not on ``path`` (another task's await path than the test's)."""
        return [shown for shown, ident in zip(self.tasks, self.ids, strict=True) if ident not in path.ids]


def loop_of(frame: FrameType | None) -> asyncio.AbstractEventLoop | None:
    """The event loop the thread at ``frame`` runs: asyncio's is found on its stack, one written in C
    (uvloop) held by the frame that called it (`native_loops`)."""
    walk = frame
    while walk is not None:
        if walk.f_code.co_name in ("_run_once", "run_forever"):
            candidate = walk.f_locals.get("self")
            if isinstance(candidate, asyncio.AbstractEventLoop):
                return candidate
        walk = walk.f_back
    return native_loops.running_loop(frame)


def idle_in_native_loop(frame: FrameType | None) -> bool:
    """Does the thread at ``frame`` wait in an event loop written in C (no frame of it, no task step
    running)? asyncio's idle loop is seen in ``select()`` instead."""
    return native_loops.depth(frame) == 0


def state(
    frame: FrameType,
    test: TestFunction | None,
    *,
    frames_of: Callable[[tuple[classifier.Frame, ...]], list[HangFrame]],
    is_library: Callable[[str], bool],
) -> AsyncState | None:
    """The loop's tasks and where the test's task waits; None if the thread runs no event loop."""
    loop = loop_of(frame)
    if loop is None:
        return None
    tasks = _all_tasks(loop)
    out = []
    for task in tasks[:MAX_TASKS]:
        chain = _coroutine_frames(task)
        out.append(
            HangTask(
                name=task.get_name(),
                coro=getattr(task.get_coro(), "__qualname__", repr(task.get_coro())),
                state="done" if task.done() else "pending",
                awaiting=_describe(getattr(task, "_fut_waiter", None)),
                frames=frames_of(tuple(_frame_tuple(f) for f in reversed(chain))),
            )
        )
    root = test_task(tasks, frame, test)
    blocked = _blocked(root, is_library) if root is not None else None
    ids = [id(task) for task in tasks[:MAX_TASKS]]
    on_path = blocked.ids if blocked is not None else set()
    others = [shown for shown, ident in zip(out, ids, strict=True) if ident not in on_path]
    return AsyncState(out, blocked, _leaf(root) if root is not None else None, others, ids)


def waiting_in_project(loop: asyncio.AbstractEventLoop, is_library: Callable[[str], bool]) -> list[Blocked]:
    """The loop's pending tasks that wait for a future (not a task) in the project's code, each at
    its deepest frame of the project: where a loop no test runs (a portal's, a service's) is stuck."""
    out = []
    for task in _all_tasks(loop)[:MAX_TASKS]:
        waiter = getattr(task, "_fut_waiter", None)
        if task.done() or waiter is None or isinstance(waiter, asyncio.Task):
            continue
        mine = [f for f in _coroutine_frames(task) if not is_library(f.f_code.co_filename)]
        if mine:
            out.append(Blocked(mine[-1], task.get_name(), [task.get_name()], _describe(waiter), {id(task)}))
    return out


def test_task(
    tasks: list[asyncio.Task[Any]], frame: FrameType | None, test: TestFunction | None
) -> asyncio.Task[Any] | None:
    """The task running the test: the one whose coroutines include the test's function, else the one
    the loop was started with (``run_until_complete``'s), else the first pending one."""
    pending = [t for t in tasks if not t.done()]
    if test is not None:
        for task in pending:
            if any(_is_test(f, test) for f in _coroutine_frames(task)):
                return task
    walk = frame
    while walk is not None:
        if walk.f_code.co_name == "run_until_complete":
            started = walk.f_locals.get("future")
            if isinstance(started, asyncio.Task) and not started.done():
                return started
        walk = walk.f_back
    loop = tasks[0].get_loop() if tasks else None
    if loop is not None and not isinstance(loop, asyncio.BaseEventLoop):  # no frame of its own
        started = native_loops.started_task(frame, loop)
        if started is not None:
            return started
    return pending[0] if pending else None


def interrupt(
    frame: FrameType | None,
    test: TestFunction | None,
    exc: type[BaseException],
    delivered: Callable[[], None],
) -> bool:
    """Raise ``exc`` where the test's task waits, from the loop's thread: True if it was scheduled (the
    loop is alive and the test's task waits for a future, or runs again at once each round);
    ``delivered`` is called once it is. Called from the watchdog's thread.

    A task that waits for no future (a loop on ``await asyncio.sleep(0)``) has nowhere to take an
    exception: it is cancelled, with the hang's message, between two of its steps. (Interrupting its
    thread instead can land in asyncio's own code between steps, which logs the exception and never
    schedules the task again: the test's teardown then waits for it for ever.)"""
    loop = loop_of(frame)
    if loop is None or loop.is_closed():
        return False
    root = test_task(_all_tasks(loop), frame, test)
    spinning = root is not None and not root.done() and getattr(root, "_fut_waiter", None) is None
    if root is None or (_leaf(root) is None and not spinning):
        return False

    def deliver() -> None:  # on the loop's thread: the task may have moved on since
        leaf = _leaf(root)
        if leaf is not None and not leaf.done():
            leaf.set_exception(exc())
            delivered()
        elif not root.done() and getattr(root, "_fut_waiter", None) is None:
            root.cancel(f"{exc.__name__}: {getattr(exc, 'message', '')}")
            delivered()

    try:
        loop.call_soon_threadsafe(deliver)
    except RuntimeError:  # closed meanwhile
        return False
    return True


def meanwhile(tasks: list[HangTask], short: Callable[[str], str]) -> str:
    """The other tasks that wait too, for a headline whose test task awaits a bare future (a reply
    another task owes it: a server's handler, a reader's): "; meanwhile Task-5 (handle) waits in
    _wait() (aiohttp/streams.py:372), from readuntil() (streams.py:411)". Each at its innermost
    frame and that frame's caller (and the project's innermost frame when both are a library's),
    deepest in the project's code first; at most two, then a count.
    ``tasks``: those not on the test's await path. Tasks that wait for a task are left out: the task
    they wait for is listed itself."""
    others = [
        t
        for t in tasks
        if t.state == "pending" and t.frames and t.awaiting and not t.awaiting.startswith(AWAITS_A_TASK)
    ]
    if not others:
        return ""
    others.sort(key=lambda t: (sum(not f.library for f in t.frames), len(t.frames)), reverse=True)
    shown = []
    for task in others[:MAX_MEANWHILE]:
        inner = task.frames[0]  # innermost first
        text = f"{task.name} ({task.coro}) waits in {inner.function}() ({short(inner.file)}:{inner.line})"
        if len(task.frames) > 1:
            caller = task.frames[1]
            text += f", from {caller.function}() ({os.path.basename(caller.file)}:{caller.line})"
        mine = next((f for f in task.frames[2:] if not f.library), None)
        if mine is not None and task.frames[0].library and task.frames[1].library:  # whose wait it is
            text += f", under {mine.function}() ({os.path.basename(mine.file)}:{mine.line})"
        shown.append(text)
    more = len(others) - len(shown)
    return "; meanwhile " + "; ".join(shown) + (f" (and {more} more tasks waiting)" if more else "")


# Internals ----------------------------------------------------------------------------------------


def _all_tasks(loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[Any]]:
    for _ in range(3):  # the task set may change under us (another thread runs the loop): try again
        try:
            return list(asyncio.all_tasks(loop))
        except RuntimeError:
            continue
    return []


def _coroutine_frames(task: asyncio.Task[Any]) -> list[FrameType]:
    """The frames a task is suspended in, outermost (the task's coroutine) first; for a task caught
    in the middle of a step, the frames it runs in on its thread's stack."""
    out: list[FrameType] = []
    current: Any = task.get_coro()
    for _ in range(MAX_DEPTH):
        frame = getattr(current, "cr_frame", None) or getattr(current, "gi_frame", None)
        if frame is None:
            break
        out.append(frame)
        awaited = getattr(current, "cr_await", None) or getattr(current, "gi_yieldfrom", None)
        if awaited is None:
            if getattr(current, "cr_running", False) or getattr(current, "gi_running", False):
                out.extend(_running_above(frame)[: MAX_DEPTH - len(out)])
            break
        current = awaited
    return out


def _running_above(frame: FrameType) -> list[FrameType]:
    """The frames above ``frame`` on the stack of the thread running it, outermost first: the report
    is read while the loop's thread runs on, and may catch a task in the middle of a step."""
    for top in list(sys._current_frames().values()):
        above: list[FrameType] = []
        walk: FrameType | None = top
        while walk is not None and walk is not frame and len(above) < MAX_DEPTH:
            above.append(walk)
            walk = walk.f_back
        if walk is frame:
            return above[::-1]
    return []


def _awaited_task(task: asyncio.Task[Any], *, groups: bool = False) -> asyncio.Task[Any] | None:
    """The task ``task`` waits for, if it waits for one (``await task``, or one of a gather's; with
    ``groups``, a task group's child its ``async with`` waits for at its end). An interruption goes
    to the group's own future, not a child's: the test then fails with the hang, not with a group
    of exceptions."""
    waiter = getattr(task, "_fut_waiter", None)
    if isinstance(waiter, asyncio.Task):
        return waiter
    for child in getattr(waiter, "_children", None) or ():  # asyncio.gather
        if isinstance(child, asyncio.Task) and not child.done():
            return child
    return _group_child(task) if groups else None


def _group_child(task: asyncio.Task[Any]) -> asyncio.Task[Any] | None:
    """A child the task waits for at the end of a task group's ``async with`` (asyncio's TaskGroup,
    anyio's): the group's exit awaits a future of its own, its pending tasks are what keep it."""
    for frame in _coroutine_frames(task):
        if frame.f_code.co_name != "__aexit__":
            continue
        children = getattr(frame.f_locals.get("self"), "_tasks", None)
        with contextlib.suppress(Exception):  # a set changing under us, a `_tasks` of another kind
            pending = [t for t in list(children or ()) if isinstance(t, asyncio.Task) and not t.done()]
            if pending:
                return pending[0]
    return None


def _leaf(task: asyncio.Task[Any]) -> asyncio.Future[Any] | None:
    """The future at the end of the await path (a plain future, not a task), if it is pending."""
    seen: set[int] = set()
    while id(task) not in seen and len(seen) < MAX_DEPTH:
        seen.add(id(task))
        nxt = _awaited_task(task)
        if nxt is None:
            waiter = getattr(task, "_fut_waiter", None)
            if isinstance(waiter, asyncio.Future) and not isinstance(waiter, asyncio.Task):
                return None if waiter.done() else waiter
            return None
        task = nxt
    return None


def _blocked(root: asyncio.Task[Any], is_library: Callable[[str], bool]) -> Blocked | None:
    """The deepest frame of the project on the await path from ``root`` (else the deepest frame)."""
    project: Blocked | None = None
    deepest: Blocked | None = None
    path: list[str] = []
    ids: set[int] = set()
    task, last = root, root
    while len(path) < MAX_DEPTH and id(task) not in ids:
        path.append(task.get_name())
        ids.add(id(task))
        last = task
        for frame in _coroutine_frames(task):
            deepest = Blocked(frame, task.get_name())
            if not is_library(frame.f_code.co_filename):
                project = deepest
        nxt = _awaited_task(task, groups=True)
        if nxt is None or task.done():
            break
        task = nxt
    found = project or deepest
    if found is not None:
        found.path, found.ids = path, ids
        found.awaiting = _describe(getattr(last, "_fut_waiter", None))
    return found


def _is_test(frame: FrameType, test: TestFunction) -> bool:
    code = frame.f_code
    return code.co_name == test[1] and os.path.abspath(code.co_filename) == test[0]


def _frame_tuple(frame: FrameType) -> classifier.Frame:
    return (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


AWAITS_A_TASK: Final = "task "
"""How `_describe` starts a task awaited."""


def _describe(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, asyncio.Task):
        return f"{AWAITS_A_TASK}{value.get_name()} ({getattr(value.get_coro(), '__qualname__', '?')})"
    with contextlib.suppress(Exception):
        text = repr(value)
        return text if len(text) <= 200 else text[:200] + "..."
    return type(value).__name__
