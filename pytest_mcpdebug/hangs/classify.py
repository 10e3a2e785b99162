"""What a hung test is doing, from the watchdog's samples of its thread: a busy loop or a blocking call.

Pure functions over samples (no threads, no pytest), so the rules can be tested on their own:

- **busy**: the thread burns CPU (at least half of the wall time over the window). The loop is in
  the deepest frame every sample shares; its lines are the ones the samples saw in that frame.
- **polling**: little CPU, but the stack changes between samples: a loop that waits a little each
  round (a sleep, a short timeout). The wait is the line it sits on most.
- **blocked**: little CPU and the same stack in every sample: one call that does not return. The
  call is named from the innermost frames (``threading``'s lock and join, ``queue``, ``subprocess``,
  ``selectors``, asyncio's idle loop) or, for a C function (which has no Python frame), from the
  source of the line that calls it.
"""

from __future__ import annotations

import ast
import functools
import io
import linecache
import re
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

Frame = tuple[str, int, str]
"""(absolute file, line, function)."""


@dataclass(frozen=True)
class Sample:
    at: float
    """time.monotonic() of the sample."""
    cpu: float | None
    """The sampled thread's CPU time in seconds (None where the platform cannot tell)."""
    stack: tuple[Frame, ...]
    """Innermost first."""


@dataclass
class Classification:
    kind: str
    """busy, polling, blocked or unknown."""
    summary: str
    """One line: "busy loop in lines 40-44 of retry_forever() (tests/test_x.py)"."""
    file: str = ""
    function: str = ""
    line: int = 0
    lines: list[int] = field(default_factory=list)
    """busy/polling: the lines the loop cycles through; blocked: the line that waits."""
    call: str = ""
    """blocked/polling: what it waits in, e.g. "time.sleep(100)" or "threading.Lock.acquire"."""
    wait_kind: str = ""
    """sleep, lock, thread join, event, queue, socket, subprocess, select, asyncio, stdin or call."""
    since: float = 0.0
    """blocked: seconds the stack has been the same (up to the whole window)."""
    cpu_ratio: float | None = None


BUSY_RATIO: Final = 0.5

# Library functions a blocked thread sits in, innermost first, by (file name ending, function).
_LIBRARY_WAITS: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("threading.py", "_wait_for_tstate_lock", "thread join", "threading.Thread.join"),
    ("threading.py", "join", "thread join", "threading.Thread.join"),
    ("threading.py", "wait", "event", "threading.Condition.wait / Event.wait"),
    ("queue.py", "get", "queue", "queue.Queue.get"),
    ("queue.py", "put", "queue", "queue.Queue.put"),
    ("subprocess.py", "run", "subprocess", "subprocess.run"),
    ("subprocess.py", "call", "subprocess", "subprocess.call"),
    ("subprocess.py", "check_call", "subprocess", "subprocess.check_call"),
    ("subprocess.py", "check_output", "subprocess", "subprocess.check_output"),
    ("subprocess.py", "_try_wait", "subprocess", "subprocess.Popen.wait"),
    ("subprocess.py", "_wait", "subprocess", "subprocess.Popen.wait"),
    ("subprocess.py", "wait", "subprocess", "subprocess.Popen.wait"),
    ("subprocess.py", "communicate", "subprocess", "subprocess.Popen.communicate"),
    ("subprocess.py", "_communicate", "subprocess", "subprocess.Popen.communicate"),
    ("selectors.py", "select", "select", "selectors.select"),
    ("socket.py", "accept", "socket", "socket.accept"),
    ("socket.py", "readinto", "socket", "socket read"),
    ("ssl.py", "read", "socket", "ssl read"),
    ("base_events.py", "_run_once", "asyncio", "the asyncio event loop, idle"),
    ("connection.py", "recv", "pipe", "multiprocessing recv"),
)
# Calls to C functions, recognised in the source line of the innermost frame.
_CALL_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (r"\bsleep\s*\(", "sleep"),
        (r"\.acquire\s*\(|\bwith\s+[\w.]*(lock|mutex|sem)\w*\b", "lock"),
        (r"\.join\s*\(", "thread join"),
        (r"\.wait\s*\(", "event"),
        (r"\.(recv|recv_into|recvfrom|accept|connect|sendall|send)\s*\(", "socket"),
        (r"\b(subprocess\.|check_output|check_call|communicate\s*\()", "subprocess"),
        (r"\.get\s*\(|\.put\s*\(", "queue"),
        (r"\b(select|poll|epoll)\s*\(", "select"),
        (r"\binput\s*\(|stdin\.read", "stdin"),
        (r"\.read\w*\s*\(", "read"),
    )
)


IsLibrary = Callable[[str], bool]

_SESSION_FILE: Final = ("_pytest/main.py", "_pytest\\main.py")


