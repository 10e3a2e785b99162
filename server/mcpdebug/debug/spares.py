"""Spare debuggees: a process started before a debug session asks for it, its slow imports done.

A debug run's start is mostly an interpreter starting and importing pytest and debugpy's server (about
0.45 s of CPU on this kind of machine, against ~0.2 s for all the rest). A spare
(`pytest_mcpdebug.debug.warm`) has done that while nobody waited, and runs the next job of its kind:
a test run (`run_tests(debug=True)`) or a script (`start_debugging`) with the server's interpreter.

At most one spare of each kind exists. One is started after a debug session of its kind has started
(for the next one), when create_debug_session announces a script, and when a test run ends with
failures (what one debugs next); it is started only once the debuggee that asked has stopped or ended,
so it never competes with it for the CPU. A spare not used within `SPARE_LIFETIME` ends; so do all
when the server stops. A job whose environment differs in what an interpreter reads at its start
(`warm.startup_variable`), or for another interpreter, gets a fresh process as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from mcpdebug.debug import debuggee
from pytest_mcpdebug.debug import warm

WARM: Final = Path(warm.__file__).resolve()
SPARE_LIFETIME: Final = 600.0
"""Seconds a spare waits for a job before it ends (a debug session every 10 minutes keeps one)."""

MEMORY: Final = "debug-preimports.json"
"""In the store's folder: what the last debug test run imported before its tests."""

Kind = Literal["tests", "script"]


@dataclass
class Spare:
    kind: Kind
    process: asyncio.subprocess.Process
    job: asyncio.WriteTransport
    """The job pipe (ours): the spare reads JSON lines from its end."""
    report: int
    """The read end of the report pipe (ours): debugpy's port, as from a fresh debuggee."""
    report_fd: int
    """The spare's end of the report pipe, as numbered in the spare (for ``MCPDEBUG_DEBUG``)."""
    env: dict[str, str]
    started: float = field(default_factory=time.monotonic)

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a job with ``env`` runs in this spare as in a fresh process."""
        keys = {k for k in (*env, *self.env) if warm.startup_variable(k)}
        return self.process.returncode is None and all(env.get(k) == self.env.get(k) for k in keys)

    def give(self, cwd: Path, env: dict[str, str], argv: list[str]) -> None:
        """Hand the spare its job (it starts at once; the pipe is then closed)."""
        _write(self.job, {"cwd": str(cwd), "env": env, "argv": argv})
        self.job.close()  # once written: end of file after the job

    async def discard(self) -> None:
        self.job.abort()
        with contextlib.suppress(OSError):
            os.close(self.report)
        await debuggee.end(self.process)


class Spares:
    def __init__(self, root: Path, *, enabled: bool = True, memory: Path | None = None) -> None:
        self.root = root
        self.enabled = enabled
        self.memory = memory
        """Where the list below is kept for the next server (a missing or broken file: none)."""
        self.preimports: list[str] = _recalled(memory) if enabled and memory is not None else []
        """What the last debug test run imported before its tests (`pytest_mcpdebug.debug.preimports`)."""
        self._ready: dict[Kind, Spare] = {}
        self._starting: dict[Kind, asyncio.Task[None]] = {}
        self._spawning: dict[Kind, asyncio.Future[None]] = {}
        self._expiry: asyncio.Task[None] | None = None

    async def take(self, kind: Kind, env: dict[str, str]) -> Spare | None:
        """The spare of ``kind`` if it can run a job with ``env``; it is no longer this server's spare.

        One being started now is waited for (a few milliseconds): starting a fresh process beside
        it would only make both slower."""
        spawning = self._spawning.get(kind)
        if spawning is not None:
            await asyncio.shield(spawning)
        spare = self._ready.get(kind)
        if spare is None or not spare.fits(env):
            return None
        del self._ready[kind]
        return spare

    def learn(self, modules: list[str]) -> None:
        """A debug test run's list: the next spares import these, and so does a later server's."""
        if modules and modules != self.preimports:
            self.preimports = modules
            if self.memory is not None:
                with contextlib.suppress(OSError):
                    self.memory.write_text(json.dumps(modules))

    def process(self, kind: Kind) -> asyncio.subprocess.Process | None:
        """The spare of ``kind`` waiting for a job, if there is one."""
        spare = self._ready.get(kind)
        return spare.process if spare is not None else None

    def fill(self, kind: Kind, after: asyncio.Future[object] | None = None) -> None:
        """Start a spare of ``kind`` (once ``after`` is done) unless one exists or is starting."""
        if not self.enabled or kind in self._ready or kind in self._starting:
            return
        task = asyncio.get_running_loop().create_task(self._start(kind, after))
        self._starting[kind] = task
        task.add_done_callback(lambda _: self._starting.pop(kind, None))

    async def close(self) -> None:
        """The server is stopping: no spare outlives it."""
        for task in list(self._starting.values()):
            task.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
        spares, self._ready = list(self._ready.values()), {}
        await asyncio.gather(*(s.discard() for s in spares), return_exceptions=True)

    async def _start(self, kind: Kind, after: asyncio.Future[object] | None) -> None:
        if after is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(after)
        spawning = self._spawning[kind] = asyncio.get_running_loop().create_future()
        try:
            await self._spawn(kind)
        except OSError:
            return  # no spare: the next debug session starts a fresh process, as without one
        finally:
            del self._spawning[kind]
            spawning.set_result(None)
        if self._expiry is None or self._expiry.done():
            self._expiry = asyncio.get_running_loop().create_task(self._expire())

    async def _spawn(self, kind: Kind) -> None:
        env = spare_environment()
        job_read, job = os.pipe()
        report, report_write = os.pipe()
        command = [sys.executable, str(WARM), "--job", str(job_read), "--parent", str(os.getpid()), kind]
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=self.root,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT if kind == "tests" else asyncio.subprocess.PIPE,
                pass_fds=(job_read, report_write),
                start_new_session=True,
            )
        except BaseException:
            for fd in (job, report):
                os.close(fd)
            raise
        finally:
            os.close(job_read)
            os.close(report_write)
        try:
            transport, _ = await asyncio.get_running_loop().connect_write_pipe(
                asyncio.Protocol, os.fdopen(job, "wb", buffering=0)
            )
        except BaseException:  # cancelled (the server stops): the process goes too
            os.close(report)
            await asyncio.shield(debuggee.end(process))
            raise
        _write(transport, {"preimport": self.preimports if kind == "tests" else []})  # buffered: no wait
        self._ready[kind] = Spare(kind, process, transport, report, report_write, env)

    async def _expire(self) -> None:
        while self._ready:
            await asyncio.sleep(min(SPARE_LIFETIME / 4, 60.0))
            now = time.monotonic()
            for kind, spare in list(self._ready.items()):
                if now - spare.started > SPARE_LIFETIME or spare.process.returncode is not None:
                    del self._ready[kind]
                    await spare.discard()


def _recalled(memory: Path) -> list[str]:
    try:
        names = json.loads(memory.read_text())
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _write(pipe: asyncio.WriteTransport, message: dict[str, object]) -> None:
    """One JSON line on a spare's job pipe (written as the spare reads: the event loop never waits)."""
    pipe.write((json.dumps(message) + "\n").encode())


def spare_environment() -> dict[str, str]:
    """What a fresh debuggee would start with (a job's own variables come with the job)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **debuggee.DEBUGGEE_ENV}
