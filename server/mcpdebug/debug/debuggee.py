"""Starting and ending a debugged process: the launcher's command, its report, its process group.

A debuggee is started in a process group of its own, so ending it ends what it started too, and
reports on an inherited pipe: one JSON line with debugpy's port (or why it could not start), written
by `pytest_mcpdebug.debug.launcher`. The pipe closes when the debuggee reports or dies, so reading
it never waits on a process that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from mcpdebug.debug.dap import DapClient, DapClosed, EventHandler
from pytest_mcpdebug.debug import launcher

LAUNCHER: Final = Path(launcher.__file__).resolve()
PACKAGE: Final = LAUNCHER.parent.parent
"""pytest_mcpdebug's folder: its frames are hidden from the debugger (DAP ``rules``)."""
DEBUGGEE_ENV: Final = {
    "PYTHONUNBUFFERED": "1",  # output reaches the store as it is written
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",  # no "frozen modules" warning in the debuggee's stderr
}
TESTS_ENV: Final = "MCPDEBUG_DEBUG"
"""A debug test run's ``<report fd>,<server pid>`` (`pytest_mcpdebug.debug.in_tests.ENV`)."""
# Timeouts
CONFIGURE_TIMEOUT: Final = 15.0
"""How long debugpy may take to answer each step of the handshake."""
END_GRACE: Final = 2.0
"""After SIGTERM, how long a debuggee may take to exit before SIGKILL."""
CLOSE_TIMEOUT: Final = 8.0
"""After a test run's disconnect, how long it may take to end: its test ends (or is interrupted
after 2 s, `pytest_mcpdebug.debug.in_tests.CLOSE_GRACE`), then pytest reports."""
END_GRACE_TESTS: Final = 1.5
"""After pytest's Ctrl-C (a second SIGINT), how long it may take to report the interrupted run."""


class DebuggeeError(Exception):
    """The debuggee could not be started; the message says why and what to do."""


INITIALIZE: Final = {
    "clientID": "mcpdebug",
    "clientName": "mcpdebug",
    "adapterID": "debugpy",
    "pathFormat": "path",
    "linesStartAt1": True,
    "columnsStartAt1": True,
    "supportsVariableType": True,
}


def attach_arguments(stop_on_entry: bool, just_my_code: bool) -> dict[str, Any]:
    """The ``attach`` (or ``launch``) request's arguments, as pydevd reads them."""
    return {
        "justMyCode": just_my_code,
        "stopOnEntry": stop_on_entry,
        "rules": hidden_code(),
        "redirectOutput": False,
        "showReturnValue": False,
        "breakOnSystemExit": [],  # sys.exit(n) ends a script; it is not an exception to stop at
    }


def hidden_code() -> list[dict[str, Any]]:
    """DAP ``rules``: the plugin and the launcher are not the user's code (no stops, no frames)."""
    return [{"path": str(PACKAGE), "include": False}]


async def spawn_script(
    executable: str, target: list[str], args: list[str], cwd: Path
) -> tuple[asyncio.subprocess.Process, int]:
    """Start ``target`` (a script path, or ``["-m", module]``) under the launcher; returns the process
    and the read end of its report pipe."""
    read, write = os.pipe()
    command = [executable, str(LAUNCHER), *launcher_args(write, target, args)]
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env={**os.environ, **DEBUGGEE_ENV},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(write,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read)
        raise DebuggeeError(f"Could not start {executable}: {exc.strerror}; check executable_path.") from None
    finally:
        os.close(write)
    return process, read


def launcher_args(report: int, target: list[str], args: list[str]) -> list[str]:
    """The launcher's arguments: where to report, whom to outlive not, what to run."""
    return ["--report", str(report), "--parent", str(os.getpid()), *target, *args]


async def read_report(fd: int, timeout: float | None) -> dict[str, Any] | None:
    """The debuggee's report, or None if it ended without one. Closes ``fd``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    finally:
        transport.close()
    if not line.strip():
        return None
    try:
        report: dict[str, Any] = json.loads(line)
    except ValueError:
        return {"error": f"the debuggee reported something unexpected: {line[:200]!r}"}
    return report


async def stderr_tail(process: asyncio.subprocess.Process) -> str:
    """The end of what a debuggee that never reported wrote to stderr: why it could not start."""
    stderr = b""
    if process.stderr is not None:
        with contextlib.suppress(Exception):
            stderr = await asyncio.wait_for(process.stderr.read(), 5.0)
    return stderr.decode(errors="replace").strip()[-1500:]


async def attach(report: dict[str, Any], on_event: EventHandler) -> DapClient:
    """A DAP connection to the debugpy the report names, authorized with its token if it has one."""
    dap = await DapClient.connect("127.0.0.1", int(report["port"]), on_event)
    if report.get("token"):  # before anything else, or pydevd refuses it
        await dap.request("pydevdAuthorize", {"debugServerAccessToken": report["token"]})
    return dap


async def configure(
    dap: DapClient,
    initialized: asyncio.Event,
    send_settings: Callable[[], list[Awaitable[None]]],
    *,
    stop_on_entry: bool,
    just_my_code: bool,
) -> None:
    """DAP's handshake: the attach (or launch) is answered only after configurationDone.

    ``send_settings`` (breakpoints, exception filters) sends them once debugpy is initialized, before
    the debuggee is let go. pydevd reads one connection's requests in order, so each group goes out
    at once and the answers are awaited together: two round trips in all, not one per request.
    """
    initialize = dap.send("initialize", INITIALIZE)
    started = dap.send(  # pydevd stops on entry only for a "launch"
        "launch" if stop_on_entry else "attach", attach_arguments(stop_on_entry, just_my_code)
    )
    await asyncio.wait_for(initialize, CONFIGURE_TIMEOUT)
    await asyncio.wait_for(initialized.wait(), CONFIGURE_TIMEOUT)
    settings = send_settings()
    done = dap.send("configurationDone")
    for future in (done, started):  # a debuggee that ends at once answers neither: not an error
        future.add_done_callback(_retrieved)
    try:
        await asyncio.gather(*settings)
        await asyncio.wait_for(done, CONFIGURE_TIMEOUT)
        await asyncio.wait_for(started, CONFIGURE_TIMEOUT)
    except DapClosed:
        pass  # it ran and ended at once (before answering): its exit code tells the rest


async def end(
    process: asyncio.subprocess.Process, first: signal.Signals = signal.SIGTERM, grace: float = END_GRACE
) -> int | None:
    """End a debuggee's process group: ``first``, then SIGKILL after ``grace``; returns its exit code."""
    if process.returncode is None:
        _signal_group(process.pid, first)
        try:
            await asyncio.wait_for(process.wait(), grace)
        except (TimeoutError, asyncio.TimeoutError):
            _signal_group(process.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), END_GRACE)
    _signal_group(process.pid, signal.SIGKILL)  # what it started and left behind goes with it
    return process.returncode


async def end_tests(process: asyncio.subprocess.Process, *, disconnected: bool) -> int | None:
    """End a debug test run. Once ``disconnected`` it ends by itself (the plugin stops it after its
    current test); else, or if it has not within `CLOSE_TIMEOUT`, as Ctrl-C would (SIGINT), then
    killed."""
    if disconnected:
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), CLOSE_TIMEOUT)
    return await end(process, signal.SIGINT, END_GRACE_TESTS)


def _retrieved(future: asyncio.Future[dict[str, Any]]) -> None:
    if not future.cancelled():
        future.exception()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
