"""A hang report, built in the hung process from its own live state at the deadline.

Every thread's stack (absolute paths, lines, functions, source), the locals of the frame where the
test's thread loops or waits, the asyncio tasks of an event loop it runs and where each waits, the
last lines it wrote, CPU time against wall time, and the classification of the watchdog's samples
(`classifier.classify`). A thread the test's thread joins is followed, so "blocked in Thread.join" also
says what the joined thread is stuck in.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from types import FrameType
from typing import Any, Final

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import loop_threads, native_loops, waits
from pytest_mcpdebug.hangs import processes as outside
from pytest_mcpdebug.hangs import tasks as async_tasks
from pytest_mcpdebug.hangs.redacted import without_secrets
from pytest_mcpdebug.protocol import HangFrame, HangProcess, HangReport, HangTask, HangThread
from pytest_mcpdebug.values import VarBuilder, is_library

# Limits
MAX_FRAMES: Final = 40
"""Frames kept per thread (the innermost)."""
MAX_THREADS: Final = 30
WINDOW: Final = 50
"""Samples classified: the last ones (5 s at the default interval)."""
OWN_THREADS: Final = "mcpdebug-"


SPINNING_CPU: Final = 0.05
"""CPU share (of wall time) above which an event loop that looks idle is taken to be spinning."""


def stack_of(frame: FrameType | None, limit: int = MAX_FRAMES) -> tuple[classifier.Frame, ...]:
    """A frame and its callers as (file, line, function), innermost first, down to pytest's session
    (what launched pytest is no part of a hang: `classify.is_session_entry`)."""
    out: list[classifier.Frame] = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        out.append((code.co_filename, frame.f_lineno, code.co_name))
        if classifier.is_session_entry(code.co_filename, code.co_name):
            break
        frame = frame.f_back
    return tuple(out)


def build(
    *,
    thread_id: int,
    samples: Sequence[classifier.Sample],
    started: float,
    timeout: float,
    interval: float,
    cpu_start: float | None,
    clock: int | None,
    action: str,
    output: Callable[[], list[str]] | None = None,
    frame: FrameType | None = None,
    test: async_tasks.TestFunction | None = None,
    exclude_pids: Collection[int] = (),
) -> HangReport:
    """``frame``: where the test's thread is, when the caller knows better than its current stack
    (a signal handler running in that thread knows the frame it interrupted). ``test``: the test's
    function, to find its coroutine among an event loop's tasks. ``exclude_pids``: child processes
    of the plugin's own (not the test's)."""
    frames = sys._current_frames()
    if frame is not None:
        frames[thread_id] = frame
    elif thread_id in frames:  # a loop written in C (uvloop) in the middle of a task step: read
        frames[thread_id] = native_loops.between_steps(thread_id, frames[thread_id])  # between two
    test_frame = frames.get(thread_id)
    now = time.monotonic()
    cpu_now = _cpu(clock)
    window = [*samples[-WINDOW:]]
    still = _unchanged_tail(samples)
    if still > len(window):  # at one place since before the window: "for the last N s" says how long
        window = [*samples[-still:]]
    if test_frame is not None:
        window.append(classifier.Sample(now, cpu_now, stack_of(test_frame)))
    if 0 < len(window) < 3 and cpu_start is not None:
        # A timeout shorter than a few intervals leaves too few samples to tell CPU from waiting: the
        # CPU time since the start of the test stands in, with the first stack seen.
        window.insert(0, classifier.Sample(started, cpu_start, window[0].stack))
    found = classifier.classify(window, is_library=is_library)
    threads = _threads(frames, thread_id, started, cpu_start, cpu_now)
    descendants = outside.survey(exclude=exclude_pids)
    found, summary, tasks, chosen, locals_from = _followed(
        found, test_frame, test, frames, threads, descendants
    )
    variables, children, whose = _locals(locals_from, found, chosen)
    report = HangReport(
        kind=found.kind,
        summary=summary,
        file=os.path.abspath(found.file) if found.file else "",
        function=found.function,
        line=found.line,
        lines=found.lines,
        call=found.call,
        wait_kind=found.wait_kind,
        since=found.since,
        timeout=timeout,
        elapsed=now - started,
        cpu=None if cpu_now is None or cpu_start is None else cpu_now - cpu_start,
        phase=_phase(test_frame),
        samples=len(samples),
        interval=interval,
        action=action,
        threads=threads,
        locals=variables,
        locals_frame=whose,
        children=children,
        tasks=tasks,
        processes=descendants,
        output=_output(output),
        source=_source(found.file, found.line),
    )
    return without_secrets(report)


def _followed(
    found: classifier.Classification,
    test_frame: FrameType | None,
    test: async_tasks.TestFunction | None,
    frames: dict[int, FrameType],
    threads: list[HangThread],
    descendants: list[HangProcess],
) -> tuple[classifier.Classification, str, list[HangTask], FrameType | None, FrameType | None]:
    """Follow what the hung test waits on (its awaited task, a future's worker thread, a child
    process) to where the waiting really is: the diagnosis, its headline, the event loop's tasks, the
    frame whose locals to show (or where to take them from)."""
    summary = found.summary
    tasks: list[HangTask] = []
    chosen: FrameType | None = None
    locals_from = test_frame
    if test_frame is None:
        return found, summary, tasks, chosen, locals_from
    idle = found.wait_kind in ("select", "asyncio") or (
        found.kind != "busy" and async_tasks.idle_in_native_loop(test_frame)  # uvloop: no select()
    )
    spinning = found.kind == "busy" and _outside_the_steps(test_frame, found)
    seen = (
        async_tasks.state(test_frame, test, frames_of=_frames, is_library=is_library)
        if idle or spinning
        else None
    )
    future = waits.waited_future(test_frame) if found.kind != "busy" else None
    # An "idle" loop whose test task waits for nothing spins (the sampler saw only select()) if the
    # thread spends CPU; with none, that task lost its step (an interruption asyncio swallowed).
    burns = found.cpu_ratio is not None and found.cpu_ratio >= SPINNING_CPU
    task = _spinning_task(seen, any_task=spinning) if seen is not None and (spinning or burns) else None
    if seen is not None and task is not None:
        tasks = seen.tasks
        summary = _spinning_summary(found, task)
        if seen.blocked is not None and seen.blocked.task == task.name:
            chosen = seen.blocked.frame
    elif seen is not None:
        tasks = seen.tasks
        if seen.blocked is not None:
            chosen = seen.blocked.frame
            summary = _async_summary(found, seen.blocked) + _meanwhile(seen.others, seen.blocked)
        future = waits.chained_future(seen.leaf)
    names = {t.ident: t.name for t in threads}
    worker = None
    if future is not None:
        worker = waits.future_worker(future, frames, names)
    if worker is None and found.kind != "busy":
        worker = waits.waited_child(test_frame, descendants)
    if worker is not None and worker.found.file:
        summary = f"waiting on {worker.label}, which is {worker.found.summary}; the test is {summary}"
        found = worker.found
        chosen, locals_from = None, worker.frame or test_frame
        return found, summary, tasks, chosen, locals_from
    loop = None
    if seen is None and found.kind == "blocked":  # a loop in another thread: joined, or completing a future
        loop = loop_threads.waited_loop(
            test_frame, frames, names, future, frames_of=_frames, is_library=is_library
        )
    if loop is not None:
        inner = classifier.Classification("blocked", "")
        others = loop.state.others if loop.blocked is loop.state.blocked else loop.state.not_on(loop.blocked)
        text = _async_summary(inner, loop.blocked) + _meanwhile(others, loop.blocked)
        summary = (
            f"waiting on thread {loop.name!r} (an asyncio event loop), which is {text}; the test is {summary}"
        )
        found, tasks, chosen = inner, loop.state.tasks, loop.blocked.frame
    elif found.wait_kind == "thread join":
        joined = _joined_thread(test_frame, frames)
        if joined is not None:
            summary += f"; the joined thread {joined}"
    return found, summary, tasks, chosen, locals_from


def _cpu(clock: int | None) -> float | None:
    if clock is None:
        return None
    try:
        return time.clock_gettime(clock)
    except OSError:
        return None


def thread_clock(thread_id: int) -> int | None:
    """The CPU-time clock of a thread (Linux and most Unixes), or None."""
    try:
        return time.pthread_getcpuclockid(thread_id)
    except (AttributeError, OSError):
        return None


def _frames(stack: tuple[classifier.Frame, ...]) -> list[HangFrame]:
    """Frames for a report; the source of library frames is left out, except the innermost's: reading
    files is what costs here (each read waits for the GIL a busy test thread holds)."""
    out = []
    for number, (file, line, function) in enumerate(stack):
        library = is_library(file)
        out.append(
            HangFrame(
                file=file if file.startswith("<") else os.path.abspath(file),
                line=line,
                function=function,
                code=classifier.source_line(file, line) if number == 0 or not library else "",
                library=library,
            )
        )
    return out


def _threads(
    frames: dict[int, FrameType], test_id: int, started: float, cpu_start: float | None, cpu_now: float | None
) -> list[HangThread]:
    by_id = {t.ident: t for t in threading.enumerate()}
    out = []
    for ident, frame in frames.items():
        thread = by_id.get(ident)
        name = thread.name if thread is not None else f"thread {ident:#x}"
        if name.startswith(OWN_THREADS):
            continue  # the plugin's own threads (watchdog, sender, output tail)
        cpu = None
        if ident == test_id and cpu_start is not None and cpu_now is not None:
            cpu = cpu_now - cpu_start
        stack = stack_of(frame)
        mine = ident != test_id and any(not is_library(f[0]) for f in stack)
        out.append(
            HangThread(
                name=name,
                ident=ident,
                frames=_frames(stack),
                test=ident == test_id,
                daemon=bool(thread is not None and thread.daemon),
                cpu=cpu,
                summary=waits.where(frame).summary if mine else "",
            )
        )
    out.sort(key=lambda t: not t.test)  # the test's thread first
    return out[:MAX_THREADS]


def _locals(
    frame: FrameType | None, found: classifier.Classification, chosen: FrameType | None = None
) -> tuple[list[Any], dict[str, list[Any]], str]:
    """Locals of the frame the hang is in (else the innermost frame of the project); ``chosen``: a
    coroutine's frame, not on the thread's stack."""
    walk = frame if chosen is None else None
    while walk is not None:
        code = walk.f_code
        if code.co_name == found.function and os.path.abspath(code.co_filename) == os.path.abspath(
            found.file
        ):
            chosen = walk
            break
        if chosen is None and not is_library(code.co_filename):
            chosen = walk
        if classifier.is_session_entry(code.co_filename, code.co_name):
            break  # below it: the launcher's frames (a script calling pytest.main()), not the test's
        walk = walk.f_back
    if chosen is None:
        return [], {}, ""
    builder = VarBuilder()
    try:
        names = [(k, v) for k, v in list(chosen.f_locals.items()) if not k.startswith("@")][:100]
    except Exception:
        names = []
    variables = [builder.var(k, v, 0) for k, v in names]
    whose = f"{chosen.f_code.co_name}() at {os.path.abspath(chosen.f_code.co_filename)}:{chosen.f_lineno}"
    return variables, {str(k): v for k, v in builder.children.items()}, whose


def _phase(frame: FrameType | None) -> str:
    """setup, call or teardown: pytest's runner has it in a local of `call_and_report`."""
    while frame is not None:
        if frame.f_code.co_name == "call_and_report":
            when = frame.f_locals.get("when")
            return when if isinstance(when, str) else ""
        frame = frame.f_back
    return ""


