"""One run of a session's command: the process, its process group, and the thread reading its output.

The command runs in a session (and process group) of its own, so a terminal's Ctrl-C reaches only
the runner, which passes it on to the whole group, and a signal from `control_process` reaches what
the command started too. Its stdout and stderr are read by one thread, cut into bounded lines (see
`LineSplitter`), copied through to the runner's own stdout and stderr (like ``tee``) and handed to
the session. A line the command leaves unfinished for `PARTIAL_FLUSH` seconds (a prompt) is stored
as it stands.

A managed process must not outlive its runner even when the runner is killed with SIGKILL: on
Linux it is started through a tiny launcher that asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``) and then executes the command. The kernel ties that to the parent *thread*,
so children are only ever started from the runner's main thread.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Final

from pytest_mcpdebug.output.lines import LineSplitter

# Timeouts
PARTIAL_FLUSH: Final = 1.0
STDIN_TIMEOUT: Final = 2.0
"""How long a `send_stdin` may wait for a process that is not reading its stdin."""
GATHER: Final = 0.002
"""After a read that did not fill the buffer, let the command write this long before reading again:
a command printing fast is then read (and sent) in large blocks rather than its 4-8 KB writes, for
a few milliseconds of latency."""
# Limits
READ_SIZE: Final = 1024 * 1024
PIPE_SIZE: Final = 1024 * 1024
"""Pipe capacity asked for (Linux's default limit for a user): room for what a command writes while
the reader gathers."""
F_SETPIPE_SZ: Final = 1031

LAUNCHER: Final = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"  # the runner died before prctl took hold
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    sys.stderr.write(f'mcpdebug: cannot run {sys.argv[2]!r}: {e.strerror}\\n')\n"
    "    os._exit(127)\n"
)

Lines = Callable[[str, bytes, int, float], None]
"""Receives (stream, complete lines joined by newlines, their count, when they were read)."""


class StdinError(Exception):
    """Input that cannot be delivered; the message says why."""


class Child:
    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str | None,
        env: dict[str, str] | None,
        on_lines: Lines,
        echo: bool,
        max_line_length: int,
        die_with_parent: bool = False,
    ) -> None:
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.on_lines = on_lines
        self.echo = echo
        self.max_line_length = max_line_length
        self.die_with_parent = die_with_parent and sys.platform.startswith("linux")
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self._reader: threading.Thread | None = None
        self._stdin_lock = threading.Lock()

    # Life cycle ---------------------------------------------------------------------------------

    def start(self) -> int:
        """Start the command; returns its pid. Raises OSError when it cannot be started."""
        argv = self.argv
        if self.die_with_parent:
            argv = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(os.getpid()), *argv]
        self.process = subprocess.Popen(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.started = time.monotonic()
        assert self.process.stdin is not None
        os.set_blocking(self.process.stdin.fileno(), False)
        self._reader = threading.Thread(target=self._read, name="mcpdebug-reader", daemon=True)
        self._reader.start()
        return self.process.pid

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def poll(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the command's process group (to the process alone if the group is gone)."""
        if self.process is None or self.process.returncode is not None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signum)
        except PermissionError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.process.pid, signum)

    def stop(self, grace: float) -> int:
        """SIGTERM to the group, SIGKILL after ``grace`` seconds; returns the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # what it left behind in its group
        return self.process.returncode

    def join_reader(self, timeout: float) -> None:
        """Wait for the last lines (the reader ends when every writer of the pipes has closed them)."""
        if self._reader is not None:
            self._reader.join(timeout)

    # Stdin ----------------------------------------------------------------------------------------

    def write_stdin(self, data: bytes, timeout: float | None = STDIN_TIMEOUT) -> int:
        """Write ``data`` to the command's stdin; raises StdinError if it closed it or does not read."""
        stdin = self._stdin()
        fd = stdin.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        written = 0
        with self._stdin_lock:
            while written < len(data):
                try:
                    written += os.write(fd, data[written:])
                    continue
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ValueError, OSError) as exc:
                    raise StdinError(f"the process closed its stdin ({_reason(exc)})") from None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise StdinError(
                        f"the process is not reading its stdin: {written} of {len(data)} bytes were taken "
                        f"in {timeout:g} s"
                    )
                select.select([], [fd], [], left)
        return written

    def close_stdin(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            with self._stdin_lock, contextlib.suppress(OSError):
                self.process.stdin.close()

    def _stdin(self) -> IO[bytes]:
        if self.process is None or self.process.stdin is None or self.process.stdin.closed:
            raise StdinError("the process's stdin is closed")
        return self.process.stdin

    # Output ---------------------------------------------------------------------------------------

    def _read(self) -> None:
        assert (
            self.process is not None and self.process.stdout is not None and self.process.stderr is not None
        )
        streams = {
            self.process.stdout.fileno(): ("stdout", 1),
            self.process.stderr.fileno(): ("stderr", 2),
        }
        splitters = {name: LineSplitter(self.max_line_length) for name, _ in streams.values()}
        held: dict[str, float] = {}  # stream -> since when an unfinished line is held
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                _grow_pipe(fd)
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                wait = max(min(held.values()) + PARTIAL_FLUSH - time.monotonic(), 0) if held else None
                ready = selector.select(wait)
                now = time.time()
                full = False
                for key, _ in ready:
                    name, echo_fd = streams[key.fd]
                    data = _read_some(key.fd)
                    full = full or len(data) == READ_SIZE
                    if not data:
                        selector.unregister(key.fd)
                        self._deliver(name, splitters[name].flush(), now)
                        held.pop(name, None)
                        continue
                    if self.echo:
                        self.echo = _write_all(echo_fd, data)
                    self._deliver(name, splitters[name].feed(data), now)
                    if splitters[name].holding:
                        held.setdefault(name, time.monotonic())
                    else:
                        held.pop(name, None)
                for name, since in list(held.items()):
                    if time.monotonic() - since >= PARTIAL_FLUSH:
                        self._deliver(name, splitters[name].flush(), now)
                        del held[name]
                if ready and not full:
                    time.sleep(GATHER)

    def _deliver(self, stream: str, lines: tuple[bytes, int], ts: float) -> None:
        block, count = lines
        if count:
            self.on_lines(stream, block, count, ts)


def _grow_pipe(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", F_SETPIPE_SZ), PIPE_SIZE)


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, READ_SIZE)  # the selector said readable: data, or b"" at the end
    except OSError:
        return b""


def _write_all(fd: int, data: bytes) -> bool:
    """Copy output through to the runner's own stdout or stderr; False once that is gone."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__


def returncode_text(code: int) -> str:
    """``exit status 3`` or ``killed by SIGSEGV``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
