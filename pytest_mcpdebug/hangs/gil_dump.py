"""Reading the faulthandler backstop's dump: the stacks of a process hung while holding the GIL.

The watchdog keeps faulthandler's C timer armed (see `watchdog`); when a C call holds the GIL past
the timeout and the grace, the timer writes every thread's stack to
``.mcpdebug/hangs/<run id>.<process>.txt`` and ends the process. The first line of the file, written
at session start, names the thread that runs tests. This module turns such a file into a
`HangReport`, for the xdist controller (a worker died) or the server (any process that died).
No pytest import: the server uses it too.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pytest_mcpdebug import forks
from pytest_mcpdebug.record import Record

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import HangReport

HEADER: Final = "mcpdebug: test thread "
TEST: Final = "mcpdebug: running "
HEADER_SIZE: Final = 4096
"""The header (thread, and the test running now, rewritten in place per test) fills this many bytes;
faulthandler writes after it."""
STUCK: Final = "mcpdebug: hang: "
"""A line the watchdog adds before ending a process whose hung test it could not interrupt."""
# Patterns, compiled on first use (by `re`): every recorded run imports this module, few parse a dump.
_THREAD = r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+)"
_FRAME = r'^\s+File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$'
_TIMEOUT = r"^Timeout \((?P<h>\d+):(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)\)!"
_FATAL = r"^Fatal Python error: (?P<what>.+)$"


class DumpName(Record):
    run_id: str
    process: str
    worker: str
    pid: int


def dump_name(run_id: str, process: str) -> str:
    return f"{run_id}.{process}.txt"


def parse_name(path: Path) -> DumpName | None:
    """``<run id>.<worker>-<pid>.txt`` -> its parts (None for other files)."""
    if path.suffix != ".txt":
        return None
    run_id, _, process = path.stem.rpartition(".")
    worker, _, pid = process.rpartition("-")
    if not run_id or not worker or not pid.isdigit():
        return None
    return DumpName(run_id, process, worker, int(pid))


class DumpFile:
    """The file faulthandler's backstop writes to, opened for the whole session."""

    def __init__(self, path: Path, thread: int) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with forks.owning():
            self.fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_RDWR, 0o644)
            forks.own(self.fd)
        first = f"{HEADER}{thread:#018x}\n".encode()
        self._test_at = len(first)
        self._test_len = 0
        self._room = HEADER_SIZE - self._test_at - 2
        """The longest test line the header holds (its newline and the header's last one aside)."""
        os.write(self.fd, first + b" " * (HEADER_SIZE - len(first) - 1) + b"\n")
        os.lseek(self.fd, HEADER_SIZE, os.SEEK_SET)
        self._header = mmap.mmap(self.fd, HEADER_SIZE)
        """The header, mapped: naming the running test is a copy into the page cache, not a system call
        per test, and what is copied there outlives the process as a write would."""
        self.clear_test: Callable[[], None] = functools.partial(self._header.__setitem__, self._test_at, 10)
        """No test runs now: one byte, the name's line made empty (the rest of it reads as padding). A
        call of C code only, no Python frame: every test's end makes it. ValueError once closed."""

    def fileno(self) -> int:
        return self.fd

    def set_test(self, nodeid: str) -> None:
        """Name the test that runs now ("" between tests), in place, so a dump, or a file left behind
        by a process that vanished, says whose it is."""
        line = (TEST + nodeid).encode("utf-8", "replace")[: self._room] + b"\n" if nodeid else b"\n"
        # Only as many bytes as the last name took: the rest of the header is spaces already.
        at, size, last = self._test_at, len(line), self._test_len
        self._header[at : at + size] = line
        if size < last:
            self._header[at + size : at + last] = b" " * (last - size)
        self._test_len = size

    def append(self, text: str) -> None:
        os.write(self.fd, text.encode("utf-8", "replace"))

    def close(self) -> None:
        """Close it, and remove it if nothing was dumped (the usual case)."""
        try:
            self._header.close()
            dumped = os.fstat(self.fd).st_size > HEADER_SIZE
            forks.disown(self.fd)
            os.close(self.fd)
        except OSError:
            return
        if not dumped:
            self.path.unlink(missing_ok=True)


def has_dump(path: Path) -> bool:
    """True once faulthandler (or the watchdog, at a test it could not stop) wrote after the header."""
    try:
        return path.stat().st_size > HEADER_SIZE
    except OSError:
        return False


def vanished(name: DumpName, text: str) -> HangReport | None:
    """A file with only its header, left by a dead process: it ended during the test the header
    names, without a traceback (os._exit, SIGKILL, the OOM killer)."""
    test = dumped_test(text)
    if not test:
        return None
    from pytest_mcpdebug.protocol import HangReport  # msgspec: only once a dump is read

    return HangReport(
        kind="crashed",
        summary=f"its process ({name.worker}, pid {name.pid}) ended while the test ran, without a traceback "
        "(os._exit, SIGKILL or the OOM killer)",
    )


