"""The frames that run a connection, as against the events it carries (`frames`).

The handshake (a client's `Hello`, then the server's `Welcome`, or a close code and a reason), flow
control (`Ack`), live inspection and process control (the server's `Request`, answered by a `Reply`)
and a process session's registration (`Registered`); and the unions a side decodes: what a client
sends (its hello, then events) and what the server sends.
"""

from __future__ import annotations

from typing import Any, Final

from pytest_mcpdebug.protocol.frames import Event, Frame, RunId
from pytest_mcpdebug.protocol.payloads import Int

# Close codes the server uses (RFC 6455 leaves 4000-4999 to applications).
CLOSE_MALFORMED: Final = 1007  # "invalid frame payload data"
CLOSE_POLICY: Final = 1008  # bad or missing hello, protocol version mismatch
CLOSE_TOO_BIG: Final = 1009  # websockets enforces max_size with this code itself

# Handshake and flow control -------------------------------------------------------------------


class Hello(Frame, tag="hello"):
    """First frame a client sends over WebSocket."""

    protocol: Int
    run_id: RunId
    process: str
    worker: str
    pid: Int
    spool: str | None = None
    """Name of this process's spool file (in the spool folder) if it wrote one before connecting."""
    ack_interval: float = 0.0
    """Seconds the server may wait before acknowledging what it stored (0: each message at once).
    Each ack wakes a thread of the client, which costs a process running quick tests far more
    than the ack itself; a client sets this to have one ack a second at most (see `ingest.acks`)."""


class Welcome(Frame, tag="welcome"):
    protocol: Int
    server_pid: int
    label: str = ""
    """A process session's label, when the server already assigned one (a runner reconnecting)."""
    spool_read: bool = False
    """The server read the spool file the hello named. When it could not (it keeps its store in
    another folder), the client sends the spool's events over the connection instead."""


class Ack(Frame, tag="ack"):
    """The server committed every event of this connection up to and including ``seq``."""

    seq: Int


# Live inspection ---------------------------------------------------------------------------------
#
# While a test is held the server sends `Request` frames on the same connection; the held process
# answers each with a `Reply` (a text message of its own, never batched with events) naming its id.


# (Their ``{}`` defaults are msgspec's, copied per frame: ruff cannot see `Frame` is a Struct here.)


class Request(Frame, tag="request"):
    id: Int
    session: str
    command: str
    """stack, scopes, variables, locals, evaluate, continue or close."""
    arguments: dict[str, Any] = {}  # noqa: RUF012


class Reply(Frame, tag="reply"):
    id: Int
    ok: bool = True
    result: dict[str, Any] = {}  # noqa: RUF012
    error: str = ""
    """Why the request failed, in words an agent can act on (``ok`` is false)."""


REQUEST_COMMANDS: Final = ("stack", "scopes", "variables", "locals", "evaluate", "continue", "close")
PROCESS_COMMANDS: Final = ("restart", "signal", "stdin")
"""Requests to a process session's runner (seed 004's command and stdin messages); the `Reply`
is seed 004's acknowledgment: ``ok`` with ``result`` (``pid``, ``old_pid``, ``bytes``) or an ``error``."""
PROCESS_SIGNALS: Final = ("SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2")


class Registered(Frame, tag="registered"):
    """The server's answer to a `SessionStarted`: the label it assigned (seed 004's connection flow)."""

    run_id: str
    label: str


ClientFrame = Hello | Event
ServerFrame = Welcome | Ack | Request | Registered
