"""`mcpdebug serve`: the store, the WebSocket ingest and the MCP server, in one event loop.

Start-up order matters: the HTTP port (with ``--http``) is taken first, so a busy port fails before
anything else; then the store is opened and pending spool ingested, then the ingest endpoint (and the
MCP URL and its bearer token) is advertised in ``server.json``, then MCP starts answering. On exit
the advertisement is removed (a killed server leaves it behind, but naming a dead pid it is ignored
by test processes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcpdebug import http_auth
from mcpdebug.app import DebugServer, build_server
from mcpdebug.debug.manager import DEFAULT_IDLE_TIMEOUT, Debugger
from mcpdebug.ingest.recovery import rebuild
from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.managed import ProcessManager
from mcpdebug.processes.test_runs import Runner
from mcpdebug.report import server_log
from mcpdebug.store import Store
from pytest_mcpdebug.folder import SERVER_FILE, ServerInfo, read_server_info, write_server_info
from pytest_mcpdebug.limits import Limits, describe

log = logging.getLogger("mcpdebug.serve")


@dataclass(frozen=True)
class ServeConfig:
    directory: Path
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    ingest_port: int = 0
    limits: Limits = field(default_factory=Limits)
    read_only: bool = False
    security: http_auth.HttpSecurity | None = None  # required with http: see `http_auth.resolve`
    tools: tuple[str, ...] | None = None
    """The tool groups to list (`mcpdebug serve --tools`); None: all of them."""
    debug_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    debug_spare: bool = True
    """Keep a debuggee started ahead of the next debug session (`mcpdebug.debug.spares`)."""
    log: server_log.LogSettings = field(default_factory=server_log.LogSettings)


async def run(config: ServeConfig) -> None:
    if config.http and config.security is None:
        raise ValueError("ServeConfig(http=True) needs security= (see mcpdebug.http_auth.resolve)")
    listener = _listen(config) if config.http else None
    try:
        await _run(config, listener)
    finally:
        if listener is not None:
            listener.close()


async def _run(config: ServeConfig, listener: socket.socket | None) -> None:
    security = config.security if listener is not None else None
    mcp_url = ""
    if listener is not None and security is not None:
        mcp_url = http_auth.public_url(config.host, listener.getsockname()[1], security)
    store = _open_store(config)
    written = _open_log(config, store)
    sessions = Sessions(store)
    runner = Runner(store, sessions, url=None, token=None)
    processes = ProcessManager(store, sessions, url=None, token=None)
    ingest: IngestServer | None = None
    kept_in: Path | None = None
    other = read_server_info(config.directory)
    if other is not None and other.pid != os.getpid() and not store.read_only:
        log.info(
            "another mcpdebug serve (pid %d) ingests runs for %s; this one answers MCP from the same store",
            other.pid,
            config.directory,
        )
    elif not store.read_only:  # a store this process cannot write takes in no live runs
        ingest = IngestServer(store, port=config.ingest_port, sessions=sessions)
        url = await ingest.start()
        runner.url, runner.token = url, ingest.token
        processes.url, processes.token = url, ingest.token
        kept_in = write_server_info(
            config.directory,
            ServerInfo(
                url=url,
                token=ingest.token,
                pid=os.getpid(),
                host=socket.gethostname(),
                mcp_url=mcp_url,
                mcp_token=security.token if security else "",
            ),
        )
    verifier = http_auth.StaticTokenVerifier(security.token) if security else None
    debugger = Debugger(
        store, sessions, runner, idle_timeout=config.debug_idle_timeout, spare=config.debug_spare
    )
    app = build_server(
        store,
        sessions,
        runner,
        processes,
        debugger,
        groups=config.tools,
        read_only=config.read_only,
        token_verifier=verifier,
    )
    if config.read_only:
        log.info("read-only: %s not offered", ", ".join(app.withheld))
    try:
        if listener is not None and security is not None:
            for line in http_auth.client_help(mcp_url, security, kept_in):
                print(line, file=sys.stderr, flush=True)
            await _serve_http(app, config, security, listener)  # uvicorn handles SIGINT/SIGTERM itself
        else:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
                await app.run_stdio_async()
                tasks.cancel_scope.cancel()
    finally:
        await debugger.shutdown()  # before the runner: a debugged run is detached, then ended
        await runner.close()
        await processes.close()  # while ingest still takes the last lines and states they send
        if ingest is not None:
            await ingest.close()
            _remove_server_file(config.directory)
        store.close()
        if written is not None:
            written.close()


def _open_store(config: ServeConfig) -> Store:
    """The store, rebuilt if it was found corrupted, with pending spool ingested and the retention
    limits applied; a store this process may not write is served as it is."""
    store = Store(config.directory, limits=config.limits)
    log.info("store %s (%s)", config.directory, describe(config.limits))
    if store.read_only:
        log.warning("the store %s is read-only here: serving what it holds; no live runs", store.path)
        return store
    rebuild(store)  # logs what was recovered
    report = ingest_spool(store)
    if report.files:
        log.info(
            "ingested %d events of %d run(s) from %d spool file(s)",
            report.new,
            len(report.runs),
            report.files,
        )
    evicted = store.enforce_retention()
    if evicted:
        log.info("evicted %d run(s) beyond the retention limits", len(evicted))
    return store


def _open_log(config: ServeConfig, store: Store) -> server_log.ServerLog | None:
    """Seed 000's JSON log beside the store; a folder it cannot be written in costs a warning only."""
    if not config.log.enabled:
        return None
    if store.read_only and config.log.path is None:
        log.warning("no JSON log: the store's folder is read-only here (--log-file PATH puts it elsewhere)")
        return None
    try:
        opened = server_log.open_log(config.directory, config.log)
    except OSError as exc:
        log.warning("no JSON log: cannot write %s (%s)", exc.filename, exc.strerror)
        return None
    log.info("JSON log: %s (level %s)", opened.path, config.log.level)
    return opened


def _listen(config: ServeConfig) -> socket.socket:
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket's proto says TCP; with proto 0 every reply waits ~40 ms on Nagle + delayed ACK.
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
        sock.listen()  # clients that connect once server.json names the port wait, not fail
    except OSError as exc:
        sock.close()
        raise SystemExit(
            f"mcpdebug serve: cannot listen on {config.host}:{config.port} ({exc.strerror}); "
            "pick another port with --port (0 picks a free one)"
        ) from None
    return sock


async def _serve_http(
    app: DebugServer, config: ServeConfig, security: http_auth.HttpSecurity, sock: socket.socket
) -> None:
    import uvicorn

    checks = http_auth.transport_security(config.host, security)
    if not http_auth.is_loopback(config.host):
        names = ", ".join(h for h in checks.allowed_hosts if not h.endswith(":*"))
        log.info("remote clients may reach MCP as %s (more with --allowed-host)", names)
    starlette_app = app.streamable_http_app(host=config.host, transport_security=checks)
    server = uvicorn.Server(
        uvicorn.Config(
            http_auth.RefusalLog(starlette_app),
            log_level="warning",
            lifespan="on",
            ssl_certfile=security.tls_cert,
            ssl_keyfile=security.tls_key,
        )
    )
    # uvicorn re-raises the signal it stopped on once it has shut down; with Python-level handlers
    # in place that re-raise is a no-op and our own clean-up still runs.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    await server.serve(sockets=[sock])


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """SIGTERM or SIGINT ends the server like end-of-input does, so `finally` cleans up."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return


def _remove_server_file(directory: Path) -> None:
    info = read_server_info(directory)
    if info is None or info.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (directory / SERVER_FILE).unlink()
