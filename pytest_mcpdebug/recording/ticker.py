"""Waking the sender thread only when there is something to look at, so quick tests cost no wake-up.

The sender thread looks at a running test once it is a tick old: it announces it and reads what it
wrote. Waking every tick to find out costs the test thread a GIL hand-over each time, however quick the
tests: ~10 a second, and on a 2-core VM a hand-over between threads on different CPUs becomes a convoy
(the waking thread is woken again at each of the test thread's system calls, ~1,000 times a run; see
`colocate`). Nothing in the test process can wait for "the running test turned a tick old" without
the GIL or a system call per test.

So a helper process waits instead: the test thread already writes the running test's name into the
mapped header of the crash dump file at each test's start and clears it at its end (`hangs.gil_dump`).
The helper, a few lines of stdlib Python (``python -I -S``), reads that header every quarter tick and
writes a byte to a pipe when the same test has been running for a tick (and every tick after, while
it runs), when no test has run for two ticks (collection, the session's end: their output is read
live too), or when ``server.json`` appears or changes (a server started mid-run). The sender thread
sleeps in ``select`` on the pipe: during a run of quick tests it does not wake at all. The sender
thread starts the helper itself, after its first interval (`Sender.start_ticker`): the test thread never
waits for the spawn, and a run over before that (one quick test) never pays for an interpreter's start.

The helper is not a child of the test process (it forks and its parent exits at once), so a test that
waits for every child, or counts them, never sees it; it ends when the test process closes its end of
a pipe, which happens however the test process ends (a child the test process forks lets its copy
go: `forks`). If it cannot start or dies, the pipe says so (end of file) and the sender goes back to waking
every tick.

A worker that sends through its controller (`via_controller`) hands the helper a watch of pytest's
capture files too (`output.written`, inotify): the helper sleeps on it as well and pokes (`o`) when
output was written by a test a quarter tick old or more, once the writes paused for a millisecond (a
print writes its text, then its newline) and at most every quarter tick; the sender thread then reads
the test whatever its age. That worker's line leaves as it is written, not at the next tick. Its
helper starts with the session (the recorder pokes the sender thread at once), not after a first
interval.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from pathlib import Path
from typing import Final

from pytest_mcpdebug import forks

_HELPER = """
import os, select, signal, sys, time
if os.fork():
    os._exit(0)  # the test process reaps this one at once; the helper is nobody's child of theirs
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C is the test process's to handle; its end ends this
header, server, tick = sys.argv[1], sys.argv[2], float(sys.argv[3])
written = len(sys.argv) > 4  # fd 5: a watch of pytest's capture files (`written`)
poke, life, watch, young, settle = 3, 4, 5, tick / 4, 0.001  # print writes a line, then its newline
os.set_blocking(poke, False)
fd = os.open(header, os.O_RDONLY)
seen, since, started, server_seen = None, 0.0, 0.0, None
output_due, output_poked, first, settled = False, -tick, 0.0, 0.0
while True:
    now = time.monotonic()
    timeout, fds = tick / 4, [life]
    if output_due:  # once the writes pause, the running test is old enough, a gap after the last poke
        timeout = min(timeout, max(started + young, output_poked + young, settled) - now)
        if now < settled:
            fds.append(watch)
    elif written and now >= output_poked + young:
        fds.append(watch)
    elif written:
        timeout = min(timeout, output_poked + young - now)
    ready = select.select(fds, [], [], max(timeout, 0))[0]
    if life in ready:
        break
    now = time.monotonic()
    if watch in ready:
        try:
            os.read(watch, 65536)
        except BlockingIOError:
            pass
        except OSError:
            written = False
        if not output_due:
            first = now
        output_due, settled = True, min(now + settle, first + 4 * settle)
    try:
        test = os.pread(fd, 4096, 0).split(b"\\n", 2)[1]
    except (OSError, IndexError):
        break
    try:
        st = os.stat(server)
        state = (st.st_ino, st.st_mtime_ns)
    except OSError:
        state = None
    why = b""
    if state != server_seen:
        server_seen, why = state, b"s" if state is not None else b""
    if test != seen:
        seen, since, started = test, now, now
    elif now - since >= (tick if test else 2 * tick):
        since, why = now, why + b"t"
    if output_due and now >= max(started + young, output_poked + young, settled):
        output_due, output_poked, why = False, now, why + b"o"
    if why:
        try:
            os.write(poke, why)
        except BlockingIOError:
            pass  # pokes are waiting already
        except OSError:
            break
"""


TICK_DUE: Final = b"t"
"""A poke's reason: a test a tick old (or no test for two ticks): time for the sender's look."""
SERVER_CHANGED: Final = b"s"
"""A poke's reason: ``server.json`` appeared or changed: try to connect now."""
OUTPUT_WRITTEN: Final = b"o"
"""A poke's reason: pytest's capture files were written (`written`) by a test a quarter tick old
or more (a younger one's output goes with its end if it ends by then), at most once a quarter tick:
time for the output tail to read."""


