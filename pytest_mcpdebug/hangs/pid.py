"""Any running Python process, by pid: sampled from outside and diagnosed as a hung test is.

``mcpdebug hang PID`` and the MCP tool ``detect_hang(pid=...)``: py-spy dumps the process every
``interval`` for ``duration`` seconds while psutil reads each thread's CPU time, and the samples
of each thread are classified by the same rules as a test's (`classify`): busy, polling or
blocked, with the same headline. The thread named is the main thread, unless it only waits while
another thread runs the project's code. Its Python descendants are dumped too.
"""

from __future__ import annotations

import linecache
import os
import time
from typing import Final

import psutil

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs import processes as outside
from pytest_mcpdebug.hangs.redacted import without_secrets
from pytest_mcpdebug.protocol import HangReport, HangThread, SnapshotVar
from pytest_mcpdebug.values import is_library

# Limits
MAX_DURATION: Final = 30.0


class NotPython(Exception):
    """The process cannot be read: not Python, gone, or ptrace not permitted (the message says)."""


def sample(pid: int, *, duration: float = 2.0, interval: float = 0.1) -> HangReport:
    """Sample ``pid`` for ``duration`` seconds and say what it is doing."""
    try:
        process = psutil.Process(pid)
        process.cmdline()
    except psutil.NoSuchProcess:
        raise NotPython(f"there is no process {pid}") from None
    except (psutil.Error, OSError) as exc:
        raise NotPython(f"process {pid} cannot be read: {exc}") from None
    duration = min(max(duration, interval), MAX_DURATION)
    started = time.monotonic()
    by_thread: dict[int, list[classifier.Sample]] = {}
    names: dict[int, HangThread] = {}
    while True:
        at = time.monotonic()
        dumped = outside.spy([pid]).get(pid)
        if dumped is None or dumped.threads is None:
            if not by_thread:
                raise NotPython(dumped.error if dumped else "py-spy could not read it")
            break  # it ended, or stopped answering: classify what was seen
        cpu = _cpu(process)
        for thread in outside.threads_of(dumped.threads, cpu):
            names[thread.ident] = thread
            stack = outside.stack(thread)
            by_thread.setdefault(thread.ident, []).append(classifier.Sample(at, thread.cpu, stack))
        if at - started >= duration:
            break
        time.sleep(max(interval - (time.monotonic() - at), 0.0))
    return _report(pid, by_thread, names, started, interval)


def command_of(pid: int) -> str:
    try:
        process = psutil.Process(pid)
        return " ".join(process.cmdline()) or process.name()
    except (psutil.Error, OSError):
        return "?"


def _report(
    pid: int,
    by_thread: dict[int, list[classifier.Sample]],
    names: dict[int, HangThread],
    started: float,
    interval: float,
) -> HangReport:
    found = {
        ident: classifier.classify(samples, is_library=is_library) for ident, samples in by_thread.items()
    }
    chosen = _chosen(found, names)
    threads = []
    for ident, thread in names.items():
        thread.test = ident == chosen
        thread.summary = found[ident].summary
        first = by_thread[ident][0].cpu
        if thread.cpu is not None and first is not None:
            thread.cpu -= first
        threads.append(thread)
    threads.sort(key=lambda t: not t.test)
    main = found[chosen]
    file = os.path.abspath(main.file) if main.file and not main.file.startswith("<") else main.file
    samples = len(by_thread[chosen])
    elapsed = time.monotonic() - started
    summary = main.summary if len(names) == 1 else f"{names[chosen].name}: {main.summary}"
    report = HangReport(
        kind=main.kind,
        summary=summary,
        file=file,
        function=main.function,
        line=main.line,
        lines=main.lines,
        call=main.call,
        wait_kind=main.wait_kind,
        since=main.since,
        elapsed=elapsed,
        cpu=names[chosen].cpu,
        samples=samples,
        interval=interval,
        threads=threads,
        locals=_locals(pid, names[chosen].name, main),
        locals_frame=f"{main.function}() at {file}:{main.line}" if main.file else "",
        processes=outside.survey(pid),
        source=_source(main.file, main.line),
    )
    return without_secrets(report)


def _chosen(found: dict[int, classifier.Classification], names: dict[int, HangThread]) -> int:
    """The main thread, unless it only waits (a join, an event) while another runs the project's code."""
    main = next((i for i, t in names.items() if t.name == "MainThread"), next(iter(names)))
    first = found[main]
    mine = first.kind == "busy" or bool(first.file and not is_library(first.file))
    if mine and first.wait_kind not in ("thread join", "event", "queue"):
        return main
    for ident, other in found.items():
        working = other.kind in ("busy", "polling") or other.wait_kind in ("lock", "call", "socket")
        if ident != main and working and other.file and not is_library(other.file):
            return ident
    return main


def _cpu(process: psutil.Process) -> dict[int, float]:
    """CPU seconds of each native thread (psutil's ids are py-spy's ``os_thread_id``)."""
    try:
        return {t.id: t.user_time + t.system_time for t in process.threads()}
    except (psutil.Error, OSError):
        return {}


def _locals(pid: int, thread: str, where: classifier.Classification) -> list[SnapshotVar]:
    """The locals of the frame named, read by py-spy (``--locals``): their reprs."""
    if not where.file:
        return []
    dumped = outside.spy([pid], locals=True).get(pid)
    for entry in (dumped.threads or []) if dumped else []:
        if entry.get("thread_name") != thread:
            continue
        for frame in entry.get("frames") or []:
            if frame.get("name") == where.function and frame.get("filename") == where.file:
                return [
                    SnapshotVar(name=str(v.get("name")), type="", value=str(v.get("repr") or "")[:200])
                    for v in (frame.get("locals") or [])[:50]
                ]
    return []


def _source(file: str, line: int, context: int = 5) -> list[tuple[int, str]]:
    lines = linecache.getlines(file) if file and line > 0 else []
    first, last = max(line - context, 1), min(line + context, len(lines))
    return [(n, lines[n - 1].rstrip("\n")[:300]) for n in range(first, last + 1)]
