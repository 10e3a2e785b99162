"""What a waiting test waits on, across a boundary: the worker running its future, or a child process.

A test blocked in ``fut.result()``, ``executor.map``, ``pool.map`` or ``subprocess.run`` is only as
stuck as the thread or process doing the work. This module finds that worker from the live objects
of the test's frames (the future, the ``Popen``), in this process's threads (the work item a
``ThreadPoolExecutor`` thread runs) or among the descendants py-spy has read, and says where it is:
the hang's headline names the worker's line, with the test's own line after it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import processes as outside
from pytest_mcpdebug.protocol import HangProcess
from pytest_mcpdebug.values import is_library

_FUTURES: Final = os.sep + os.path.join("concurrent", "futures") + os.sep
_MULTIPROCESSING: Final = os.sep + "multiprocessing" + os.sep


@dataclass
class Worker:
    """The thread or process the test waits on, and where it is."""

    label: str
    """"thread 'ThreadPoolExecutor-0_0' (running the future's work item)", "child 1234 (child.py)"."""
    found: classifier.Classification
    frame: FrameType | None = None
    """The worker thread's frame there (for its locals); None for another process."""


def waited_future(frame: FrameType | None) -> concurrent.futures.Future[Any] | None:
    """The pending future the test's thread waits for (``result()``, ``exception()``, ``wait``,
    ``as_completed``, ``Executor.map``), from the live frames of ``concurrent.futures``."""
    walk = frame
    while walk is not None:
        if _FUTURES in walk.f_code.co_filename:
            local = walk.f_locals
            for value in (local.get("self"), local.get("fut"), *_iterable(local.get("fs"))):
                if isinstance(value, concurrent.futures.Future) and not value.done():
                    return value
        walk = walk.f_back
    return None


def joined_thread(frame: FrameType | None) -> threading.Thread | None:
    """The thread the test's thread joins, if it is in ``Thread.join``."""
    while frame is not None:
        if frame.f_code.co_name == "join" and frame.f_code.co_filename.endswith("threading.py"):
            thread = frame.f_locals.get("self")
            return thread if isinstance(thread, threading.Thread) else None
        frame = frame.f_back
    return None


def chained_future(future: asyncio.Future[Any] | None) -> concurrent.futures.Future[Any] | None:
    """The ``concurrent.futures`` future an asyncio future mirrors (``wrap_future``,
    ``run_in_executor``): asyncio links them with callbacks that hold the source in a closure."""
    callbacks = [c[0] if isinstance(c, tuple) else c for c in getattr(future, "_callbacks", None) or ()]
    return next(
        (v for v in _held_by(callbacks) if isinstance(v, concurrent.futures.Future) and not v.done()), None
    )


def mirrored_task(future: concurrent.futures.Future[Any] | None) -> asyncio.Future[Any] | None:
    """The asyncio task (or future) a ``concurrent.futures`` future mirrors
    (``run_coroutine_threadsafe``): the other direction of `chained_future`."""
    held = _held_by(getattr(future, "_done_callbacks", None) or ())
    return next((v for v in held if isinstance(v, asyncio.Future)), None)


def _held_by(callbacks: Iterable[Any]) -> Iterator[Any]:
    """What the callbacks' closures hold."""
    for callback in callbacks:
        for cell in getattr(callback, "__closure__", None) or ():
            try:
                yield cell.cell_contents
            except ValueError:  # an empty cell
                continue


def future_worker(
    future: concurrent.futures.Future[Any], frames: dict[int, FrameType], names: dict[int, str]
) -> Worker | None:
    """The ``ThreadPoolExecutor`` thread whose work item sets ``future``, and where it is."""
    for ident, top in frames.items():
        walk: FrameType | None = top
        while walk is not None:
            code = walk.f_code
            if code.co_name == "run" and code.co_filename.endswith(os.path.join("futures", "thread.py")):
                item = walk.f_locals.get("self")
                if getattr(item, "future", None) is future:
                    name = names.get(ident, f"thread {ident:#x}")
                    return Worker(f"thread {name!r} (running the future's work item)", where(top), top)
                break
            walk = walk.f_back
    return None


def waited_child(frame: FrameType | None, children: list[HangProcess]) -> Worker | None:
    """The child process the test waits on: the ``Popen`` it waits for, else (a pool, a process
    executor) the first Python descendant whose main thread is in the project's code."""
    if not children:
        return None
    pid = _popen_pid(frame)
    if pid is not None:
        mine = [c for c in children if c.pid == pid or c.ppid == pid]
        return _child(mine[0]) if mine else None
    if not _waits_on_processes(frame):
        return None
    for child in children:
        if child.python and child.threads and any(not f.library for f in child.threads[0].frames):
            return _child(child)
    return None


def where(frame: FrameType | None) -> classifier.Classification:
    """Where a thread is, seen once: the same words as a hang's headline."""
    stack = _stack(frame)
    return classifier.classify([classifier.Sample(0.0, None, stack)], is_library=is_library)


# Internals ----------------------------------------------------------------------------------------


def _child(process: HangProcess) -> Worker:
    main = process.threads[0] if process.threads else None
    name = _script(process.command)
    label = f"child {process.pid}" + (f" ({name})" if name else "")
    if main is None or not main.frames:
        summary = process.summary or process.error or process.status
        return Worker(label, classifier.Classification("unknown", summary))
    found = classifier.classify([classifier.Sample(0.0, None, outside.stack(main))], is_library=is_library)
    return Worker(label, found)


def _script(command: str) -> str:
    """The program a command line runs, shortly: "child.py", "-m worker", "sleep"."""
    words = command.split()
    if not words:
        return ""
    if os.path.basename(words[0]).startswith(("python", "pypy")):
        for number, word in enumerate(words[1:], 1):
            if word == "-m" and number + 1 < len(words):
                return f"-m {words[number + 1]}"
            if word.startswith("-m") and len(word) > 2:
                return f"-m {word[2:]}"
            if word == "-c":
                return "python -c ..."
            if not word.startswith("-"):
                return os.path.basename(word)
        return os.path.basename(words[0])
    return os.path.basename(words[0])


def _popen_pid(frame: FrameType | None) -> int | None:
    walk = frame
    while walk is not None:
        if walk.f_code.co_filename.endswith("subprocess.py"):
            popen = walk.f_locals.get("self")
            pid = getattr(popen, "pid", None)
            if isinstance(pid, int) and hasattr(popen, "returncode"):
                return pid
            process = walk.f_locals.get("process")
            pid = getattr(process, "pid", None)
            if isinstance(pid, int):
                return pid
        walk = walk.f_back
    return None


def _waits_on_processes(frame: FrameType | None) -> bool:
    walk = frame
    while walk is not None:
        file = walk.f_code.co_filename
        if _MULTIPROCESSING in file or file.endswith(os.path.join("futures", "process.py")):
            return True
        if _FUTURES in file:
            future = walk.f_locals.get("self")
            if isinstance(future, concurrent.futures.Future):
                return True  # a future nothing in this process runs: a process executor's
        walk = walk.f_back
    return False


def _stack(frame: FrameType | None) -> tuple[classifier.Frame, ...]:
    out: list[classifier.Frame] = []
    while frame is not None and len(out) < 40:
        out.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return tuple(out)


def _iterable(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (set, frozenset, list, tuple)):
        return tuple(value)[:100]
    return ()
