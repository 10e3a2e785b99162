"""Live sessions: tests held right now at a failure, and how to reach the process holding each.

The ingest learns of a hold from the process's `Held` event and of its end from `Resumed` (or from
the connection closing). Requests go out on that process's WebSocket as `Request` frames; the
process answers each with a `Reply` carrying the same id, which resolves the waiting tool call.

Everything here runs on the server's event loop. Waiters (`run_tests`, `wait_for_stop`) sleep on
`changed` and re-check what they wait for: a hold in their run, or the run's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final, Protocol

from mcpdebug.report import entries
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

# Timeouts
REQUEST_TIMEOUT: Final = 30.0
"""A held process answers at once, unless an expression it evaluates runs long (its limit is 10 s)."""
# Limits
ENDED_KEPT: Final = 1_000
"""Ended sessions remembered, so a late request learns how its session ended."""


class SessionError(LookupError):
    """A request that cannot reach a held test; the message says what exists and what to do."""


class Connection(Protocol):
    async def send(self, message: str) -> None: ...


class LocalSession(Protocol):
    """A live session this server answers itself (a debug session, see `mcpdebug.debug`)."""

    async def handle(self, command: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


@dataclass
class LiveSession:
    id: str
    run_id: str
    process: str
    worker: str
    nodeid: str
    when: str
    held_at: float
    timeout: float
    reason: str = "failure"
    """failure (--mcp-debug-break) or hang (--mcp-debug-hang-action=pause)."""
    state: str = "held"
    """held, or how the hold ended: continue, close, timeout or disconnected."""
    ended_at: float | None = None
    active_at: float = 0.0
    """When the process last answered a request: its idle break timeout counts from here."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.run_id, self.process)


