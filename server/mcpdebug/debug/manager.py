"""Every debug session of this server: creating, starting, closing, and closing the forgotten ones.

A session's id is the run id of what it debugs (a script's run of kind ``debug``, or the pytest
run), so get_output, search_output and get_run_summary take it as it is. Each session is also a
live session of `Sessions` (`LocalSession`): the inspection tools reach it by that id.

Sessions are isolated by construction: each has its own process, its own DAP connection and its own
breakpoints. One with no tool call for ``idle_timeout`` seconds is closed, and says so in
list_sessions; when the server stops, every debuggee is ended with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Final

from mcpdebug.debug import DebugError, debuggee, spares
from mcpdebug.debug.breakpoints import BreakpointError
from mcpdebug.debug.session import DebugSession
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import ManagedRun, RunError, Runner, spawn_run
from mcpdebug.report import entries
from mcpdebug.store import Store
from mcpdebug.views.lookup import quoted
from pytest_mcpdebug.recording.run_id import new_run_id

Process = asyncio.subprocess.Process

DEFAULT_IDLE_TIMEOUT: Final = 1800.0
# Timeouts
SPARE_DELAY: Final = 60.0
"""The next spare starts once a session has stopped or ended, or after this long in any case."""
# Limits
ENDED_KEPT: Final = 50
"""Closed sessions remembered, so list_sessions and a late call can say how each ended."""


class Debugger:
    def __init__(
        self,
        store: Store,
        sessions: Sessions,
        runner: Runner,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        root: Path | None = None,
        spare: bool = False,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.runner = runner
        self.idle_timeout = idle_timeout
        self.root = root or Path.cwd()
        self.spares = spares.Spares(self.root, enabled=spare, memory=store.dir / spares.MEMORY)
        """Debuggees started ahead of the sessions that will use them: `mcpdebug serve` has them
        (unless ``--no-debug-spare``); whoever turns them on calls `shutdown`, which ends them."""
        self._live: dict[str, DebugSession] = {}
        self._ended: OrderedDict[str, DebugSession] = OrderedDict()
        self._reaper: asyncio.Task[None] | None = None

    # Sessions -------------------------------------------------------------------------------------

    def create(
        self, language: str = "python", name: str | None = None, executable_path: str | None = None
    ) -> DebugSession:
        if language.strip().lower() != "python":
            raise DebugError(
                f"Only language='python' can be debugged here (debugpy); got {quoted(language)}."
            )
        executable = _executable(executable_path)
        session_id = new_run_id()
        session = DebugSession(
            session_id=session_id,
            name=name or f"Debug-{time.strftime('%Y%m%dT%H%M%S')}",
            kind="script",
            executable=executable,
            root=self.root,
            store=self.store,
        )
        self._register(session)
        if executable == sys.executable:
            self.prepare("script")  # set_breakpoint and start_debugging come next
        return session

    def get(self, session_id: str) -> DebugSession:
        found = self._live.get(session_id)
        if found is not None:
            found.active_at = time.time()
            return found
        ended = self._ended.get(session_id)
        if ended is not None:
            raise DebugError(
                f"Debug session {session_id} is closed ({ended.ended}). Its output stays readable: "
                f'get_output(run_id="{session_id}"); create_debug_session or run_tests(debug=True) starts '
                "another."
            )
        live = ", ".join(f"{s.id} ({s.name}, {s.state})" for s in self._live.values()) or "none"
        raise DebugError(
            f"No debug session {quoted(session_id)}. Open now: {live}. create_debug_session (scripts) or "
            "run_tests(debug=True) (tests) start one; list_debug_sessions lists them."
        )

    def owns(self, session_id: str) -> bool:
        return session_id in self._live

    def listed(self) -> list[DebugSession]:
        """Open sessions, then the most recently closed ones (newest first)."""
        return [*self._live.values(), *reversed(self._ended.values())]

    # Starting -------------------------------------------------------------------------------------

    async def start_script(
        self,
        session: DebugSession,
        script_path: str,
        args: list[str],
        *,
        stop_on_entry: bool,
        just_my_code: bool,
    ) -> None:
        if session.state != "created":
            raise DebugError(
                f"Session {session.id} was started already ({session.state}); create_debug_session makes a "
                "new one for another run."
            )
        target = _target(self.root, script_path)
        session.target = " ".join([*target, *args])
        spare = None
        if session.executable == sys.executable:
            spare = await self.spares.take("script", spares.spare_environment())
        if spare is not None:
            spare.give(self.root, spare.env, debuggee.launcher_args(spare.report_fd, target, args))
            process, report = spare.process, spare.report
        else:
            try:
                process, report = await debuggee.spawn_script(session.executable, target, args, self.root)
            except debuggee.DebuggeeError as exc:
                raise DebugError(str(exc)) from None
        session.launch(process, report, stop_on_entry=stop_on_entry, just_my_code=just_my_code)
        self._refill(session)

    async def start_tests(
        self,
        args: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        breakpoints: list[dict[str, Any]],
        *,
        stop_on_entry: bool,
    ) -> DebugSession:
        distributed = _distributed(args)
        if distributed:
            raise DebugError(
                f"A debug run needs a single test process: drop {distributed} from args (debugpy follows one "
                "process; run the failing tests alone, or run_tests without debug for the whole suite)."
            )
        root = Path(cwd).expanduser().resolve() if cwd else self.root
        session = DebugSession(
            session_id="",
            name="pytest " + " ".join(args),
            kind="tests",
            executable=sys.executable,
            root=root,
            store=self.store,
        )
        try:
            for spec in breakpoints:
                session.breakpoints.add(
                    str(spec["file"]),
                    int(spec["line"]),
                    spec.get("condition"),
                    spec.get("hit_condition"),
                    spec.get("log_message"),
                )
        except BreakpointError as exc:
            raise DebugError(f"breakpoints: {exc}") from None
        managed, report = await self._start_run(args, cwd, env)
        session.id, session.target, session.managed = managed.run_id, session.name, managed
        self._register(session)
        session.launch(managed.process, report, stop_on_entry=stop_on_entry, just_my_code=True)
        self._refill(session)
        return session

    def prepare(self, kind: spares.Kind) -> None:
        """A debug session of ``kind`` is likely next: have a spare ready for it."""
        self.spares.fill(kind)

    def _refill(self, session: DebugSession) -> None:
        """A spare for the next session of this kind, started once this one has stopped or ended."""
        kind: spares.Kind = "tests" if session.kind == "tests" else "script"
        if kind == "script" and session.executable != sys.executable:
            return

        async def settled() -> None:
            await session.wait(0, SPARE_DELAY)
            self.spares.learn(session.modules)

        self.spares.fill(kind, after=asyncio.ensure_future(settled()))

    async def _start_run(
        self, args: list[str], cwd: str | None, env: dict[str, str] | None
    ) -> tuple[ManagedRun, int]:
        """pytest --mcp-debug with the debug plugin on (in the spare if it fits); returns the run and
        the read end of its report pipe."""
        reports: list[int] = []

        async def spawn(command: list[str], folder: Path, environment: dict[str, str]) -> Process:
            environment = {**environment, **debuggee.DEBUGGEE_ENV}
            spare = await self.spares.take("tests", environment)
            if spare is not None:
                environment[debuggee.TESTS_ENV] = f"{spare.report_fd},{os.getpid()}"
                spare.give(folder, environment, command[3:])  # after `python -m pytest`
                reports.append(spare.report)
                return spare.process
            read, write = os.pipe()
            environment[debuggee.TESTS_ENV] = f"{write},{os.getpid()}"
            try:
                process = await spawn_run(command, folder, environment, pass_fds=(write,))
            except OSError:
                os.close(read)
                raise
            finally:
                os.close(write)
            reports.append(read)
            return process

        try:
            managed = await self.runner.start(args, cwd, env, False, spawn=spawn)
        except RunError as exc:
            raise DebugError(str(exc)) from None
        return managed, reports[0]

    # Closing --------------------------------------------------------------------------------------

    async def close(self, session_id: str, reason: str = "closed by close_debug_session") -> DebugSession:
        session = self.get(session_id)
        await session.close(reason)
        self._forget(session)
        return session

    async def shutdown(self) -> None:
        """The server is stopping: no debuggee outlives it."""
        if self._reaper is not None:
            self._reaper.cancel()
        await self.spares.close()
        await asyncio.gather(
            *(s.close("the server stopped") for s in list(self._live.values())), return_exceptions=True
        )
        for session in list(self._live.values()):
            self._forget(session)

    def _register(self, session: DebugSession) -> None:
        entries.session_created(
            session.id, session.name, "debug", pythonPath=session.executable, mode=session.kind
        )
        self._live[session.id] = session
        self.sessions.add_local(session.id, session)
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    def _forget(self, session: DebugSession) -> None:
        entries.session_closed(session.id, session.ended or "closed", exitCode=session.exit_code)
        self._live.pop(session.id, None)
        self.sessions.remove_local(session.id)
        self._ended[session.id] = session
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    async def _reap(self) -> None:
        """Close sessions nobody has called about for ``idle_timeout`` seconds."""
        interval = max(min(self.idle_timeout / 4, 30.0), 0.05)
        while self._live:
            await asyncio.sleep(interval)
            now = time.time()
            for session in list(self._live.values()):
                if now - session.active_at > self.idle_timeout:
                    with contextlib.suppress(Exception):
                        await self.close(
                            session.id,
                            f"closed after {_duration(self.idle_timeout)} without a tool call "
                            "(mcpdebug serve --debug-idle-timeout)",
                        )


def _executable(path: str | None) -> str:
    if not path:
        return sys.executable
    found = shutil.which(os.path.expanduser(path))
    if found is None:
        raise DebugError(
            f"executable_path {quoted(path)} is not an executable Python interpreter (nor found on PATH); "
            f"omit it to use the server's ({sys.executable})."
        )
    return found


def _target(root: Path, script_path: str) -> list[str]:
    """``["-m", module]`` for "-m pkg", else the script's absolute path."""
    text = script_path.strip()
    if text.startswith("-m"):
        module = text[2:].strip()
        if not module:
            raise DebugError('script_path="-m" needs a module name, e.g. "-m mypackage.cli".')
        return ["-m", module]
    path = Path(text).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise DebugError(
            f"Script not found: {path}"
            + ("" if Path(text).is_absolute() else f" (relative to {root})")
            + '; give a .py file, or "-m package.module" for a module.'
        )
    return [str(path.resolve())]


def _distributed(args: list[str]) -> str | None:
    """The xdist argument that would spread the run over several processes, if any."""
    for i, arg in enumerate(args):
        if arg in ("-n", "--numprocesses"):
            value = args[i + 1] if i + 1 < len(args) else ""
        elif arg.startswith("--numprocesses="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            value = arg[2:]
        elif arg in ("--dist", "-d") or arg.startswith("--dist="):
            value = "on"
        else:
            continue
        if value.strip() not in ("0", "no"):
            return arg if arg.startswith(("--numprocesses=", "--dist=")) or len(arg) > 2 else f"{arg} {value}"
    return None


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
