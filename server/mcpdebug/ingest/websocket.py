"""WebSocket ingest: where live test processes stream their events.

Listens on 127.0.0.1 only. Refuses before the upgrade: a missing or wrong token (401) and any request
carrying an Origin header, i.e. a browser page (403). After the upgrade: a first frame that is not a
valid ``hello`` of a protocol version we accept closes with 1008, a malformed frame with 1007, an oversized
message with 1009 (enforced by websockets). Each refusal is logged; other connections carry on.

Live inspection shares the connection: `Sessions` sends a held process `Request` frames, and the
process's `Reply` messages (text messages starting with the reply tag) are routed back to it here.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import sqlite3
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from mcpdebug.ingest.acks import AckPacer
from mcpdebug.ingest.spool import decode_events, ingest_spool
from mcpdebug.live.sessions import Sessions
from mcpdebug.report import from_events
from mcpdebug.store import Store
from pytest_mcpdebug import protocol

log = logging.getLogger("mcpdebug.ingest")

# Timeouts
HELLO_TIMEOUT = 10.0


class IngestServer:
    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_size: int = protocol.MAX_MESSAGE_BYTES,
        sessions: Sessions | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions if sessions is not None else Sessions(store)
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(24)
        self.max_size = max_size
        self.connections: dict[tuple[str, str], ServerConnection] = {}
        self._server: Server | None = None
        self._closing = False

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/"

    async def start(self) -> str:
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._check_request,
            max_size=self.max_size,
            compression=None,
            ping_interval=20,
            ping_timeout=60,
            logger=logging.getLogger("mcpdebug.ingest.websockets"),
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        log.info("ingest listening on %s", self.url)
        return self.url

    async def close(self) -> None:
        self._closing = True  # connections cut by our own exit say nothing about their processes
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _check_request(self, connection: ServerConnection, request: Request) -> Response | None:
        peer = _peer(connection)
        if request.headers.get("Origin") is not None:
            log.warning(
                "refused %s: browser Origin %r (only local test processes may connect)",
                peer,
                request.headers["Origin"],
            )
            return connection.respond(HTTPStatus.FORBIDDEN, "mcpdebug: cross-origin requests are refused\n")
        auth = request.headers.get("Authorization", "")
        given = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if not given:
            given = parse_qs(urlsplit(request.path).query).get("token", [""])[0]
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            log.warning("refused %s: %s token", peer, "wrong" if given else "missing")
            return connection.respond(
                HTTPStatus.UNAUTHORIZED,
                "mcpdebug: missing or wrong token; read it from .mcpdebug/server.json\n",
            )
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        peer = _peer(ws)
        key: tuple[str, str] | None = None
        acks: AckPacer | None = None
        try:
            accepted = await self._handshake(ws, peer)
            if accepted is None:
                return
            hello, welcome = accepted
            key = (hello.run_id, hello.process)
            self.connections[key] = ws  # before the welcome: a welcomed client may rely on it
            self.sessions.connected(key, ws)
            await ws.send(protocol.encode(welcome).decode())
            log.info("%s connected: run %s, %s", peer, hello.run_id, hello.process)
            acks = AckPacer(ws, hello.ack_interval)
            async for message in ws:
                try:
                    if isinstance(message, str) and message.startswith(protocol.REPLY_PREFIX):
                        self.sessions.resolve(protocol.decode_reply(message), key)
                        continue
                    # In a worker thread: megabytes of output must not hold up other connections
                    # or the MCP server sharing this event loop.
                    last, notable = await asyncio.to_thread(self._ingest, message, key)
                except protocol.ProtocolError as exc:
                    log.warning("closing %s (%s/%s): %s", peer, key[0], key[1], exc)
                    await ws.close(protocol.CLOSE_MALFORMED, str(exc)[:120])
                    return
                except (
                    sqlite3.Error,
                    OSError,
                ) as exc:  # a full disk, a read-only store: not the peer's fault
                    log.warning(
                        "cannot store the events of run %s (%s): %s; they stay with the test process, which "
                        "keeps them in its spool file until a server can take them (free some space, or "
                        "check the store's folder)",
                        key[0],
                        key[1],
                        exc,
                    )
                    await ws.close(1011, f"the server cannot store events: {exc}"[:120])
                    return
                if notable:
                    self.sessions.observe(notable)
                if any(isinstance(e, protocol.SessionStarted) for e in notable):  # before the ack, so
                    registered = protocol.Registered(run_id=key[0], label=self._label(key[0]))  # a runner
                    await ws.send(protocol.encode(registered).decode())  # closing at once still hears it
                if last is not None:
                    goodbye = any(type(e) is protocol.ProcessFinished for e in notable)
                    await acks.stored(last, len(message), urgent=goodbye)
        except ConnectionClosed as exc:
            if (exc.rcvd and exc.rcvd.code == protocol.CLOSE_TOO_BIG) or (exc.sent and exc.sent.code == 1009):
                log.warning("closed %s: message over %d bytes", peer, self.max_size)
        except Exception:  # a bug must not take the server down with it
            log.exception("error on the connection from %s", peer)
            await ws.close(1011, "internal error; see the server log")
        finally:
            if acks is not None:
                acks.cancel()
            if key is not None and self.connections.get(key) is ws:
                del self.connections[key]
            if key is not None:
                self.sessions.disconnected(key, ws)
                if not self._closing:  # gone without its goodbye? then its run may have crashed
                    try:
                        await asyncio.to_thread(self.store.connection_closed, *key)
                    except Exception:
                        log.exception("cannot record the end of %s/%s's connection", *key)

    async def _handshake(
        self, ws: ServerConnection, peer: str
    ) -> tuple[protocol.Hello, protocol.Welcome] | None:
        """Read and check the hello; the welcome to send once the connection is registered."""
        try:
            first = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT)
        except (TimeoutError, asyncio.TimeoutError):
            log.warning("closing %s: no hello within %.0f s", peer, HELLO_TIMEOUT)
            await ws.close(protocol.CLOSE_POLICY, "expected a hello frame")
            return None
        version = protocol.hello_version(first)
        if version is not None and version not in protocol.ACCEPTED_VERSIONS:
            log.warning(
                "closing %s: protocol %d, this server speaks %d", peer, version, protocol.PROTOCOL_VERSION
            )
            await ws.close(
                protocol.CLOSE_POLICY,
                f"protocol {version} unsupported; server speaks {protocol.PROTOCOL_VERSION}",
            )
            return None
        try:
            frame = protocol.decode_client_frame(first)
        except protocol.ProtocolError as exc:
            log.warning("closing %s: bad hello: %s", peer, exc)
            await ws.close(protocol.CLOSE_MALFORMED, f"bad hello: {exc}"[:120])
            return None
        if not isinstance(frame, protocol.Hello):
            log.warning("closing %s: first frame was %s, not hello", peer, type(frame).__name__)
            await ws.close(protocol.CLOSE_POLICY, "the first frame must be a hello")
            return None
        spool_read = False
        if frame.spool:  # it recorded offline before: take that in first, so the store is in order
            report = await asyncio.to_thread(ingest_spool, self.store, only=os.path.basename(frame.spool))
            spool_read = report.files > 0  # else it is in another folder: the client replays it
        welcome = protocol.Welcome(
            protocol=protocol.PROTOCOL_VERSION,
            server_pid=os.getpid(),
            label=self._label(frame.run_id),
            spool_read=spool_read,
        )
        try:
            await asyncio.to_thread(self.store.connection_opened, frame.run_id)
        except sqlite3.Error as exc:
            log.warning("cannot mark run %s running again: %s", frame.run_id, exc)
        return frame, welcome

    def _label(self, run_id: str) -> str:
        """A process session's assigned label ("" for a test run, or before it registered)."""
        row = self.store.db.execute(
            "SELECT label FROM runs WHERE run_id=? AND kind='process'", (run_id,)
        ).fetchone()
        return str(row[0]) if row else ""

    def _ingest(self, message: str | bytes, key: tuple[str, str]) -> tuple[int | None, list[protocol.Event]]:
        """Decode and store one message of a connection; returns the highest seq, to acknowledge, and
        the events live sessions and their waiters care about."""
        if isinstance(message, bytes) and protocol.is_packed_message(message):
            events = protocol.decode_packed_message(message)
        else:
            events = decode_events(protocol.split_lines(message))
        for event in events:
            if (event.run_id, event.process) != key:
                raise protocol.ProtocolError(
                    f"event of {event.run_id}/{event.process} on the connection of {key[0]}/{key[1]}"
                )
        if not events:
            return None, []
        self.store.apply(events)
        from_events.ingested(self.store, events)  # seed 000's session and state entries
        notable = [e for e in events if type(e) in _NOTABLE]
        return max(e.seq for e in events), notable


_NOTABLE = (
    protocol.Held,
    protocol.Resumed,
    protocol.TestFinished,
    protocol.RunFinished,
    protocol.ProcessFinished,
    protocol.SessionStarted,
    protocol.ProcessStatus,
)


def _peer(ws: Any) -> str:
    try:
        host, port = ws.remote_address[:2]
        return f"{host}:{port}"
    except Exception:
        return "?"
