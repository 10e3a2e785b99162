"""Start debugpy in this process for `mcpdebug serve`, and run a script or module under it.

Two users: `mcpdebug serve`'s start_debugging runs this file *by path* in the target's interpreter
(which may not have pytest-mcpdebug installed, so only the standard library and debugpy are used),
and a debug test run imports `listen` from it (`pytest_mcpdebug.debug.in_tests`)::

    python launcher.py --report FD --parent PID [--] SCRIPT [ARGS...]
    python launcher.py --report FD --parent PID -m MODULE [ARGS...]

`listen` makes debugpy listen on a free loopback port with its in-process adapter (0.15 s, against
0.4-1 s for a separate adapter process), reports ``{"port": N, ...}`` as one JSON line on file
descriptor FD (or ``{"error": ...}``), and blocks until the server has set its breakpoints and sent
``configurationDone``. Then the target runs as ``python SCRIPT`` or ``python -m MODULE`` would.

A debuggee must never outlive the server that debugs it: a thread that pydevd neither traces nor
suspends (so it runs while the debuggee is paused) ends the process group when PID stops being
this process's parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PARENT_POLL = 0.5
"""Seconds between looks at the parent: a dead server's debuggee ends within about this long."""
WATCH_THREAD = "mcpdebug-parent-watch"


def report(fd: int | None, message: dict[str, Any]) -> None:
    """Tell the server (one JSON line on ``fd``), then close ``fd``: it is read to its end."""
    if fd is None:
        return
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the server is gone: the parent watch ends this process
    with contextlib.suppress(OSError):
        os.close(fd)


def listen(
    fd: int | None, parent: int | None, on_listening: Callable[[], dict[str, Any]] | None = None, **extra: Any
) -> None:
    """Listen for the server's DAP connection, report the port, wait for its configurationDone.

    ``on_listening`` runs once debugpy is set up (before the report); what it returns is reported too.
    """
    try:
        import debugpy
    except ImportError:
        report(
            fd,
            {
                "error": f"debugpy is not installed for {sys.executable} (Python "
                f"{platform.python_version()}): install it with `{sys.executable} -m pip install debugpy`, "
                "or pass executable_path of an interpreter that has it."
            },
        )
        raise SystemExit(3) from None
    watch_parent(parent)
    _skip_environment_log()
    debugpy.configure(subProcess=False)  # else a subprocess of the target waits for a client forever
    try:
        _, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    except Exception as exc:  # too old a debugpy (no in-process adapter), or no loopback
        version = getattr(debugpy, "__version__", "?")
        report(
            fd,
            {
                "error": f"debugpy {version} in {sys.executable} could not listen: {exc} "
                "(needs debugpy>=1.8.1)"
            },
        )
        raise SystemExit(3) from None
    token = _secure()
    if token:
        extra["token"] = token
    if on_listening is not None:
        extra.update(on_listening())
    report(
        fd,
        {
            "port": port,
            "pid": os.getpid(),
            "python": platform.python_version(),
            "debugpy": getattr(debugpy, "__version__", "?"),
            **extra,
        },
    )
    debugpy.wait_for_client()
    _stop_listening()


def _skip_environment_log() -> None:
    """debugpy's first call describes the environment, every installed package's metadata read
    (40-70 ms), for a log file it writes only with DEBUGPY_LOG_DIR: without one, skip it."""
    try:
        from debugpy.common import log
        from debugpy.server import api

        if log.log_dir is None:
            api.ensure_logging.ensured = True  # type: ignore[attr-defined]  # nothing else to do
    except Exception:
        pass  # another debugpy: it logs as it likes


def _secure() -> str | None:
    """Only the server may drive this process: pydevd refuses every request not preceded by a
    ``pydevdAuthorize`` with this token (which only the server reads, on the report pipe), and
    its replies go out without Nagle's delay (two small writes per message would wait ~40 ms for
    the peer's delayed ACK). Returns the token, or None if this pydevd keeps these elsewhere."""
    try:
        import pydevd  # debugpy's vendored pydevd, importable once debugpy listens

        py_db = pydevd.get_global_debugger()
        token = secrets.token_hex(16)
        listener = py_db._waiting_for_connection_thread._server_socket
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        py_db.authentication.access_token = token
    except Exception:
        return None
    return str(token)


def _stop_listening() -> None:
    """The server is connected: nobody else may connect in its place (pydevd keeps accepting)."""
    with contextlib.suppress(Exception):
        import pydevd

        pydevd.get_global_debugger()._waiting_for_connection_thread.do_kill_pydev_thread()


def watch_parent(parent: int | None) -> None:
    """End this process group (this process and what it started) once ``parent`` is gone (unless a
    watch runs already: a spare's, `warm`)."""
    if not parent or any(t.name == WATCH_THREAD for t in threading.enumerate()):
        return
    direct = os.getppid() == parent

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL)
            gone = os.getppid() != parent if direct else not _alive(parent)
            if gone:
                _end("the mcpdebug server that was debugging this process is gone")

    thread = threading.Thread(target=watch, name=WATCH_THREAD, daemon=True)
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]  # pydevd neither traces nor
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]  # suspends this thread
    thread.start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end(why: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"\nmcpdebug: {why}; ending the debugged process.\n".encode())
    if hasattr(os, "killpg") and os.getpgrp() == os.getpid():  # started in its own group: end it all
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(137)


def _parse(argv: list[str]) -> tuple[int | None, int | None, str | None, list[str]]:
    fd = parent = None
    module = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--report":
            fd = int(rest.pop(0))
        elif arg == "--parent":
            parent = int(rest.pop(0))
        elif arg == "-m":
            module = rest.pop(0)
            break
        elif arg == "--":
            break
        else:
            rest.insert(0, arg)
            break
    if module is None and not rest:
        raise SystemExit("usage: launcher.py --report FD --parent PID (-m MODULE | SCRIPT) [ARGS...]")
    return fd, parent, module, rest


def _script_traceback() -> Callable[[type[BaseException], BaseException, Any], None]:
    """``sys.excepthook`` showing an uncaught exception as ``python SCRIPT`` shows it: without the
    frames that ran the script (the launcher's, a spare's, runpy's). A closure: runpy may clear this
    module's globals by the time it is called."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirname, abspath, show = os.path.dirname, os.path.abspath, sys.__excepthook__

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if dirname(abspath(name)) != here and "runpy" not in name:
                break
            tb = tb.tb_next
        show(kind, value.with_traceback(tb), tb)  # it shows the exception's own traceback

    return hook


def main(argv: list[str] | None = None) -> None:
    fd, parent, module, rest = _parse(sys.argv[1:] if argv is None else argv)
    listen(fd, parent, target=module or rest[0])
    import runpy

    sys.excepthook = _script_traceback()

    if module is not None:
        sys.argv = [module, *rest]
        sys.path[0] = os.getcwd()  # as `python -m` puts the current folder first
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script = rest[0]
        sys.argv = rest
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script.py` does
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