def _async_summary(found: classifier.Classification, blocked: async_tasks.Blocked) -> str:
    """ "blocked in `await ...` at line N of test_x() (...)", then the tasks the test's task waits
    through; ``found`` becomes that place."""
    frame = blocked.frame
    file, line, function = frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name
    since = found.since
    found.file, found.line, found.function, found.lines = file, line, function, [line]
    found.kind, found.wait_kind = "blocked", "asyncio"
    code = classifier.code_of(classifier.source_line(file, line))
    found.call = blocked.awaiting
    where = f"`{code}`" if code else "an await"
    through = " -> ".join(blocked.path)
    tail = f"asyncio task {through}" if len(blocked.path) == 1 else f"asyncio tasks {through}"
    return (
        f"blocked in {where} at line {line} of {function}() ({_short(file)})"
        + (f" for the last {since:.1f} s" if since >= 0.05 else "")
        + f"; {tail} awaits {blocked.awaiting or 'something'}, the event loop is idle"
    )


def _meanwhile(others: list[HangTask], blocked: async_tasks.Blocked) -> str:
    """Where the loop's other tasks wait, when the test's task waits for a bare future (a reply
    another task owes it) rather than for a task of its own path."""
    if blocked.awaiting.startswith(async_tasks.AWAITS_A_TASK):
        return ""
    return async_tasks.meanwhile(others, _short)


