"""Processes the server starts (`start_process`) and the control of any process session.

A managed process runs under a runner of its own (``mcpdebug run --managed``), so its lines, its
states and its control take the same path as a `mcpdebug run` session's: runner -> ingest -> store,
and control requests back over the runner's connection. The runner applies the restart policy.

No orphans: the server hands each runner the read end of a pipe (``--watch-fd``) and keeps the
write end; when the server exits, however it exits (even SIGKILL), the pipe reads as ended and the
runner stops its command (SIGTERM to its process group, SIGKILL 5 s later) and exits. The runner
itself starts the command so that the kernel kills it should the runner die (see `child`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcpdebug.live.sessions import SessionError, Sessions
from mcpdebug.processes.control import STOP_GRACE
from mcpdebug.processes.runner import RESTART_POLICIES
from mcpdebug.store import Store
from mcpdebug.views import processes as processes_view
from pytest_mcpdebug.recording.run_id import new_run_id
from pytest_mcpdebug.redaction import redact

# Timeouts
REGISTER_TIMEOUT: Final = 20.0
"""How long a new runner may take to start and report its command's first state."""
STOP_SETTLE: Final = 3.0
"""After a stopping signal, how long `control` waits to report the state it led to."""
# Limits
MAX_STARTUP: Final = 60.0


class ProcessError(Exception):
    """A process that cannot be started or controlled; the message says what to do."""


@dataclass
class Managed:
    run_id: str
    runner: asyncio.subprocess.Process
    watch: int
    """The write end of the runner's ``--watch-fd`` pipe: closing it stops the runner."""
    log: Path