class Sessions:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._connections: dict[tuple[str, str], Connection] = {}
        self._live: dict[str, LiveSession] = {}
        self._ended: OrderedDict[str, LiveSession] = OrderedDict()
        self._pending: dict[int, tuple[tuple[str, str], asyncio.Future[protocol.Reply]]] = {}
        self._ids = itertools.count(1)
        self._changed: asyncio.Event | None = None
        self._local: dict[str, LocalSession] = {}

    # Ingest side --------------------------------------------------------------------------------

    def connected(self, key: tuple[str, str], connection: Connection) -> None:
        self._connections[key] = connection

    def disconnected(self, key: tuple[str, str], connection: Connection) -> None:
        if self._connections.get(key) is not connection:
            return
        del self._connections[key]
        for session in [s for s in self._live.values() if s.key == key]:
            self._end(session, "disconnected")
        for request_id, (owner, future) in list(self._pending.items()):
            if owner == key and not future.done():
                future.set_exception(SessionError("the held process closed its connection before answering"))
                del self._pending[request_id]
        self._notify()

    def observe(self, events: list[protocol.Event]) -> None:
        """Called with each stored batch: registers holds and their ends, and wakes waiters."""
        interesting = False
        for event in events:
            if isinstance(event, protocol.Held):
                other = self._live.get(event.session)
                if other is not None and other.key != (event.run_id, event.process):
                    continue  # another process's session id: it cannot take that session over
                self._live[event.session] = LiveSession(
                    id=event.session,
                    run_id=event.run_id,
                    process=event.process,
                    worker=event.worker,
                    nodeid=event.nodeid,
                    when=event.when,
                    held_at=event.ts,
                    timeout=event.timeout,
                    reason=event.reason,
                )
                interesting = True
            elif isinstance(event, protocol.Resumed):
                session = self._live.get(event.session)
                if session is not None:
                    self._end(session, event.reason)
                interesting = True
            elif isinstance(
                event,
                (
                    protocol.RunFinished,
                    protocol.ProcessFinished,
                    protocol.TestFinished,
                    protocol.SessionStarted,
                    protocol.ProcessStatus,
                ),
            ):
                interesting = True
        if interesting:
            self._notify()

    def resolve(self, reply: protocol.Reply, key: tuple[str, str]) -> None:
        """A reply from the process of ``key``; one naming a request sent to another process is dropped."""
        entry = self._pending.get(reply.id)
        if entry is None or entry[0] != key:
            return
        del self._pending[reply.id]
        if not entry[1].done():
            entry[1].set_result(reply)

    def add_local(self, session_id: str, session: LocalSession) -> None:
        self._local[session_id] = session

    def remove_local(self, session_id: str) -> None:
        self._local.pop(session_id, None)

    def is_local(self, session_id: str) -> bool:
        return session_id in self._local

    # Queries --------------------------------------------------------------------------------------

    def held(self, run_id: str | None = None) -> list[LiveSession]:
        """Sessions held now (safe from a tool's worker thread: the copy is taken in one step)."""
        return [s for s in list(self._live.values()) if run_id is None or s.run_id == run_id]

    def run_of(self, session_id: str) -> str | None:
        """The run of a session, held now or ended (remembered), or None."""
        session = self._live.get(session_id) or self._ended.get(session_id)
        return session.run_id if session is not None else None

    def get(self, session_id: str) -> LiveSession:
        session = self._live.get(session_id)
        if session is not None:
            return session
        ended = self._ended.get(session_id)
        if ended is not None:
            raise SessionError(
                f"Session {session_id} is not held any more ({_ENDINGS.get(ended.state, ended.state)}). "
                f'Its failure is stored: get_failure(run_id="{ended.run_id}", test="{ended.nodeid}"); '
                f'wait_for_stop("{ended.run_id}") waits for the run\'s next stop.'
            )
        held = ", ".join(f"{s.id} ({s.nodeid})" for s in self._live.values()) or "none"
        debugged = ", ".join(self._local) or "none"
        raise SessionError(
            f"No live session {session_id!r}. Held now: {held}; debug sessions: {debugged}. Tests are held "
            "only in runs started with --mcp-debug-break or run_tests(break_on_failure=True); list_sessions "
            "shows them."
        )

    async def request(
        self, session_id: str, command: str, arguments: dict[str, Any], timeout: float = REQUEST_TIMEOUT
    ) -> dict[str, Any]:
        """Ask the held process; returns its result, or raises SessionError with its error."""
        local = self._local.get(session_id)
        if local is not None:
            return _logged(session_id, command, arguments, await local.handle(command, arguments))
        session = self.get(session_id)
        connection = self._connections.get(session.key)
        if connection is None:
            self._end(session, "disconnected")
            raise SessionError(f"Session {session_id}'s process is no longer connected; its hold has ended.")
        request_id = next(self._ids)
        future: asyncio.Future[protocol.Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (session.key, future)
        frame = protocol.Request(id=request_id, session=session_id, command=command, arguments=arguments)
        try:
            await connection.send(protocol.encode(frame).decode())
            reply = await asyncio.wait_for(future, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise SessionError(
                f"The held process did not answer {command} within {timeout:g} s; it may still be busy "
                "with an earlier expression (a C call such as a long sleep cannot be interrupted)."
            ) from None
        except SessionError:
            raise
        except Exception as exc:
            raise SessionError(f"Could not reach session {session_id}: {exc}") from None
        finally:
            self._pending.pop(request_id, None)
        session.active_at = time.time()
        if not reply.ok:
            raise SessionError(reply.error or f"{command} failed")
        if command in ("continue", "close"):
            self._end(session, command)
            self._notify()
        return _logged(session_id, command, arguments, reply.result)

    def connected_runs(self) -> set[str]:
        """Runs with a process connected to this server right now (a process session's runner)."""
        return {run_id for run_id, _ in list(self._connections)}

    async def ask(
        self, run_id: str, command: str, arguments: dict[str, Any], timeout: float = REQUEST_TIMEOUT
    ) -> protocol.Reply:
        """Send a request to the process of ``run_id`` connected now (a process session's runner) and
        return its reply; raises SessionError when it is not connected or does not answer in time."""
        key = next((k for k in list(self._connections) if k[0] == run_id), None)
        connection = self._connections.get(key) if key is not None else None
        if key is None or connection is None:
            raise SessionError(f"the runner of {run_id} is not connected to this server")
        request_id = next(self._ids)
        future: asyncio.Future[protocol.Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (key, future)
        frame = protocol.Request(id=request_id, session=run_id, command=command, arguments=arguments)
        try:
            await connection.send(protocol.encode(frame).decode())
            return await asyncio.wait_for(future, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise SessionError(
                f"the runner of {run_id} did not answer {command} within {timeout:g} s"
            ) from None
        except SessionError:
            raise
        except Exception as exc:
            raise SessionError(f"could not reach the runner of {run_id}: {exc}") from None
        finally:
            self._pending.pop(request_id, None)

    async def changed(self, timeout: float) -> None:
        """Wait until something a waiter may care about happens (or ``timeout`` passes)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        event = self._changed
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def notify(self) -> None:
        self._notify()

    # Internals --------------------------------------------------------------------------------------

    def _end(self, session: LiveSession, state: str) -> None:
        self._live.pop(session.id, None)
        if session.state == "held":
            session.state, session.ended_at = state, time.time()
        self._ended[session.id] = session
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()


def _logged(
    session_id: str, command: str, arguments: dict[str, Any], result: dict[str, Any]
) -> dict[str, Any]:
    """Variables read from a live session make seed 000's debug:variables entry."""
    variables = result.get("variables") if command in ("variables", "locals") else None
    if isinstance(variables, list):
        frame = result.get("frame")
        entries.debug_variables(
            session_id,
            frame_id=arguments.get("frame_id", frame.get("id") if isinstance(frame, dict) else None),
            scope=str(result.get("scopeName") or ("Locals" if command == "locals" else "Variables")),
            reference=arguments.get("variables_reference"),
            variables=variables,
        )
    return result


_ENDINGS: Final = {
    "continue": "it was continued",
    "close": "it was closed and its run stopped",
    "timeout": "it resumed by itself after its break timeout",
    "disconnected": "its process disconnected or ended",
}
