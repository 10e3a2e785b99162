"""Threads and processes a hung test leaves behind, named at the end of the run.

An interrupted test unwinds, but the worker it waited on does not: a thread blocked in
``queue.get()``, a child deadlocked on a lock. They outlive the test, and a non-daemon thread keeps
the interpreter from exiting at all (``threading`` joins it, ``concurrent.futures`` too). What a
hung test started and left running is named in the terminal summary, and `exit_now` ends a process
whose session is over but whose leaked threads would hold it for ever, with pytest's exit status.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Collection
from typing import Any

OWN_THREADS = "mcpdebug-"
END_GRACE = 3.0
"""Seconds a leftover process has to end on SIGTERM before SIGKILL."""


class Leak:
    __slots__ = ("nodeid", "processes", "threads")

    def __init__(
        self,
        nodeid: str,
        threads: list[tuple[int, str, bool, str]] | None = None,
        processes: list[tuple[int, str, str]] | None = None,
    ) -> None:
        self.nodeid = nodeid
        self.threads: list[tuple[int, str, bool, str]] = [] if threads is None else threads
        """(ident, name, daemon, where it is)."""
        self.processes: list[tuple[int, str, str]] = [] if processes is None else processes
        """(pid, command line, where it is or its state)."""

    def as_dict(self) -> dict[str, Any]:
        """Its fields, for the state a replacement process reads back (``Leak(**leak)``)."""
        return {"nodeid": self.nodeid, "threads": self.threads, "processes": self.processes}

    def describe(self) -> str:
        parts = [
            f"thread {name!r}{' (daemon)' if daemon else ''}: {where}"
            for _, name, daemon, where in self.threads
        ]
        parts += [f"child {pid} ({command}): {where}" for pid, command, where in self.processes]
        return "; ".join(parts)


class Leaks:
    def __init__(self) -> None:
        self.found: list[Leak] = []
        self._before: frozenset[int] = frozenset()

    def before(self) -> None:
        """At the start of a timed test: the threads that are not its own."""
        self._before = frozenset(t.ident for t in threading.enumerate() if t.ident is not None)

    def after(self, nodeid: str, exclude_pids: Collection[int] = ()) -> Leak | None:
        """At the end of a test that hung: what it started that still runs."""
        from pytest_mcpdebug.hangs import processes as outside  # psutil: only once a test hung
        from pytest_mcpdebug.hangs import waits

        frames = sys._current_frames()
        leak = Leak(nodeid)
        for thread in threading.enumerate():
            if thread.ident in self._before or thread.ident is None or thread.name.startswith(OWN_THREADS):
                continue
            where = waits.where(frames.get(thread.ident)).summary if thread.ident in frames else "running"
            leak.threads.append((thread.ident, thread.name, thread.daemon, where))
        for process in outside.survey(exclude=exclude_pids, timeout=2.0):
            where = process.summary or process.status
            leak.processes.append((process.pid, process.command[:120], where))
        if not leak.threads and not leak.processes:
            return None
        self.found.append(leak)
        return leak

    def end_processes(self, grace: float = END_GRACE) -> list[str]:
        """After the session: end the processes hung tests left running that are still alive (and
        still this process's descendants): SIGTERM, then SIGKILL after ``grace`` seconds. Else a
        non-daemon ``multiprocessing`` child keeps pytest from exiting (its exit joins them), and
        any of them keeps the run's output pipe open (`pytest | tee` in CI never ends). They are
        left for their owners to reap (``Process.join`` at exit, ``Popen.wait``). What was signalled,
        each as "child PID (command)", marked if it outlived SIGKILL too."""
        pids = {pid for leak in self.found for pid, _, _ in leak.processes}
        if not pids:
            return []
        import psutil

        me, alive = os.getpid(), []
        for pid in sorted(pids):
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                if me in {p.pid for p in process.parents()} and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
        commands = {p.pid: _command(p) for p in alive}
        for signal_them in ("terminate", "kill"):
            for process in alive:
                with contextlib.suppress(psutil.Error):
                    getattr(process, signal_them)()
            alive = _outlive(alive, grace)
            if not alive:
                break
        survivors = {p.pid for p in alive}  # not even SIGKILL ended them (a wait in the kernel)
        return [
            f"child {pid} ({command})" + (" still running after SIGKILL" if pid in survivors else "")
            for pid, command in commands.items()
        ]

    def stuck(self) -> list[threading.Thread]:
        """Leaked non-daemon threads still alive: the interpreter would wait for them at exit."""
        leaked = {ident for leak in self.found for ident, _, daemon, _ in leak.threads if not daemon}
        return [t for t in threading.enumerate() if t.ident in leaked and t.is_alive()]


def _command(process: Any) -> str:
    """Its command line's first words, for the note that it was ended ("?" if it cannot be read)."""
    try:
        return " ".join(process.cmdline()[:3]) or "?"
    except Exception:
        return "?"


def _outlive(processes: list[Any], grace: float) -> list[Any]:
    """The processes still running (not ended, not zombies) after up to ``grace`` seconds; a zombie
    is left for its parent to reap."""
    import psutil

    deadline = time.monotonic() + grace
    while True:
        running = []
        for process in processes:
            with contextlib.suppress(psutil.Error):
                if process.status() != psutil.STATUS_ZOMBIE:
                    running.append(process)
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.05)
        processes = running


def exit_now(status: int, stuck: list[threading.Thread], stderr: int) -> None:
    """End the process with ``status``: its session is over, only leaked threads keep it alive."""
    names = ", ".join(repr(t.name) for t in stuck[:5]) + (
        f" and {len(stuck) - 5} more" if len(stuck) > 5 else ""
    )
    text = (
        f"mcpdebug: {len(stuck)} thread(s) left running by hung tests ({names}) would keep this process "
        f"from exiting; it exits now with status {status}\n"
    )
    with contextlib.suppress(OSError):
        os.write(stderr, text.encode("utf-8", "replace"))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