def _outside_the_steps(test_frame: FrameType, found: classifier.Classification) -> bool:
    """A busy thread named at or below the event loop it runs (``asyncio.run`` in a sync test, an
    async test's runner, or no frame of the project at all): the loop is a coroutine's that runs
    again at once each round (``await asyncio.sleep(0)``), and the sampler, which gets the GIL when
    the loop's ``select()`` lets it go, never sees the coroutine's frames."""
    stack = stack_of(test_frame)
    loop = next((i for i, f in enumerate(stack) if f[2] == "_run_once" and "asyncio" in f[0]), None)
    if loop is None:  # a loop written in C (uvloop) has no frame: it sits above the one that calls it
        entry = native_loops.depth(test_frame)
        loop = None if entry is None else entry - 1
    if loop is None:
        return False
    here = os.path.abspath(found.file) if found.file else ""
    at = next(
        (i for i, f in enumerate(stack) if f[2] == found.function and os.path.abspath(f[0]) == here), None
    )
    return at is None or at > loop or is_library(found.file)


def _spinning_task(seen: async_tasks.AsyncState, *, any_task: bool) -> HangTask | None:
    """The task that keeps the loop going: pending, waiting for no future (it runs again at once),
    suspended in the project's code. The test's own (the end of its await path) when it is such a
    task: then the loop only looked idle to the sampler; else, for a busy thread (``any_task``),
    the first such task."""
    ready = [
        t
        for t in seen.tasks
        if t.state == "pending" and not t.awaiting and any(not f.library for f in t.frames)
    ]
    mine = seen.blocked.task if seen.blocked is not None else None
    return next((t for t in ready if t.name == mine), ready[0] if ready and any_task else None)


