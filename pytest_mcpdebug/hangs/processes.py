"""Processes seen from outside: a hung process's live descendants, and any Python process's stacks.

A test that waits on a child (``subprocess.run``, a ``multiprocessing`` pool, a
``ProcessPoolExecutor``) is only as stuck as that child. Descendants are found with psutil; each
Python one is dumped with py-spy (``py-spy dump --json``, about 20 ms a process, all at once), which
reads its stacks through ptrace without stopping it for long. Where py-spy cannot attach, the
process is listed with its command line and state, and the reason says what to change.

No pytest import: ``mcpdebug hang PID`` and the server use it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psutil

from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.protocol import HangFrame, HangProcess, HangThread
from pytest_mcpdebug.values import is_library

# Limits
MAX_PROCESSES: Final = 32
"""Descendants dumped (the rest are listed by pid and command line)."""
MAX_COMMAND: Final = 300
# Timeouts
SPY_TIMEOUT: Final = 5.0
"""One py-spy dump; a few tens of milliseconds is usual."""

Dump = list[dict[str, Any]]
"""py-spy's JSON: one entry per thread, each with its frames (innermost first)."""


@dataclass
class Spied:
    """One py-spy dump of one process: its threads, or why there are none."""

    threads: Dump | None
    error: str = ""


def py_spy() -> str | None:
    """The py-spy executable: beside this Python (its wheel installs it there), else on PATH."""
    beside = Path(sys.executable).parent / ("py-spy.exe" if os.name == "nt" else "py-spy")
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def descendants(pid: int | None = None, exclude: Collection[int] = ()) -> list[psutil.Process]:
    """The live descendants of ``pid`` (default: this process), parents before their children."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except (psutil.Error, OSError):
        return []
    return [c for c in children if c.pid not in exclude and c.pid != os.getpid()]


def spy(pids: Collection[int], *, timeout: float = SPY_TIMEOUT, locals: bool = False) -> dict[int, Spied]:
    """Dump the stacks of several processes with py-spy, in parallel (``locals``: with each frame's
    locals, as reprs)."""
    exe = py_spy()
    if exe is None:
        missing = Spied(
            None, "py-spy is not installed: `pip install py-spy` to see the stacks of other processes"
        )
        return dict.fromkeys(pids, missing)
    running: dict[int, subprocess.Popen[bytes]] = {}
    out: dict[int, Spied] = {}
    for pid in pids:
        try:
            running[pid] = subprocess.Popen(
                [exe, "dump", "--pid", str(pid), "--json", *(["--locals"] if locals else [])],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "RUST_BACKTRACE": "0"},
            )
        except OSError as exc:
            out[pid] = Spied(None, f"py-spy could not start: {exc.strerror}")
    deadline = time.monotonic() + timeout
    for pid, process in running.items():
        try:
            stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 0.05))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            out[pid] = Spied(None, f"py-spy did not answer within {timeout:g} s")
            continue
        if process.returncode == 0:
            try:
                out[pid] = Spied(json.loads(stdout))
                continue
            except ValueError:
                pass
        out[pid] = Spied(None, _why(stderr.decode(errors="replace"), pid))
    return out


def survey(
    pid: int | None = None, *, exclude: Collection[int] = (), timeout: float = SPY_TIMEOUT
) -> list[HangProcess]:
    """Every live descendant of ``pid`` (default: this process), with the stacks of the Python ones."""
    found = descendants(pid, exclude)
    if not found:
        return []
    listed = [_describe(p) for p in found]
    candidates = [p.pid for p in listed if p.status != "zombie"][:MAX_PROCESSES]
    dumps = spy(candidates, timeout=timeout)
    for process in listed:
        dumped = dumps.get(process.pid)
        if dumped is None:
            continue
        if dumped.threads is None:
            process.error = dumped.error
            continue
        process.python = True
        process.threads = threads_of(dumped.threads)
        process.summary = where(process.threads)
    return listed


def threads_of(dump: Dump, cpu: dict[int, float] | None = None) -> list[HangThread]:
    """py-spy's threads as a report's, the main thread first."""
    out = []
    for entry in dump:
        native = int(entry.get("os_thread_id") or 0)
        out.append(
            HangThread(
                name=str(entry.get("thread_name") or f"thread {native}"),
                ident=int(entry.get("thread_id") or native),
                frames=[_frame(f, number) for number, f in enumerate(entry.get("frames") or [])],
                cpu=cpu.get(native) if cpu else None,
            )
        )
    out.sort(key=lambda t: t.name != "MainThread")
    return out


def stack(thread: HangThread) -> tuple[classifier.Frame, ...]:
    return tuple((f.file, f.line, f.function) for f in thread.frames)


def where(threads: list[HangThread]) -> str:
    """Where a process (seen once) is: its main thread's call that waits, or its line if it runs."""
    if not threads:
        return "no Python thread"
    main = threads[0]
    if not main.frames:
        return f"{main.name} runs no Python code (a C call, or between bytecodes)"
    found = classifier.classify([classifier.Sample(0.0, None, stack(main))], is_library=is_library)
    return found.summary


def ptrace_advice() -> str:
    """What to change so py-spy may read another process's memory, on this machine."""
    if sys.platform == "darwin":
        return "on macOS py-spy needs root: run it (or the tests) with sudo"
    if sys.platform.startswith("win"):
        return "run it from an administrator prompt"
    scope = ""
    with contextlib.suppress(OSError):
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    advice = []
    if scope and scope != "0":
        advice.append(
            f"kernel.yama.ptrace_scope is {scope} (only a process's ancestors may trace it): "
            "`sudo sysctl kernel.yama.ptrace_scope=0`, or run as root"
        )
    advice.append(
        "in a container, give it the CAP_SYS_PTRACE capability (docker run --cap-add SYS_PTRACE; "
        "Kubernetes securityContext.capabilities.add: [SYS_PTRACE])"
    )
    return "; ".join(advice)


# Internals ----------------------------------------------------------------------------------------


def _describe(process: psutil.Process) -> HangProcess:
    with process.oneshot():
        try:
            command = " ".join(process.cmdline()) or process.name()
        except (psutil.Error, OSError):
            command = ""
        try:
            status, ppid = str(process.status()), process.ppid()
        except (psutil.Error, OSError):
            status, ppid = "gone", 0
    if len(command) > MAX_COMMAND:
        command = command[:MAX_COMMAND] + "..."
    return HangProcess(pid=process.pid, ppid=ppid, command=command, status=status)


def _frame(entry: dict[str, Any], number: int) -> HangFrame:
    file = str(entry.get("filename") or "?")
    line = int(entry.get("line") or 0)
    library = is_library(file)
    return HangFrame(
        file=file,
        line=line,
        function=str(entry.get("name") or "?"),
        code=classifier.source_line(file, line) if number == 0 or not library else "",
        library=library,
    )


def _why(stderr: str, pid: int) -> str:
    """py-spy's complaint, in words that say what to do."""
    first = next((line for line in stderr.splitlines() if line.strip()), "")
    text = " ".join(first.split()).removeprefix("Error: ")
    lowered = stderr.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return f"py-spy may not attach to pid {pid} (ptrace not permitted): {ptrace_advice()}"
    if "failed to find python version" in lowered or "not a python" in lowered:
        return "not a Python process"
    if "no such process" in lowered:
        return "it ended before it could be read"
    return f"py-spy could not read it: {text[:300] or 'no reason given'}"
