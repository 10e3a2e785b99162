"""A debug test run (`run_tests(debug=True)`): debugpy listens in the test process for the server.

Registered by `plugin.py` only when ``MCPDEBUG_DEBUG`` is set (by the server, which also passes the
file descriptor to report the port on), so a run that is not debugged never imports this module or
debugpy. debugpy starts once collection is done, so breakpoints in test files bind at once and
collection runs at full speed; the test loop waits until the server has configured its breakpoints.

While a test is paused at a breakpoint no timer may end it: the plugin's own watchdog is disabled as
for ``--pdb``, and pytest-timeout is told (through its ``pytest_timeout_set_timer`` hook) that the
timer is taken care of. Logpoint messages are written to the test's own stdout (file descriptor 1,
which pytest captures), so they are stored with the test's output, in order, where they happened.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Final

import pytest

ENV: Final = "MCPDEBUG_DEBUG"
"""``<fd>,<server pid>``: report debugpy's port on fd; end the run if that pid stops being the parent."""


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

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_mcpdebug.debug import launcher

        fd, self.fd = self.fd, None
        if fd is None:
            return
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
        if timeouts is not None:  # a test paused in the debugger is not hung
            timeouts.watchdog.disable()
        launcher.listen(fd, self.parent, lambda: {"logpoints": _print_logpoints()}, kind="tests")

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

    def make_io_message(self: Any, msg: str, ctx: Any) -> Any:
        if str(ctx) == "1":  # logpoints; redirected stdout is off in a debug run
            with contextlib.suppress(OSError):
                os.write(1, msg.encode("utf-8", "replace"))
        return original(self, msg, ctx)

    NetCommandFactoryJson.make_io_message = make_io_message
    return "stdout"