class Ticker:
    """The test process's side: the pipe the sender thread waits on, and the helper's life line."""

    def __init__(self, fd: int, life_fd: int, pid: int) -> None:
        self.fd = fd
        """Readable when there is something to look at (a poke), or at end of file if the helper is gone."""
        with forks.owning():
            self._wake_r, self._wake_w = os.pipe()
            """`wake`'s own pipe: the poke pipe's write end is the helper's alone, so its end is seen."""
            forks.own(self._wake_r)
            forks.own(self._wake_w)
        os.set_blocking(self._wake_w, False)
        self._fds: tuple[int, ...] = (life_fd, fd, self._wake_r, self._wake_w)
        """Closing the first, the helper's life line, ends it."""
        self.alive = True
        # The helper's parent exits once it has forked the helper (~10 ms: an interpreter's start):
        # a thread of its own waits for it, so the thread that started it (the sender's) goes on at
        # once and no child is left over.
        reaper = threading.Thread(target=_reap, args=(pid,), name="mcpdebug-ticker-reaper", daemon=True)
        reaper.pydev_do_not_trace = True  # type: ignore[attr-defined]  # a debug run's debugpy neither
        reaper.is_pydev_daemon_thread = True  # type: ignore[attr-defined]  # traces nor suspends it
        reaper.start()

    @classmethod
    def start(cls, header: Path, server_file: Path, tick: float, written: int | None = None) -> Ticker | None:
        """Start the helper; None where that is not possible (no ``posix_spawn``, no interpreter).
        ``written``: a `WriteWatch`'s descriptor, for the helper to poke when output is written."""
        spawn = getattr(os, "posix_spawn", None)
        executable = sys.executable
        if spawn is None or not executable or not hasattr(os, "POSIX_SPAWN_DUP2"):
            return None
        with forks.owning():  # a test's fork copies none of them
            poke_r, poke_w = os.pipe()
            life_r, life_w = os.pipe()
            poke_w, life_r = _above(poke_w, 4), _above(life_r, 4)  # so the dup2s below cannot clash
            for fd in (poke_r, poke_w, life_r, life_w):
                forks.own(fd)
        args = [executable, "-I", "-S", "-c", _HELPER, str(header), str(server_file), repr(tick)]
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, poke_w, 3),
            (os.POSIX_SPAWN_DUP2, life_r, 4),
        ]
        watch = -1
        if written is not None:  # a copy above 5, so the dup2s before it cannot clash with it
            import fcntl

            with forks.owning(), contextlib.suppress(OSError):
                watch = fcntl.fcntl(written, fcntl.F_DUPFD_CLOEXEC, 6)
                forks.own(watch)
            if watch >= 0:
                actions.append((os.POSIX_SPAWN_DUP2, watch, 5))
                args.append("written")
        try:
            pid = spawn(executable, args, os.environ, file_actions=actions)
        except OSError:
            for fd in (poke_r, poke_w, life_r, life_w):
                forks.disown(fd)
                os.close(fd)
            return None
        finally:
            if watch >= 0:
                forks.disown(watch)
                os.close(watch)
        for fd in (life_r, poke_w):
            forks.disown(fd)
            os.close(fd)
        os.set_blocking(poke_r, False)
        return cls(poke_r, life_w, pid)

    def wait(self, timeout: float | None) -> bytes:
        """Sleep until a poke or `wake` (or ``timeout`` seconds), then take every poke waiting: what they
        say (`TICK_DUE`, `SERVER_CHANGED`; `wake`'s ``!``), empty if none came. Notices the helper's
        end (`alive`)."""
        if not self.alive:
            return b""
        try:
            ready = select.select([self.fd, self._wake_r], [], [], timeout)[0]
        except (OSError, ValueError):  # closed under it (a sender thread wedged past the end)
            self.alive = False
            return b""
        said = b""
        for fd in ready:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self.alive = False  # the helper is gone: the sender wakes every tick again
            said += data
        return said

    def wake(self) -> None:
        """Wake the waiting sender thread now (the run is ending)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    def close(self) -> None:
        """End the helper (its life line closes) and close the pipe; after the sender thread ended."""
        self.alive = False
        fds, self._fds = self._fds, ()
        for fd in fds:  # once: a number closed twice may be someone else's by then
            forks.disown(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


def _reap(pid: int) -> None:
    with contextlib.suppress(OSError):  # ChildProcessError: a test waiting for any child reaped it
        os.waitpid(pid, 0)


def _above(fd: int, floor: int) -> int:
    """``fd``, or a copy of it numbered above ``floor`` (the original closed)."""
    if fd > floor:
        return fd
    import fcntl

    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor + 1)
    os.close(fd)
    return copy