class ProcessManager:
    def __init__(self, store: Store, sessions: Sessions, *, url: str | None, token: str | None) -> None:
        self.store = store
        self.sessions = sessions
        self.url = url
        self.token = token
        self.managed: dict[str, Managed] = {}

    # start_process --------------------------------------------------------------------------------

    async def start(
        self,
        command: str | list[str],
        *,
        label: str | None,
        cwd: str | None,
        env: dict[str, str] | None,
        restart: str,
        startup_seconds: float,
    ) -> dict[str, Any]:
        """Start ``command`` as a managed session; returns the session once its first
        ``startup_seconds`` have passed (or it ended sooner)."""
        if self.url is None or self.token is None:
            raise ProcessError(
                "This server does not ingest live sessions (another `mcpdebug serve` on the same folder "
                "does), so it cannot follow a process it starts; call start_process on that server."
            )
        argv = _argv(command)
        folder = Path(cwd).expanduser() if cwd else self.store.dir.parent
        if not folder.is_dir():
            raise ProcessError(
                f"cwd {str(folder)!r} is not a directory; give an existing folder (or omit cwd)."
            )
        if restart not in RESTART_POLICIES:
            raise ProcessError(f"restart={restart!r} is not valid; use one of {', '.join(RESTART_POLICIES)}.")
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **_env(env)}
        _check_executable(argv[0], folder, environment.get("PATH"))
        run_id = new_run_id()
        log = self.store.dir / "processes" / f"{run_id}.log"  # the runner's own messages
        log.parent.mkdir(parents=True, exist_ok=True)
        read_end, write_end = os.pipe()
        runner_argv = [sys.executable, "-m", "mcpdebug", "run", "--managed", "--quiet"]
        runner_argv += ["--run-id", run_id, "--watch-fd", str(read_end), "--restart", restart]
        runner_argv += ["--dir", str(self.store.dir), "--server-url", self.url]
        runner_argv += ["--label", label] if label else []
        try:
            with open(log, "ab") as out:
                runner = await asyncio.create_subprocess_exec(
                    *runner_argv,
                    "--",
                    *argv,
                    cwd=folder,
                    env={**environment, "MCPDEBUG_TOKEN": self.token},
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    pass_fds=(read_end,),
                    start_new_session=True,
                )
        except OSError as exc:
            os.close(write_end)
            raise ProcessError(f"Could not start the runner ({sys.executable}): {exc.strerror}") from None
        finally:
            os.close(read_end)
        self.managed[run_id] = Managed(run_id, runner, write_end, log)
        session = await self._registered(run_id, runner, log)
        deadline = time.monotonic() + min(max(startup_seconds, 0.0), MAX_STARTUP)
        while session["finished"] is None and time.monotonic() < deadline:
            await self.sessions.changed(min(0.25, max(deadline - time.monotonic(), 0.01)))
            session = await self.session(run_id)
        return session

    async def _registered(self, run_id: str, runner: asyncio.subprocess.Process, log: Path) -> dict[str, Any]:
        """The session once its runner has reported the command's first state."""
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while True:
            found = await asyncio.to_thread(self.store.process_sessions, run_id)
            if found and found[0]["status_seq"]:
                return found[0]
            if runner.returncode is not None or time.monotonic() > deadline:
                tail = _tail(log)
                raise ProcessError(
                    f"The runner of {run_id} "
                    + (
                        f"exited with status {runner.returncode}"
                        if runner.returncode is not None
                        else "did not report"
                    )
                    + f" before the command started.{' Its log: ' + tail if tail else ''}"
                )
            await self.sessions.changed(0.1)

    async def session(self, run_id: str) -> dict[str, Any]:
        found = await asyncio.to_thread(self.store.process_sessions, run_id)
        if not found:
            raise ProcessError(f"No process session {run_id}.")
        return found[0]

    # control_process and send_stdin ---------------------------------------------------------------

    async def control(
        self, session: dict[str, Any], command: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """Send a request to a session's runner; returns its result (``pid``, ``old_pid``, ``bytes``)."""
        label = session["label"]
        if session["mode"] == "forward":
            raise ProcessError(
                f"{label} forwards {processes_view.command_text(session)}: it has no process to control or "
                "write to. get_logs reads it."
            )
        if session["finished"] is not None:
            raise ProcessError(
                f"{label} has ended ({session['status']}: {session['message'] or 'no message'}). Start it "
                f"again with start_process(command={session['command']!r}, label={label!r})."
            )
        if session["run_id"] not in self.sessions.connected_runs():
            raise ProcessError(
                f"{label}'s runner is not connected to this server (disconnected: the server restarted or "
                "the runner cannot reach it). It reconnects by itself within 30 s; list_sessions shows when."
            )
        try:
            reply = await self.sessions.ask(session["run_id"], command, arguments)
        except SessionError as exc:
            raise ProcessError(f"{label}: {exc}") from None
        if not reply.ok:
            raise ProcessError(f"{label}: {reply.error}")
        return reply.result

    async def settled(
        self, run_id: str, *, new_pid: int | None = None, signal_name: str = ""
    ) -> dict[str, Any]:
        """The session once the store shows what a request led to: a restart's new process, or the
        end of a process a stopping signal was sent to (given a few seconds)."""
        stopping = signal_name in ("SIGTERM", "SIGINT", "SIGKILL")
        deadline = time.monotonic() + STOP_SETTLE
        session = await self.session(run_id)
        while time.monotonic() < deadline:
            if new_pid is not None and session["pid"] == new_pid and session["status"] == "running":
                break
            if new_pid is None and not (stopping and session["status"] == "running"):
                break
            await self.sessions.changed(0.1)
            session = await self.session(run_id)
        return session

    # Shutdown -------------------------------------------------------------------------------------

    async def close(self) -> None:
        """The server is stopping: every managed process stops with it."""
        for managed in self.managed.values():
            with contextlib.suppress(OSError):
                os.close(managed.watch)  # the runner stops its command and exits
        for managed in self.managed.values():
            try:
                await asyncio.wait_for(managed.runner.wait(), STOP_GRACE + 5.0)
            except (TimeoutError, asyncio.TimeoutError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(managed.runner.pid, signal.SIGKILL)  # its command dies with it (PDEATHSIG)
                await managed.runner.wait()
        self.managed.clear()


def _argv(command: str | list[str]) -> list[str]:
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ProcessError(f"command {command!r} cannot be split as a shell would: {exc}.") from None
    else:
        argv = list(command)
        bad = [a for a in argv if not isinstance(a, str)]
        if bad:
            raise ProcessError(f"command must be a string or a list of strings; got {bad[:3]!r}.")
    if not argv:
        raise ProcessError('command is empty; give one, e.g. "python server.py --port 8000".')
    return argv


def _env(env: dict[str, str] | None) -> dict[str, str]:
    if env is None:
        return {}
    bad = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise ProcessError(f"env values must be strings; fix {', '.join(map(repr, bad[:5]))}.")
    return dict(env)


def _check_executable(program: str, cwd: Path, path: str | None) -> None:
    if os.sep in program:
        target = cwd / program
        if not (target.is_file() and os.access(target, os.X_OK)):
            raise ProcessError(f"{program!r} is not an executable file (from {cwd}).")
        return
    if shutil.which(program, path=path) is None:
        raise ProcessError(
            f"No command {program!r} on PATH. Give its full path, or a PATH in env; for a script, run it "
            'with its interpreter ("python server.py").'
        )


def _tail(log: Path, lines: int = 10) -> str:
    try:
        return "\n".join(redact(line) for line in log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
