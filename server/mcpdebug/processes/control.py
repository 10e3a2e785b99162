"""The server's control requests to a running `mcpdebug run` (restart, signal, stdin), answered by
its supervisor in the main thread, one at a time (`runner.Supervisor`)."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any, Final

from mcpdebug.processes.child import Child, StdinError

if TYPE_CHECKING:
    from mcpdebug.processes.session_client import SessionClient
    from pytest_mcpdebug import protocol

STOP_SIGNALS: Final = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGKILL})
"""Sent through `control_process`, these stop the session whatever its restart policy."""
# Timeouts
STOP_GRACE: Final = 5.0


class RequestError(Exception):
    """A control request that cannot be done; the message says why."""


class ControlRequests:
    """What the supervisor does for a request; the state it changes is the supervisor's."""

    child: Child | None
    restart_at: float | None
    stop_requested: str

    @property
    def session(self) -> SessionClient:
        raise NotImplementedError

    def _start_child(self, message: str = "started") -> int | None:
        raise NotImplementedError

    def _answer(self, request: protocol.Request) -> None:
        from pytest_mcpdebug import protocol

        handlers = {"restart": self._restart, "signal": self._signal, "stdin": self._stdin}
        handler = handlers.get(request.command)
        try:
            if handler is None:
                raise RequestError(
                    f"{request.command!r} is not a request a runner answers; use restart, signal or stdin"
                )
            result = handler(request.arguments)
        except RequestError as exc:
            self.session.sender.reply(protocol.Reply(id=request.id, ok=False, error=str(exc)))
            return
        self.session.sender.reply(protocol.Reply(id=request.id, result=result))

    def _running(self) -> Child:
        if self.child is None or self.child.poll() is not None:
            when = (
                ""
                if self.restart_at is None
                else f"; it restarts in {max(self.restart_at - time.monotonic(), 0):.0f} s"
            )
            raise RequestError(f"its process is not running{when}")
        return self.child

    def _restart(self, arguments: dict[str, Any]) -> dict[str, Any]:
        old = self.child
        old_pid = old.pid if old is not None else None
        if old is not None and old.poll() is None:
            self.stop_requested = "restart requested"
            self.session.status("restarting", pid=old_pid, message="restart requested")
            old.stop(STOP_GRACE)
            old.join_reader(1.0)
        self.child, self.restart_at = None, None
        pid = self._start_child(message="restarted (requested)")
        if pid is None:
            raise RequestError(
                f"the restart failed: the command could not be started (pid {old_pid} had stopped)"
            )
        return {
            "pid": pid,
            "old_pid": old_pid,
            "status": "running",
            "message": f"restarted: pid {old_pid} -> {pid}",
        }

    def _signal(self, arguments: dict[str, Any]) -> dict[str, Any]:
        from pytest_mcpdebug import protocol

        name = str(arguments.get("signal") or "SIGTERM")
        if name not in protocol.PROCESS_SIGNALS:
            raise RequestError(f"signal {name!r} is not one of {', '.join(protocol.PROCESS_SIGNALS)}")
        child = self._running()
        signum = signal.Signals[name]
        if signum in STOP_SIGNALS:
            self.stop_requested = "sent by control_process"
        child.signal(signum)
        return {
            "pid": child.pid,
            "signal": name,
            "message": f"{name} sent to process {child.pid} and its group",
        }

    def _stdin(self, arguments: dict[str, Any]) -> dict[str, Any]:
        text = arguments.get("input")
        if not isinstance(text, str):
            raise RequestError("input must be a string")
        child = self._running()
        try:
            written = child.write_stdin(text.encode())
        except StdinError as exc:
            raise RequestError(str(exc)) from None
        return {"pid": child.pid, "bytes": written}
