"""An event loop written in C (uvloop, winloop) that a thread runs, found without frames of the loop.

asyncio's own loop is Python: a thread running it has ``_run_once``'s frame, which holds the loop
(`tasks.loop_of`). uvloop's ``run_forever`` is Cython: the thread has no frame of the loop, asyncio's
record of a thread's running loop is kept in that thread's own state (out of another thread's
reach), and the loop keeps no thread id a reader in Python sees. What the thread's stack still shows
is who called the loop: its innermost frame while the loop waits in C, else the frame under the
coroutines of the task step it runs. That frame (the *entry*) holds the loop: as a local
(``loop.run_until_complete(...)``), an attribute of one (asyncio's ``Runner``, which ``uvloop.run``
and pytest-asyncio use: ``self._loop``; anyio's test runner: ``self._runner._loop``) or a bound
method's object (``Thread(target=loop.run_forever)``).

A frame may also hold a loop another thread runs (a test that sleeps beside the ``loop`` it started in
a thread): when the entries of several threads hold one loop, it is the one whose line calls into a
loop (``run_until_complete``, ``run_forever``, a thread's target), and no guess if that does not
decide. Nothing here imports uvloop: it only looks at the objects the frames hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import linecache
import re
import sys
import time
import types
from collections.abc import Iterator
from types import FrameType
from typing import Any, Final

# Limits
MAX_OBJECTS: Final = 300
"""Objects looked at from one entry frame's locals (its locals, their attributes, theirs)."""
HOPS: Final = 2
"""Attributes followed from a local: ``self._runner._loop`` is two."""
# Timeouts
SETTLE: Final = 0.05
"""How long a report waits for a loop's thread to end the task step it is in (`between_steps`)."""

_ASYNC: Final = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR
_CALLS_A_LOOP: Final = re.compile(r"\b(run_until_complete|run_forever)\s*\(|\b_target\s*\(")
_NOT_INSTANCES: Final = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def entry_frame(frame: FrameType | None) -> FrameType | None:
    """The frame that would have called an event loop written in C: the first frame under the
    coroutines of a running task step (and what they called), else the innermost frame."""
    walk = frame
    while walk is not None and not walk.f_code.co_flags & _ASYNC:
        walk = walk.f_back
    if walk is None:
        return frame  # no coroutine runs: the loop, if any, waits in C under the innermost frame
    while walk is not None and walk.f_code.co_flags & _ASYNC:
        walk = walk.f_back
    return walk


def running_loop(frame: FrameType | None) -> asyncio.AbstractEventLoop | None:
    """The event loop written in C that the thread at ``frame`` runs, if any."""
    entry = entry_frame(frame)
    if entry is None:
        return None
    for loop in _held_loops(entry):
        if _runs_it(entry, loop):
            return loop
    return None


def depth(frame: FrameType | None) -> int | None:
    """How many frames sit above the one that runs a loop written in C (0: the loop waits in C under
    the innermost frame), None when the thread runs no such loop."""
    entry = entry_frame(frame)
    if entry is None or running_loop(frame) is None:
        return None
    count, walk = 0, frame
    while walk is not None and walk is not entry:
        count, walk = count + 1, walk.f_back
    return count if walk is entry else None


def between_steps(thread: int, frame: FrameType) -> FrameType:
    """The thread's frame once its loop written in C is between two task steps, if it is in the
    middle of one at ``frame`` (else ``frame``): a step's coroutine frames lose their callers as soon
    as it ends, and a report read from them would not find the loop under them. Given up after
    `SETTLE` (a step that never ends is a busy coroutine: its frames stay)."""
    found = depth(frame)
    if not found:  # no such loop, or between steps already
        return frame
    end = time.monotonic() + SETTLE
    while time.monotonic() < end:
        time.sleep(0.0005)  # the GIL to the loop's thread: its step ends
        now = sys._current_frames().get(thread)
        if now is None:
            return frame
        if depth(now) == 0:
            return now
        frame = now
    return frame


def started_task(frame: FrameType | None, loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any] | None:
    """The pending task the thread's loop was started with, when the entry frame holds it (asyncio's
    ``Runner.run``: its local ``task``, given to the loop's ``run_until_complete``)."""
    entry = entry_frame(frame)
    if entry is None:
        return None
    with contextlib.suppress(Exception):  # a frame's locals read while its thread runs on
        for value in list(entry.f_locals.values()):
            if issubclass(type(value), asyncio.Task):
                task: asyncio.Task[Any] = value
                if task.get_loop() is loop and not task.done():
                    return task
    return None


# Internals ----------------------------------------------------------------------------------------


def _held_loops(entry: FrameType) -> list[asyncio.AbstractEventLoop]:
    """The running loops, not asyncio's own (those have frames), that ``entry`` holds within `HOPS`."""
    found: list[asyncio.AbstractEventLoop] = []
    for value in _reachable(entry):
        kind = type(value)
        if (
            issubclass(kind, asyncio.AbstractEventLoop)
            and not issubclass(kind, asyncio.BaseEventLoop)
            and all(value is not seen for seen in found)
            and _is_running(value)
        ):
            found.append(value)
    return found


def _reachable(entry: FrameType) -> Iterator[Any]:
    """The values of ``entry``'s locals, their attributes and theirs (`HOPS`), a bound method's
    object for the method; at most `MAX_OBJECTS`, each once."""
    try:
        level = list(entry.f_locals.values())
    except Exception:  # a frame's locals read while its thread runs on
        return
    seen: set[int] = set()
    for hop in range(HOPS + 1):
        following: list[Any] = []
        for value in level:
            if type(value) is types.MethodType:
                value = value.__self__
            if id(value) in seen or issubclass(type(value), _NOT_INSTANCES):
                continue
            seen.add(id(value))
            if len(seen) > MAX_OBJECTS:
                return
            yield value
            if hop < HOPS:
                following.extend(_attributes(value))
        level = following


def _attributes(value: Any) -> list[Any]:
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return []
    if not isinstance(attributes, dict):
        return []
    with contextlib.suppress(RuntimeError):  # changed by its thread meanwhile
        return list(attributes.values())
    return []


def _is_running(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return bool(loop.is_running()) and not loop.is_closed()
    except Exception:
        return False


def _runs_it(entry: FrameType, loop: asyncio.AbstractEventLoop) -> bool:
    """Is ``entry``'s thread the one running ``loop``? Yes if no other thread's entry holds it; else
    if its line, and no other's, calls into a loop."""
    others = []
    for frame in list(sys._current_frames().values()):
        other = entry_frame(frame)
        if other is None or other is entry:
            continue
        if any(held is loop for held in _held_loops(other)):
            others.append(other)
    if not others:
        return True
    return _calls_a_loop(entry) and not any(_calls_a_loop(other) for other in others)


def _calls_a_loop(frame: FrameType) -> bool:
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return bool(_CALLS_A_LOOP.search(line))
