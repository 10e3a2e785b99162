"""Managed test runs: `run_tests` starts ``pytest --mcp-debug`` and waits for its first stop or its end.

Each managed run gets its own run id (``MCPDEBUG_RUN_ID``) and this server's ingest URL, so runs
started at the same time never mix: a waiter follows exactly its own run. The process's terminal
output is kept in ``.mcpdebug/processes/<run id>.log`` and its last lines in memory.

Waiting is shared with runs started elsewhere (a developer's shell, CI with a server): `wait` looks
at live sessions and the store, so it works for any run this server ingests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcpdebug.live.sessions import LiveSession, Sessions
from mcpdebug.store import Store
from mcpdebug.views import lookup
from mcpdebug.views.lookup import quoted
from pytest_mcpdebug.folder import DIRNAME
from pytest_mcpdebug.recording.run_id import new_run_id
from pytest_mcpdebug.redaction import redact

# Timeouts
PROGRESS_INTERVAL: Final = 2.0
EXIT_SETTLE: Final = 1.0
"""After a managed process exits, how long its last events may take to be stored."""
STOP_GRACE: Final = 30.0
"""After SIGINT, how long a run may take to finish before it is killed: pytest reports, tears its
fixtures down and the recording closes; two whole suites at once on 2 cores took over 10 s."""
# Limits
TERMINAL_LINES: Final = 400

Progress = Callable[[float, float | None, str], Awaitable[None]]
Spawn = Callable[[list[str], Path, dict[str, str]], Awaitable[asyncio.subprocess.Process]]
"""Starts a run's process: its command, folder and environment (`spawn_run` by default)."""


class RunError(Exception):
    """A run that cannot be started or followed; the message says what to do."""


@dataclass
class ManagedRun:
    run_id: str
    command: list[str]
    cwd: Path
    process: asyncio.subprocess.Process
    log_path: Path
    started: float = field(default_factory=time.time)
    terminal: deque[str] = field(default_factory=lambda: deque(maxlen=TERMINAL_LINES))
    reader: asyncio.Task[None] | None = None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode


@dataclass
class Outcome:
    """What a wait ended on: a held test, the run's end, or the time limit."""

    kind: str
    """stopped, finished or waiting."""
    run: dict[str, Any] | None
    session: LiveSession | None = None
    managed: ManagedRun | None = None


def working_dir(cwd: str | None, project: Path | None = None) -> Path:
    """The folder a run or command starts in: ``cwd``, which must be a directory; by default the
    server's folder, or ``project`` when the server runs outside it (a client may start the server
    anywhere: with `--dir` it still knows the project)."""
    folder = Path(cwd).expanduser() if cwd else Path.cwd()
    if not cwd and project is not None and not _inside(folder, project):
        folder = project
    try:
        found = folder.is_dir()
    except (OSError, ValueError):  # a name too long, a NUL byte
        found = False
    if not found:
        raise RunError(
            f"cwd {quoted(str(folder))} is not a directory; give the project's folder (or omit it)."
        )
    return folder


def _inside(folder: Path, project: Path) -> bool:
    try:
        return folder.resolve().is_relative_to(project.resolve())
    except OSError:
        return False


def project_of(store_dir: Path) -> Path | None:
    """The project a store belongs to: the folder holding its `.mcpdebug`."""
    return store_dir.parent if store_dir.name == DIRNAME else None