def _spinning_summary(found: classifier.Classification, task: HangTask) -> str:
    """ "busy loop in lines 11-16 of retry() (...): asyncio task Task-1 runs again at once each
    round, nothing it awaits there blocks"; ``found`` becomes that place. (The task may be caught
    mid-step or suspended at an await: its line says which, the loop is the same.)"""
    frame = next(f for f in task.frames if not f.library)  # innermost first
    extent = classifier.loop_extent(frame.file, frame.line)
    lines = list(range(extent[0], extent[1] + 1)) if extent else [frame.line]
    found.file, found.line, found.function, found.lines = frame.file, frame.line, frame.function, lines
    found.wait_kind = "asyncio"  # interrupted through its event loop (`tasks.interrupt`)
    where = f"lines {lines[0]}-{lines[-1]}" if len(lines) > 1 else f"line {lines[0]}"
    ratio = f"; {found.cpu_ratio:.0%} CPU" if found.cpu_ratio is not None else ""
    return (
        f"busy loop in {where} of {frame.function}() ({_short(frame.file)}): asyncio task {task.name} "
        f"runs again at once each round, nothing it awaits there blocks{ratio}"
    )


def _unchanged_tail(samples: Sequence[classifier.Sample]) -> int:
    """How many of the last samples show the same stack as the last one."""
    if not samples:
        return 0
    last, count = samples[-1].stack, 0
    for sample in reversed(samples):
        if sample.stack != last:
            break
        count += 1
    return count


def _joined_thread(frame: FrameType, frames: dict[int, FrameType]) -> str | None:
    thread = waits.joined_thread(frame)
    if thread is None or thread.ident not in frames:
        return None
    stack = stack_of(frames[thread.ident])
    found = classifier.classify([classifier.Sample(0.0, None, stack)], is_library=is_library)
    return f"{thread.name!r} is {found.summary.split(' for ')[0]}"


def _output(output: Callable[[], list[str]] | None) -> list[str]:
    if output is None:
        return []
    try:
        return output()[-20:]
    except Exception:
        return []


def _source(file: str, line: int, context: int = 5) -> list[tuple[int, str]]:
    if not file or line <= 0:
        return []
    lines = linecache.getlines(file)
    first, last = max(line - context, 1), min(line + context, len(lines))
    return [(n, lines[n - 1].rstrip("\n")[:300]) for n in range(first, last + 1)]


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path
