"""`mcpdebug run -- COMMAND`: a command recorded as a live process session, and controllable.

The runner starts the command, copies its output through (like ``tee``) while streaming each line
to the server as the session's output, passes its own signals on to the command's process group,
and exits with the command's status (128 + N when signal N ended it, as a shell reports it). It
answers the server's control requests over the same connection: restart, signal, stdin.

Everything that changes the command's process happens in the main thread, one thing at a time: the
requests (handed over by the sender thread), the command's exits (reported by a waiter thread), the
runner's own signals, a restart that is due. The same runner, started by `mcpdebug serve` with
``--watch-fd``, is what `start_process` manages: it applies the restart policy and stops the
command when the server that started it goes away, even if that server was killed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from mcpdebug.heap import keep_freed_buffers
from mcpdebug.processes.child import Child, StdinError, returncode_text
from mcpdebug.processes.control import STOP_GRACE, ControlRequests
from mcpdebug.processes.say import stderr_say
from pytest_mcpdebug.limits import MAX_LINE_LENGTH

if TYPE_CHECKING:
    from mcpdebug.processes.session_client import SessionClient

RESTART_POLICIES: Final = ("no", "on-failure", "always")
CLEAN_SIGNALS: Final = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE})
"""An exit by one of these is a stop, not a failure (as systemd's Restart=on-failure counts it)."""
FORWARDED: Final = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
# Timeouts
RESTART_DELAY: Final = (1.0, 30.0)
"""A crashing command is restarted after 1 s, then 2, 4, ... up to 30 s while it keeps crashing."""
STABLE_AFTER: Final = 10.0
"""A command that ran this long before exiting is restarted after the shortest delay again."""
SCRUBBED_ENV: Final = ("MCPDEBUG_URL", "MCPDEBUG_TOKEN")


class RunOptions(NamedTuple):
    """(Not a dataclass: importing `dataclasses` would delay the command's start by ~3 ms.)"""

    command: list[str]
    directory: Path
    label: str = ""
    server_url: str | None = None
    restart: str = "no"
    echo: bool = True
    mode: str = "run"
    run_id: str | None = None
    watch_fd: int | None = None
    cwd: str | None = None
    max_line_length: int = MAX_LINE_LENGTH


class Supervisor(ControlRequests):
    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.say = stderr_say("mcpdebug run") if options.echo else None
        cwd = options.cwd or os.getcwd()
        self._session: SessionClient | None = None
        self._early: list[tuple[str, Any]] = []
        """What the command did before the session was opened: ("lines", args), ("status", kwargs)."""
        self._early_lock = threading.Lock()
        self.env = dict(os.environ)
        if options.mode == "managed":  # the server's token is for the runner, not for the command
            for name in SCRUBBED_ENV:
                self.env.pop(name, None)
        self.cwd = cwd
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.child: Child | None = None
        self.exit_code: int | None = None
        self.restart_at: float | None = None
        self.stopping = False
        """The runner itself was told to stop (its own signal, or its starter went away)."""
        self.stop_requested = ""
        """Why the running command was asked to stop ("" if it was not): it is then not restarted."""
        self.stdin_ended = False
        self._delay = 0.0

    # The session ----------------------------------------------------------------------------------

    @property
    def session(self) -> SessionClient:
        assert self._session is not None, "the session is opened right after the command starts"
        return self._session

    def _open_session(self) -> None:
        """Import and open the session once the command runs: the protocol, msgspec and the sender
        are ~25 ms of imports the command need not wait for. What it wrote meanwhile goes first."""
        from mcpdebug.processes.session_client import SessionClient

        session = SessionClient(
            mode=self.options.mode,
            directory=self.options.directory,
            command=self.options.command,
            cwd=self.cwd,
            label=self.options.label,
            capabilities=("process_control", "stdin"),
            restart=self.options.restart,
            server_url=self.options.server_url,
            token=os.environ.get("MCPDEBUG_TOKEN") or None,
            run_id=self.options.run_id,
            say=self.say,
        )
        session.sender.on_request = lambda request: self.inbox.put(("request", request))
        with self._early_lock:
            for kind, args in self._early:
                if kind == "lines":
                    session.lines(*args)
                else:
                    session.status(**args)
            self._early.clear()
            self._session = session

    def _lines(self, stream: str, block: bytes, count: int, ts: float) -> None:
        """From the reader thread: the command's lines, to the session (or kept until it is open)."""
        if self._session is None:
            with self._early_lock:
                if self._session is None:
                    self._early.append(("lines", (stream, block, count, ts)))
                    return
        self._session.lines(stream, block, count, ts)

    def _status(self, status: str, **fields: Any) -> None:
        if self._session is None:
            with self._early_lock:
                if self._session is None:
                    self._early.append(("status", {"status": status, **fields}))
                    return
        self._session.status(status, **fields)

    # Main loop ------------------------------------------------------------------------------------

    def run(self) -> int:
        for signum in FORWARDED:
            signal.signal(signum, self._on_signal)
        with contextlib.suppress(AttributeError, ValueError):
            signal.signal(signal.SIGTTIN, signal.SIG_IGN)  # a runner in a background job reads no tty
        self._start_child()  # first: the command does not wait for our imports, nor for the server
        keep_freed_buffers()
        self._open_session()
        self.session.start()
        if self.exit_code is None:
            if _has_stdin():
                threading.Thread(target=self._pump_stdin, name="mcpdebug-stdin", daemon=True).start()
            if self.options.watch_fd is not None:
                threading.Thread(target=self._watch, name="mcpdebug-watch", daemon=True).start()
        while self.exit_code is None:
            wait = 0.5 if self.restart_at is None else max(self.restart_at - time.monotonic(), 0)
            try:
                kind, value = self.inbox.get(timeout=wait)
            except queue.Empty:
                kind, value = "tick", None
            self._handle(kind, value)
            if self.restart_at is not None and time.monotonic() >= self.restart_at:
                self.restart_at = None
                self.session.status("restarting", message=f"restart={self.options.restart}")
                self._start_child(message="restarted")
        self.session.close()
        return self.exit_code

    def _handle(self, kind: str, value: Any) -> None:
        if kind == "exited" and value is self.child and self.child is not None:
            self._exited(self.child)
        elif kind == "request":
            self._answer(value)
        elif kind == "stdin-eof":
            self.stdin_ended = True
            if self.child is not None:
                self.child.close_stdin()
        elif kind == "watched-gone":
            self.stopping = True
            self._stop_child("the process that started it ended")
        elif kind == "signal" and self.stopping and self.child is None:
            self.restart_at = None  # a stop while waiting to restart: end here
            self._end("stopped", None, f"mcpdebug run received {signal.Signals(value).name}", 128 + value)

    # The command ----------------------------------------------------------------------------------

    def _start_child(self, message: str = "started") -> int | None:
        child = Child(
            self.options.command,
            cwd=self.cwd,
            env=self.env,
            on_lines=self._lines,
            echo=self.options.echo,
            max_line_length=self.options.max_line_length,
            die_with_parent=self.options.mode == "managed",
        )
        try:
            pid = child.start()
        except OSError as exc:
            code = 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 126
            text = f"cannot run {self.options.command[0]!r}: {exc.strerror}"
            if self.say is not None:
                self.say(text)
            self._end("crashed", None, text, code)
            return None
        self.child, self.stop_requested = child, ""
        if self.stdin_ended:
            child.close_stdin()
        threading.Thread(target=self._wait, args=(child,), name="mcpdebug-wait", daemon=True).start()
        self._status("running", pid=pid, message=f"{message} pid {pid}")
        return pid

    def _wait(self, child: Child) -> None:
        assert child.process is not None
        child.process.wait()
        self.inbox.put(("exited", child))

    def _exited(self, child: Child) -> None:
        code = child.process.returncode if child.process is not None else 0
        child.join_reader(1.0)  # its last lines go before its status
        self.child = None
        clean = code == 0 or (code < 0 and -code in CLEAN_SIGNALS)
        status = "stopped" if clean or self.stop_requested else "crashed"
        text = returncode_text(code) + (f"; {self.stop_requested}" if self.stop_requested else "")
        policy = self.options.restart
        again = policy == "always" or (policy == "on-failure" and not clean)
        if again and not self.stopping and not self.stop_requested:
            ran = time.monotonic() - child.started
            first, longest = RESTART_DELAY
            self._delay = first if ran >= STABLE_AFTER or not self._delay else min(self._delay * 2, longest)
            self.restart_at = time.monotonic() + self._delay
            message = f"{text}; restarting in {self._delay:g} s (restart={policy})"
            self.session.status(status, pid=child.pid, exit_code=code, message=message)
            return
        self._end(status, child.pid, text, code if code >= 0 else 128 - code, exit_code=code)

    def _end(
        self, status: str, pid: int | None, message: str, runner_code: int, exit_code: int | None = None
    ) -> None:
        self._status(
            status,
            pid=pid,
            exit_code=runner_code if exit_code is None else exit_code,
            message=message,
            ended=True,
        )
        self.exit_code = runner_code

    def _stop_child(self, why: str) -> None:
        """Stop the command (its exit is handled when the waiter reports it)."""
        if self.child is None:
            self.restart_at = None
            self._end("stopped", None, why, 0)
            return
        self.stop_requested = why
        self.child.stop(STOP_GRACE)

    # Control requests -----------------------------------------------------------------------------

    # Threads and signals --------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: Any) -> None:
        """Pass a signal on to the command's group; Ctrl-C or SIGTERM also ends the session (a
        second one kills the group)."""
        child = self.child
        if signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if self.stopping and child is not None and signum != signal.SIGHUP:
                child.signal(signal.SIGKILL)
            self.stopping = True
            self.stop_requested = (
                self.stop_requested or f"mcpdebug run received {signal.Signals(signum).name}"
            )
        if child is not None:
            child.signal(signum)
        self.inbox.put(("signal", signum))

    def _pump_stdin(self) -> None:
        """The runner's own stdin goes to the command; when it ends, so does the command's."""
        while True:
            try:
                data = os.read(0, 65536)
            except OSError:  # a background job's tty (EIO): leave the command's stdin open
                return
            if not data:
                self.inbox.put(("stdin-eof", None))
                return
            child = self.child
            if child is not None:
                with contextlib.suppress(StdinError):
                    child.write_stdin(data, timeout=None)

    def _watch(self) -> None:
        """End with the process holding the other end of ``--watch-fd`` (the server, or a test)."""
        fd = self.options.watch_fd
        assert fd is not None
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass
        self.inbox.put(("watched-gone", None))


def _has_stdin() -> bool:
    """Whether the runner has a stdin to pass on (not /dev/null, not closed)."""
    try:
        return not os.path.samestat(os.fstat(0), os.stat(os.devnull))
    except OSError:
        return False


def main(args: argparse.Namespace, directory: Path) -> int:
    """`mcpdebug run`, from its parsed arguments (see `mcpdebug.cli`)."""
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("mcpdebug run: give the command to run, e.g. mcpdebug run -- python app.py", file=sys.stderr)
        return 2
    options = RunOptions(
        command=command,
        directory=directory,
        label=args.label or "",
        server_url=args.server_url or os.environ.get("MCPDEBUG_URL") or None,
        restart=args.restart,
        echo=not args.quiet,
        mode="managed" if args.managed else "run",
        run_id=args.run_id,
        watch_fd=args.watch_fd,
    )
    return Supervisor(options).run()
