"""`mcpdebug serve`: the store, the WebSocket ingest and the MCP server, in one event loop.

Start-up order matters: the HTTP port (with ``--http``) is taken first, so a busy port fails before
anything else; then the store is opened and pending spool ingested, the server built, then the
ingest endpoint (and the MCP URL and its bearer token) is advertised in ``server.json``, then MCP
answers tool calls. Over stdio the initialize reply comes first, before any of that is loaded
(`mcpdebug.stdio_start`): the rest is built in a worker thread once it is out, and requests wait
for it. On exit the advertisement is removed (a killed server leaves it behind, but naming a dead
pid it is ignored by test processes).

This module imports neither the MCP SDK nor the store at the top: what a start-up needs is
imported where it is needed (`python -X importtime` shows it; benchmarks/startup.py times it).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from mcpdebug import http_auth
from mcpdebug.report.log_settings import LogSettings
from pytest_mcpdebug.folder import SERVER_FILE, ServerInfo, read_server_info, write_server_info
from pytest_mcpdebug.limits import Limits, describe

if TYPE_CHECKING:
    from mcpdebug.app import DebugServer
    from mcpdebug.debug.manager import Debugger
    from mcpdebug.ingest.websocket import IngestServer
    from mcpdebug.live.sessions import Sessions
    from mcpdebug.processes.managed import ProcessManager
    from mcpdebug.processes.test_runs import Runner
    from mcpdebug.report.server_log import ServerLog
    from mcpdebug.store import Store

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
    tools: tuple[str, ...] = ("core",)
    """The tool groups to list at first (`mcpdebug serve --tools`: group names, core, all)."""
    debug_idle_timeout: float | None = None
    """Seconds a debug session lives without a tool call about it; None: the debugger's default."""
    debug_spare: bool = True
    """Keep a debuggee started ahead of the next debug session (`mcpdebug.debug.spares`)."""
    log: LogSettings = field(default_factory=LogSettings)


async def run(config: ServeConfig) -> None:
    if config.http and config.security is None:
        raise ValueError("ServeConfig(http=True) needs security= (see mcpdebug.http_auth.resolve)")
    if not config.http:
        await _run_stdio(config)
        return
    listener = _listen(config)
    try:
        await _run_http(config, listener)
    finally:
        listener.close()


@dataclass
class _Served:
    """What a serving process holds: built (`_build`), advertised (`_advertise`), then closed."""

    store: Store
    written: ServerLog | None
    sessions: Sessions
    runner: Runner
    processes: ProcessManager
    debugger: Debugger
    app: DebugServer
    ingest: IngestServer | None = None

    async def close(self, directory: Path) -> None:
        await self.debugger.shutdown()  # before the runner: a debugged run is detached, then ended
        await self.runner.close()
        await self.processes.close()  # while ingest still takes the last lines and states they send
        if self.ingest is not None:
            await self.ingest.close()
            _remove_server_file(directory)
        self.store.close()
        if self.written is not None:
            self.written.close()


def _build(config: ServeConfig, security: http_auth.HttpSecurity | None) -> _Served:
    """The store (spool ingested), the JSON log, the live parts and the MCP server: all that takes
    imports and disk reads, and no event loop (stdio builds it in a worker thread)."""
    from mcpdebug.app import build_server
    from mcpdebug.debug.manager import DEFAULT_IDLE_TIMEOUT, Debugger
    from mcpdebug.live.sessions import Sessions
    from mcpdebug.processes.managed import ProcessManager
    from mcpdebug.processes.test_runs import Runner

    store = _open_store(config)
    written = _open_log(config, store)
    sessions = Sessions(store)
    runner = Runner(store, sessions, url=None, token=None)
    processes = ProcessManager(store, sessions, url=None, token=None)
    idle = DEFAULT_IDLE_TIMEOUT if config.debug_idle_timeout is None else config.debug_idle_timeout
    debugger = Debugger(store, sessions, runner, idle_timeout=idle, spare=config.debug_spare)
    app = build_server(
        store,
        sessions,
        runner,
        processes,
        debugger,
        groups=config.tools,
        read_only=config.read_only,
        token_verifier=http_auth.StaticTokenVerifier(security.token) if security else None,
    )
    if config.read_only:
        log.info("read-only: %s not offered", ", ".join(app.withheld))
    return _Served(store, written, sessions, runner, processes, debugger, app)


