"""A debug test run (`run_tests(debug=True)`): debugpy listens in the test process for the server.

Registered by `plugin.py` only when ``MCPDEBUG_DEBUG`` is set (by the server, which also passes the
file descriptor to report the port on), so a run that is not debugged never imports this module or
debugpy. debugpy starts once collection is done, so breakpoints in test files bind at once and
collection runs at full speed; the test loop waits until the server has configured its breakpoints.

While a test is paused at a breakpoint no timer may end it: the plugin's own watchdog is disabled as
for ``--pdb``, and pytest-timeout is told (through its ``pytest_timeout_set_timer`` hook) that the
timer is taken care of. Logpoint messages are written to the test's own stdout (file descriptor 1,
which pytest captures), so they are stored with the test's output, in order, where they happened.

Closing the session (close_debug_session) disconnects the server: debugpy drops the breakpoints and
lets every thread run on, and the run stops after the test it is in, which ends as it would have
(a test paused at its exception fails with it). One still running `CLOSE_GRACE` seconds later is
interrupted: it fails with `DebugSessionClosed` ("interrupted by the debugger's close"). The rest of
the run (reports, summary) runs untraced. A SIGINT from the server after that is pytest's Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Final

import pytest

ENV: Final = "MCPDEBUG_DEBUG"
"""``<fd>,<server pid>``: report debugpy's port on fd; end the run if that pid stops being the parent."""
CLOSED: Final = "interrupted by the debugger's close (close_debug_session)"
CLOSE_GRACE: Final = 2.0
"""After the server's close, how long the running test may take to end by itself."""


class DebugSessionClosed(Exception):
    """The agent closed the debug session while this test ran, and it did not end by itself."""


def from_environment() -> tuple[int, int] | None:
    """The settings of a debug run, taken out of the environment (its subprocesses do not inherit them)."""
    raw = os.environ.pop(ENV, None)
    if not raw:
        return None
    try:
        fd, parent = (int(part) for part in raw.split(","))
    except ValueError:
        raise pytest.UsageError(f"mcpdebug: environment variable {ENV}={raw!r} is not '<fd>,<pid>'") from None
    return fd, parent


class DebugRun:
    def __init__(self, config: pytest.Config, fd: int, parent: int) -> None:
        self.config = config
        self.fd: int | None = fd
        self.parent = parent
        self.session: pytest.Session | None = None
        self.running: str | None = None
        """The test running now (its node id), if any."""
        self.closed = False
        """The server closed the session: interrupting the running test fails it (`_on_sigint`)."""
        self._interrupted = False
        self._previous_sigint: Any = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_mcpdebug.debug import launcher

        fd, self.fd = self.fd, None
        if fd is None:
            return
        self.session = session
        if self.config.pluginmanager.has_plugin("dsession"):
            launcher.report(
                fd,
                {
                    "error": "a debug run needs a single test process, but xdist distributes this one "
                    "(-n from the command line or addopts): pass -n 0 in args"
                },
            )
            return
        _hide_recording_threads()
        timeouts = self.config.pluginmanager.get_plugin("mcpdebug-timeouts")
        if timeouts is not None:  # a test paused in the debugger is not hung (as under --pdb; a
            timeouts.pytest_enter_pdb()  # watchdog not made yet is made disabled: ~30 ms saved)
        self._handle_sigint()
        launcher.listen(fd, self.parent, self._on_listening, kind="tests")
        _on_disconnect(self._on_close)

    def _on_listening(self) -> dict[str, Any]:
        from pytest_mcpdebug.debug.preimports import preimportable

        rewrite_hook = getattr(self.config.pluginmanager, "rewrite_hook", None)
        return {"logpoints": _print_logpoints(), "modules": preimportable(rewrite_hook)}

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running = nodeid

    def _on_close(self) -> None:
        """The server disconnected (debugpy's reader thread): the run stops after this test."""
        self.closed = True
        if self.session is not None:
            self.session.shouldstop = CLOSED
        timeouts = self.config.pluginmanager.get_plugin("mcpdebug-timeouts")
        if timeouts is not None:  # a SIGINT of the server's is recorded as what it is
            timeouts.interrupter = "the debugger's close"
        running = self.running
        if running is not None:
            timer = threading.Timer(CLOSE_GRACE, self._interrupt, args=(running,))
            timer.name, timer.daemon = "mcpdebug-debug-close", True
            timer.pydev_do_not_trace = True  # type: ignore[attr-defined]
            timer.start()

    def _interrupt(self, nodeid: str) -> None:
        if self.running == nodeid and not self._interrupted:
            os.kill(os.getpid(), signal.SIGINT)  # handled in the main thread: `_on_sigint`

    def pytest_runtest_logfinish(self) -> None:
        self.running = None
        if self.closed:  # the rest of the run (reports, summary) at full speed, untraced
            with contextlib.suppress(Exception):
                import pydevd

                pydevd.stoptrace()

    def _handle_sigint(self) -> None:
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, OSError):
                self._previous_sigint = signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        __tracebackhide__ = True
        if self.closed and not self._interrupted and self.running is not None:
            self._interrupted = True
            raise DebugSessionClosed(CLOSED)
        previous = self._previous_sigint
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    @pytest.hookimpl(optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool:
        return True  # pytest-timeout: "handled", so it sets no timer that a pause would trip


def _hide_recording_threads() -> None:
    """pydevd neither traces nor suspends the recording's threads (named ``mcpdebug-``: the sender,
    which also reads its WebSocket, the hang watchdog, ...): while a test is paused its output still
    reaches the server and the connection stays alive."""
    for thread in threading.enumerate():
        if thread.name.startswith("mcpdebug-"):
            thread.pydev_do_not_trace = True  # type: ignore[attr-defined]
            thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]


def _on_disconnect(callback: Any) -> None:
    """Call ``callback`` when the server disconnects (pydevd's ``on_disconnect``; only the server's
    close disconnects: a crashed server's debuggee is ended by its parent watch)."""
    try:
        import pydevd

        py_db = pydevd.get_global_debugger()
        original = py_db.on_disconnect
    except Exception:
        return

    def on_disconnect() -> None:
        callback()
        original()

    py_db.on_disconnect = on_disconnect


def _print_logpoints() -> str:
    """Make pydevd write each logpoint's message to fd 1 too (pytest's capture of the running test).

    Patched on the class: pydevd makes its DAP command factory when the server connects. Returns
    where logpoint messages go: "stdout", or "dap" only (another pydevd) for the server to store.
    """
    try:
        from _pydevd_bundle.pydevd_net_command_factory_json import NetCommandFactoryJson

        original = NetCommandFactoryJson.make_io_message
    except Exception:
        return "dap"

    from pytest_mcpdebug.debug import logpoints

    def make_io_message(self: Any, msg: str, ctx: Any) -> Any:
        if str(ctx) == "1":  # logpoints; redirected stdout is off in a debug run
            with contextlib.suppress(OSError):
                os.write(1, logpoints.split(msg)[1].encode("utf-8", "replace"))
        return original(self, msg, ctx)

    NetCommandFactoryJson.make_io_message = make_io_message
    return "stdout"