class Runner:
    def __init__(self, store: Store, sessions: Sessions, *, url: str | None, token: str | None) -> None:
        self.store = store
        self.sessions = sessions
        self.url = url
        self.token = token
        self.runs: dict[str, ManagedRun] = {}

    async def start(
        self,
        args: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        break_on_failure: bool,
        *,
        spawn: Spawn | None = None,
    ) -> ManagedRun:
        """``spawn``: how a debug run starts its process (`mcpdebug.debug`: a spare, a report pipe)."""
        folder = working_dir(cwd, project_of(self.store.dir))
        bad = [a for a in args if not isinstance(a, str)]
        if bad:
            raise RunError(f"args must be strings, as on a command line; got {quoted(bad[:3])}")
        if self.url is None or self.token is None:
            raise RunError(
                "This server does not ingest runs (another `mcpdebug serve` on the same folder does), so it "
                "could not follow a run it starts; call run_tests on that server."
            )
        run_id = new_run_id()
        command = [sys.executable, "-m", "pytest", "--mcp-debug"]
        if break_on_failure:
            command.append("--mcp-debug-break")
        command += args
        environment = {**os.environ, **(env or {})}
        environment.update(
            MCPDEBUG_URL=self.url,
            MCPDEBUG_TOKEN=self.token,
            MCPDEBUG_RUN_ID=run_id,
            MCPDEBUG_DIR=str(self.store.dir),  # without the server, it spools where this server looks
            PYTHONUNBUFFERED="1",
        )
        log_dir = self.store.dir / "processes"
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            process = await (spawn or spawn_run)(command, folder, environment)
        except OSError as exc:
            raise RunError(f"Could not start {command[0]}: {exc.strerror}") from None
        run = ManagedRun(run_id, command, folder, process, log_dir / f"{run_id}.log")
        run.reader = asyncio.create_task(self._read_terminal(run))
        self.runs[run_id] = run
        return run

    async def _read_terminal(self, run: ManagedRun) -> None:
        assert run.process.stdout is not None
        with open(run.log_path, "ab") as log:
            while True:
                line = await run.process.stdout.readline()
                if not line:
                    break
                log.write(line)
                log.flush()
                run.terminal.append(redact(line.decode(errors="replace").rstrip("\n")))
        await run.process.wait()
        self.sessions.notify()

    async def wait(self, run_id: str, timeout: float | None, progress: Progress | None = None) -> Outcome:
        """Wait until the run holds a test, finishes, or ``timeout`` seconds pass."""
        started = time.monotonic()
        deadline = None if timeout is None else started + max(timeout, 0)
        managed = self.runs.get(run_id)
        next_progress = started + PROGRESS_INTERVAL
        exited_at: float | None = None
        while True:
            held = self.sessions.held(run_id)
            run = await asyncio.to_thread(self._run_row, run_id)
            if held:
                return Outcome("stopped", run, held[0], managed)
            if run is not None and run["status"] != "running":
                await self._settle(managed)
                return Outcome("finished", run, None, managed)
            now = time.monotonic()
            if managed is not None and managed.returncode is not None:
                exited_at = exited_at or now
                if now - exited_at > EXIT_SETTLE:  # it ended without finishing its run (crash, usage error)
                    return Outcome("finished", run, None, managed)
            if managed is None and run is None:
                raise RunError(f"Unknown run {run_id!r}; list_sessions shows the recorded runs.")
            if deadline is not None and now >= deadline:
                return Outcome("waiting", run, None, managed)
            if progress is not None and now >= next_progress:
                next_progress = now + PROGRESS_INTERVAL
                text = await asyncio.to_thread(_progress_text, run, self.store)
                await progress(now - started, timeout, text)
            wake = PROGRESS_INTERVAL if deadline is None else min(PROGRESS_INTERVAL, deadline - now)
            await self.sessions.changed(max(min(wake, 0.5 if exited_at else wake), 0.01))

    async def _settle(self, managed: ManagedRun | None) -> None:
        """A finished run's process is exiting: let its last terminal lines (the summary) arrive."""
        if managed is not None and managed.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(managed.reader), EXIT_SETTLE)

    def _run_row(self, run_id: str) -> dict[str, Any] | None:
        lookup.refresh(self.store)
        return self.store.run(run_id)

    async def stop(self, run: ManagedRun) -> int | None:
        """End a managed run as Ctrl-C would (pytest reports what it has); kill it if it lingers."""
        if run.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGINT)
            try:
                await asyncio.wait_for(run.process.wait(), STOP_GRACE)
            except (TimeoutError, asyncio.TimeoutError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                await run.process.wait()
        return run.returncode

    async def close(self) -> None:
        """The server is stopping: managed runs still going are stopped with it, not orphaned."""
        for run in list(self.runs.values()):
            if run.returncode is None:
                await self.stop(run)
            if run.reader is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(run.reader, 2.0)


async def spawn_run(
    command: list[str], folder: Path, environment: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> asyncio.subprocess.Process:
    """A run's process: its output (stdout and stderr) on one pipe, in a session of its own."""
    return await asyncio.create_subprocess_exec(
        *command,
        cwd=folder,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # a Ctrl-C meant for the server does not hit the run
        pass_fds=pass_fds,
        preexec_fn=_ctrl_c_back(),
    )


def _ctrl_c_back() -> Callable[[], None] | None:
    """A server started ignoring SIGINT (``nohup``, ``mcpdebug serve &`` in a script: a shell without
    job control ignores it in background commands) would hand that on through exec, and `stop`'s
    Ctrl-C would never reach the run. Then the child gets the default back before its exec."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        return None
    return _default_sigint


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _progress_text(run: dict[str, Any] | None, store: Store) -> str:
    if run is None:
        return "starting pytest"
    counts = run["counts"]
    done = sum(n for k, n in counts.items() if k != "running")
    total = run["collected"]
    text = f"{done}{f' of {total}' if total is not None else ''} tests done"
    problems = counts.get("failed", 0) + counts.get("error", 0)
    if problems:
        text += f", {problems} failed"
    running = store.tests(run["run_id"], ("running",))
    if running:
        text += f"; running {running[0]['nodeid']}"
    return text