async def _advertise(
    served: _Served, config: ServeConfig, mcp_url: str, security: http_auth.HttpSecurity | None
) -> Path | None:
    """Start the ingest endpoint and name it in server.json, unless another server ingests here or
    the store is read-only; where server.json was written."""
    from mcpdebug.ingest.websocket import IngestServer

    store = served.store
    other = read_server_info(config.directory)
    if other is not None and other.pid != os.getpid() and not store.read_only:
        log.info(
            "another mcpdebug serve (pid %d) ingests runs for %s; this one answers MCP from the same store",
            other.pid,
            config.directory,
        )
        return None
    if store.read_only:  # a store this process cannot write takes in no live runs
        return None
    served.ingest = IngestServer(store, port=config.ingest_port, sessions=served.sessions)
    url = await served.ingest.start()
    for part in (served.runner, served.processes):
        part.url, part.token = url, served.ingest.token
    return write_server_info(
        config.directory,
        ServerInfo(
            url=url,
            token=served.ingest.token,
            pid=os.getpid(),
            host=socket.gethostname(),
            mcp_url=mcp_url,
            mcp_token=security.token if security else "",
        ),
    )


async def _run_http(config: ServeConfig, listener: socket.socket) -> None:
    security = config.security
    assert security is not None
    mcp_url = http_auth.public_url(config.host, listener.getsockname()[1], security)
    served = _build(config, security)
    try:
        kept_in = await _advertise(served, config, mcp_url, security)
        for line in http_auth.client_help(mcp_url, security, kept_in):
            print(line, file=sys.stderr, flush=True)
        await _serve_http(served.app, config, security, listener)  # uvicorn handles SIGINT/SIGTERM itself
    finally:
        await served.close(config.directory)


async def _run_stdio(config: ServeConfig) -> None:
    """Answer initialize at once, build the rest in a worker thread meanwhile (`stdio_start`).

    The cyclic garbage collector is off until the server is built: start-up creates hundreds of
    thousands of objects (pydantic models) and no garbage worth a collection, and each collection
    scans them all (about a tenth of the start-up's CPU here); what start-up made is then frozen
    out of later collections."""
    gc.disable()
    from mcpdebug import lazy_sdk

    deferred = lazy_sdk.defer_packages()  # before anything imports the SDK
    from mcpdebug import stdio_start

    pending = stdio_start.Pending(stdio_start.initialization(config.read_only))
    served: _Served | None = None

    def build() -> None:
        nonlocal served
        lazy_sdk.complete_packages(deferred)
        served = _build(config, None)  # here, not from the await: a cancelled wait still closes it

    async def load() -> None:
        await pending.wanted.wait()
        await anyio.to_thread.run_sync(build)
        assert served is not None
        await _advertise(served, config, "", None)
        gc.freeze()
        gc.enable()
        pending.ready(served.app.lowlevel)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            tasks.start_soon(load)
            await stdio_start.serve(pending)
            tasks.cancel_scope.cancel()
    finally:
        gc.enable()
        if served is not None:
            await served.close(config.directory)


def _open_store(config: ServeConfig) -> Store:
    """The store, rebuilt if it was found corrupted, with pending spool ingested and the retention
    limits applied; a store this process may not write is served as it is."""
    from mcpdebug.ingest.recovery import rebuild
    from mcpdebug.ingest.spool import ingest_spool
    from mcpdebug.store import Store

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


def _open_log(config: ServeConfig, store: Store) -> ServerLog | None:
    """Seed 000's JSON log beside the store; a folder it cannot be written in costs a warning only."""
    from mcpdebug.report import server_log

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