def dumped_test(text: str) -> str:
    """The test the header names (the one running when the process was dumped), or ""."""
    for line in text.splitlines()[:3]:
        if line.startswith(TEST):
            return line[len(TEST) :].strip()
    return ""


def report(path: Path, *, timeout: float = 0.0) -> HangReport | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse(text, timeout=timeout)


def parse(text: str, *, timeout: float = 0.0) -> HangReport | None:
    from pytest_mcpdebug.hangs import classify as classifier  # only once a dump is read
    from pytest_mcpdebug.protocol import HangFrame, HangReport, HangThread
    from pytest_mcpdebug.values import is_library

    lines = text.splitlines()
    test_thread = ""
    if lines and lines[0].startswith(HEADER):
        test_thread = lines[0][len(HEADER) :].strip().lower()
    lines = [line for line in lines if line.strip()]
    elapsed = 0.0
    stuck = ""
    fatal = ""
    current = ""
    threads: list[tuple[str, list[tuple[str, int, str]]]] = []
    for line in lines:
        if m := re.match(_FATAL, line):
            fatal = m["what"].strip()
        elif line.startswith("Current thread "):
            current = line.split()[2].lower()
        if line.startswith(STUCK):
            stuck = line[len(STUCK) :].strip()
        elif m := re.match(_TIMEOUT, line):
            elapsed = int(m["h"]) * 3600 + int(m["m"]) * 60 + float(m["s"])
        elif m := re.match(_THREAD, line):
            threads.append((m.group(1).lower(), []))
        elif (m := re.match(_FRAME, line)) and threads:
            threads[-1][1].append((m["file"], int(m["line"]), m["function"].strip()))
    if stuck:
        return HangReport(kind="stuck", summary=stuck, timeout=timeout, action="exit")
    if not threads:
        return None
    wanted = current if fatal and current else test_thread  # a crash names the thread that crashed
    test = next((t for t in threads if _same_thread(t[0], wanted)), threads[-1])
    stack = tuple(test[1])
    out_threads = [
        HangThread(
            name="test thread" if t is test else f"thread {t[0]}",
            ident=int(t[0], 16),
            frames=[
                HangFrame(
                    file=f, line=n, function=fn, code=classifier.source_line(f, n), library=is_library(f)
                )
                for f, n, fn in t[1]
            ],
            test=t is test,
        )
        for t in sorted(threads, key=lambda t: t is not test)
    ]
    if not stack:
        return _without_secrets(
            HangReport(
                kind="gil",
                summary="the process held the GIL; no Python frame was running",
                threads=out_threads,
            )
        )
    stack = classifier.in_session(stack)
    user_index = next((i for i, f in enumerate(stack) if not is_library(f[0])), 0)
    file, lineno, function = stack[user_index]
    call = ""
    if user_index > 0:
        callee = stack[user_index - 1]
        call = f"{_module(callee[0])}.{callee[2]}"
    else:
        call = classifier.source_line(file, lineno)
    what = f"`{call}`" if call and user_index == 0 else (call or "a C call")
    if fatal:
        summary = f"crashed ({fatal}) in {what} at line {lineno} of {function}() ({_short(file)})"
    else:
        summary = (
            f"held the GIL in {what} at line {lineno} of {function}() ({_short(file)}): a C call that "
            "does not let other threads run, so it could not be interrupted"
        )
    return _without_secrets(
        HangReport(
            kind="crashed" if fatal else "gil",
            summary=summary,
            file=os.path.abspath(file),
            function=function,
            line=lineno,
            lines=[lineno],
            call=call,
            wait_kind="crash" if fatal else "gil",
            timeout=timeout,
            elapsed=elapsed,
            action="",  # the process ended: under xdist a new worker goes on, without it the run ends
            threads=out_threads,
            source=_source(file, lineno),
        )
    )


def _without_secrets(report: HangReport) -> HangReport:
    from pytest_mcpdebug.hangs.redacted import without_secrets  # a crash's report only: loaded then

    return without_secrets(report)


def _same_thread(a: str, b: str) -> bool:
    try:
        return bool(b) and int(a, 16) == int(b, 16)
    except ValueError:
        return False


def _module(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    if parts[-1] == "__init__.py" and len(parts) > 1:
        return parts[-2]
    return parts[-1].removesuffix(".py")


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def _source(file: str, line: int, context: int = 5) -> list[tuple[int, str]]:
    import linecache

    lines = linecache.getlines(file)
    first, last = max(line - context, 1), min(line + context, len(lines))
    return [(n, lines[n - 1].rstrip("\n")[:300]) for n in range(first, last + 1)]