def is_session_entry(file: str, function: str) -> bool:
    """pytest's ``wrap_session``, the outermost frame of a run's own: the frames below it are the
    launcher's (the console script, ``python -m pytest``, a script's ``pytest.main()``, nox, an IDE's
    runner), never where a test hangs, and cut off (`in_session`)."""
    return function == "wrap_session" and file.endswith(_SESSION_FILE)


def in_session(stack: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """``stack`` (innermost first) without the frames below pytest's session, if it has one."""
    for i, (file, _, function) in enumerate(stack):
        if is_session_entry(file, function):
            return stack[: i + 1]
    return stack


def classify(samples: Sequence[Sample], *, is_library: IsLibrary | None = None) -> Classification:
    """Classify the samples of one thread (oldest first); ``is_library`` tells the project's frames
    from the standard library's and installed packages' (default: every frame is the project's)."""
    library = is_library or _never
    usable = [s for s in samples if s.stack]
    if not usable:
        return Classification("unknown", "no samples of the test's thread were taken (it may hold the GIL)")
    last = usable[-1]
    # The hang is what the samples settle into: the run of identical stacks at the end (blocked),
    # else the later half of the window (the first samples may still be set-up or the loop's warm-up).
    same = 1
    while same < len(usable) and usable[-1 - same].stack == last.stack:
        same += 1
    if same >= max(2, len(usable) // 2):
        settled = usable[-same:]
        ratio = _cpu_ratio(settled)
        if ratio is not None and ratio >= BUSY_RATIO:  # a loop sampled at the same point each time
            return _busy(settled, _common_depth(settled), library, ratio)
        user = next((f for f in last.stack if not library(f[0])), last.stack[0])
        if not (_woke(settled) and in_loop(user[0], user[1])):
            return _blocked(settled, library, _cpu_ratio(settled))
        # A loop that sleeps a little each round is sampled asleep every time, but it spends CPU;
        # a loop that only computes, on a machine too loaded to give it a whole core, is busy.
        if _waits(last.stack, library):
            return _polling(settled, _common_depth(settled), library, ratio)
        return _busy(settled, _common_depth(settled), library, ratio or 0.0)
    window = usable[len(usable) // 2 :] if len(usable) >= 4 else usable
    cpu_ratio = _cpu_ratio(window)
    depth = _common_depth(window)
    if cpu_ratio is not None and cpu_ratio >= BUSY_RATIO:
        return _busy(window, depth, library, cpu_ratio)
    if all(s.stack == window[-1].stack for s in window):
        return _blocked(window, library, cpu_ratio)
    if any(_waits(s.stack, library) for s in window):
        return _polling(window, depth, library, cpu_ratio)
    return _busy(window, depth, library, cpu_ratio or 0.0)


WAITS: Final = frozenset(
    {
        "sleep",
        "lock",
        "thread join",
        "event",
        "queue",
        "socket",
        "subprocess",
        "select",
        "stdin",
        "read",
        "asyncio",
        "pipe",
    }
)


def _waits(stack: tuple[Frame, ...], library: IsLibrary) -> bool:
    """Does this stack wait in something (a sleep, a lock, I/O), rather than compute?"""
    return _wait_of(stack, library)[0] in WAITS


POLL_CPU: Final = 0.00002
"""CPU seconds over the window above which a thread that looks asleep has in fact been waking up."""


def _woke(samples: Sequence[Sample]) -> bool:
    first, last = samples[0].cpu, samples[-1].cpu
    return first is not None and last is not None and last - first > POLL_CPU


def _never(_: str) -> bool:
    return False


def _cpu_ratio(samples: Sequence[Sample]) -> float | None:
    first, last = samples[0], samples[-1]
    if first.cpu is None or last.cpu is None or last.at - first.at < 1e-3:
        return None
    return max(0.0, (last.cpu - first.cpu) / (last.at - first.at))


def _common_depth(samples: Sequence[Sample]) -> int:
    """How many outermost frames (by file and function, whatever the line) every sample shares."""
    outer = [tuple(reversed(s.stack)) for s in samples]
    depth = 0
    for frames in zip(*outer, strict=False):
        if len({(f[0], f[2]) for f in frames}) != 1:
            break
        depth += 1
    return depth


def _loop_frame(samples: Sequence[Sample], depth: int, library: IsLibrary) -> tuple[int, str, str]:
    """The frame (outermost index) the loop runs in: the deepest shared frame of the project's code."""
    outer = tuple(reversed(samples[-1].stack))
    index = max(depth - 1, 0)
    while index > 0 and library(outer[index][0]):
        index -= 1
    file, _, function = outer[index]
    return index, file, function


def _lines_at(samples: Sequence[Sample], index: int) -> list[int]:
    lines = set()
    for s in samples:
        outer = tuple(reversed(s.stack))
        if index < len(outer):
            lines.add(outer[index][1])
    return sorted(lines)


def _busy(samples: Sequence[Sample], depth: int, library: IsLibrary, ratio: float) -> Classification:
    index, file, function = _loop_frame(samples, depth, library)
    seen = _lines_at(samples, index)
    inner = tuple(reversed(samples[-1].stack))
    line = inner[index][1]
    extent = loop_extent(file, line)
    lines = list(range(extent[0], extent[1] + 1)) if extent else seen
    where = f"lines {lines[0]}-{lines[-1]}" if len(lines) > 1 else f"line {lines[0]}"
    calls = ""
    if index + 1 < len(inner) and depth > index + 1:
        callee = inner[index + 1]
        calls = f", calling {callee[2]}() ({_short(callee[0])})"
    return Classification(
        "busy",
        f"busy loop in {where} of {function}() ({_short(file)}){calls}; {ratio:.0%} CPU",
        file=file,
        function=function,
        line=line,
        lines=lines,
        cpu_ratio=ratio,
    )


def _blocked(samples: Sequence[Sample], library: IsLibrary, ratio: float | None) -> Classification:
    stack = samples[-1].stack
    kind, call = _wait_of(stack, library)
    user = next((f for f in stack if not library(f[0])), stack[0])
    file, line, function = user
    since = samples[-1].at - samples[0].at
    what = (f"`{call}`" if _is_source(call, file, line) else call) if call else "a call"
    return Classification(
        "blocked",
        f"blocked in {what} at line {line} of {function}() ({_short(file)})"
        + (f" for the last {since:.1f} s" if since >= 0.05 else ""),
        file=file,
        function=function,
        line=line,
        lines=[line],
        call=call,
        wait_kind=kind,
        since=since,
        cpu_ratio=ratio,
    )


def _polling(
    samples: Sequence[Sample], depth: int, library: IsLibrary, ratio: float | None
) -> Classification:
    index, file, function = _loop_frame(samples, depth, library)
    seen = _lines_at(samples, index)
    extent = loop_extent(file, seen[0])
    lines = list(range(extent[0], extent[1] + 1)) if extent else seen
    counts: dict[tuple[Frame, ...], int] = {}
    for s in samples:
        counts[s.stack] = counts.get(s.stack, 0) + 1
    waiting = max(counts, key=counts.__getitem__)
    kind, call = _wait_of(waiting, library)
    where = f"lines {lines[0]}-{lines[-1]}" if len(lines) > 1 else f"line {lines[0]}"
    shown = f"`{call}`" if _is_source(call, waiting[0][0], waiting[0][1]) else call
    return Classification(
        "polling",
        f"polling loop in {where} of {function}() ({_short(file)})"
        + (f", waiting in {shown} each round" if call else ""),
        file=file,
        function=function,
        line=lines[0],
        lines=lines,
        call=call,
        wait_kind=kind,
        cpu_ratio=ratio,
    )


def _wait_of(stack: tuple[Frame, ...], library: IsLibrary) -> tuple[str, str]:
    """What a stack waits in: (kind, description). A library function the project's code called is
    named from the table; a C function (no frame of its own) from the calling line's source."""
    user = next((i for i, f in enumerate(stack) if not library(f[0])), len(stack))
    # The functions the project's frame called, the first first (not its callers: a coroutine runs
    # under the event loop's frames without waiting in them); with no frame of the project (an async
    # test's thread idles in the event loop), the innermost.
    order = stack[:user][::-1] if user < len(stack) else stack
    for file, _line, function in order[:8]:
        for ending, name, kind, description in _LIBRARY_WAITS:
            if function == name and file.endswith(ending):
                return kind, description
    if user > 0:
        file, _, function = stack[user - 1] if user < len(stack) else stack[0]
        return "call", f"{_module(file)}.{function}"
    file, line, _ = stack[0]
    text = code_of(source_line(file, line))
    for pattern, kind in _CALL_PATTERNS:
        if pattern.search(text):
            return kind, text
    return ("call", text) if text else ("", "")


def loop_extent(file: str, line: int) -> tuple[int, int] | None:
    """The first and last line of the innermost ``for``/``while`` loop around ``line`` in ``file``.

    Sampling sees a busy thread at the few points where it lets the GIL go (a loop's jump back,
    a call), so the loop's extent comes from the source rather than from the lines sampled.
    """
    if file.startswith("<"):
        return None
    tree = _parse(file)
    if tree is None:
        return None
    best: tuple[int, int] | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and (best is None or end - node.lineno < best[1] - best[0]):
                best = (node.lineno, end)
    return best


@functools.lru_cache(maxsize=64)
def _parse(file: str) -> ast.Module | None:
    source = "".join(linecache.getlines(file))
    if not source:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def in_loop(file: str, line: int) -> bool:
    return loop_extent(file, line) is not None


def _module(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.removesuffix(".py")


def _is_source(call: str, file: str, line: int) -> bool:
    return bool(call) and call == code_of(source_line(file, line))


def code_of(line: str) -> str:
    """A source line without its trailing comment."""
    if "#" not in line:
        return line
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line[: token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return line


def source_line(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()[:200]


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path
