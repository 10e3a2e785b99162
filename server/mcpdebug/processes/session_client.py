"""The client half of a process session, shared by `mcpdebug run` and `mcpdebug forward`.

A process session is a recorded run of kind ``process``, sent through the same `Sender` as a test
process: events go over the ingest WebSocket, or to a spool file while no server is reachable; the
sender reconnects with exponential backoff (1 s to 30 s, seed 004) and the server stores each event
once, so a line is neither lost nor doubled whatever happens to the server.

The session's lines are numbered here, in one sequence for the combined output and one per stream,
as the plugin numbers a test's output, so `get_output`, `search_output` and `mcpdebug logs` read a
process session as they read a test.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import PARENT_RUN_ENV, PARENT_WORKER_ENV, ensure_dir, read_server_info, spool_dir
from pytest_mcpdebug.recording.connection import split_token
from pytest_mcpdebug.recording.run_id import new_run_id
from pytest_mcpdebug.recording.sender import Sender
from pytest_mcpdebug.recording.spool import spool_file_name

# Timeouts
RECONNECT: Final = (1.0, 30.0)
"""First and longest wait between connection attempts (seed 004's backoff)."""
CONNECT_WAIT: Final = 2.0
BUSY_INTERVAL: Final = 0.01
"""While output streams (a megabyte or more a wake-up: `sender.BUSY_BYTES`), the sender sends it every
0.01 s, else every 0.05 s as a test process's: small batches keep the server working alongside the
command instead of behind it, and leave little to send when the command exits (`mcpdebug run` of
10^6 lines: 0.68 s -> 0.61-0.64 s, the command alone 0.48 s). A service logging steadily below that
rate keeps 0.05 s batches (at 0.01 s its server did a transaction per 0.01 s: twice the CPU)."""
CLOSE_TIMEOUT: Final = 10.0
"""How long the last events may take to be acknowledged before they stay in the spool."""


class SessionClient:
    """Numbers a session's lines and sends its events; thread-safe (readers, supervisor, sender)."""

    def __init__(
        self,
        *,
        mode: str,
        directory: Path,
        command: list[str] | None = None,
        cwd: str = "",
        label: str = "",
        source: str = "",
        capabilities: tuple[str, ...] = (),
        restart: str = "no",
        server_url: str | None = None,
        token: str | None = None,
        run_id: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.mode = mode
        self.dir = directory
        self.run_id = run_id or new_run_id()
        self.process = f"{mode}-{os.getpid()}"
        self.label = ""
        """The label the server assigned; "" until it answers."""
        self.registered = threading.Event()
        self.host = socket.gethostname()
        self._announce: dict[str, Any] = {
            "mode": mode,
            "label": label,
            "command": list(command or []),
            "cwd": cwd,
            "source": source,
            "capabilities": list(capabilities),
            "restart": restart,
            "host": self.host,
            "pid": os.getpid(),
            "parent_run": os.environ.get(PARENT_RUN_ENV, ""),
            "parent_worker": os.environ.get(PARENT_WORKER_ENV, ""),
        }
        self._server_url = server_url
        self._token = token
        self.say = say
        self._lock = threading.Lock()
        self._seq = 0
        self._lines = 0
        self._stream_lines: dict[str, int] = {}
        ensure_dir(directory)
        self.sender = Sender(
            hello=protocol.Hello(
                protocol=protocol.HELLO_VERSION,
                run_id=self.run_id,
                process=self.process,
                worker="main",
                pid=os.getpid(),
            ),
            spool_path=spool_dir(directory) / spool_file_name(self.run_id, self.process),
            discover=self._discover,
            reconnect=RECONNECT,
        )
        self.sender.on_frame = self._on_frame
        # `mcpdebug run` and `forward` keep freed buffers (`mcpdebug.heap`): whole messages cost them
        # no fresh pages, and the server no reassembly
        self.sender.fragment_bytes = 0
        self.sender.busy_interval = BUSY_INTERVAL

    # Life cycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (or find no server, and spool) and announce the session."""
        self.sender.start(CONNECT_WAIT)
        self._emit(protocol.ProcessStarted, worker="main", pid=os.getpid(), host=self.host)
        self._emit(protocol.SessionStarted, **self._announce)
        if not self.sender.connected and self.say is not None:
            if self.sender.first_attempt(0):
                why, then = "no mcpdebug server reachable", "sent when a server starts; it keeps trying"
            else:  # still connecting: a server on a loaded machine may take seconds to answer
                why, then = "the mcpdebug server has not answered yet", "streamed once it does"
            self.say(f"{why}; recording session {self.run_id} to {spool_dir(self.dir)}/ ({then})")

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Say goodbye and deliver everything (what the server does not confirm stays spooled)."""
        with self._lock:
            events = self._seq + 1
        self._emit(protocol.ProcessFinished, events=events)
        self.sender.close(timeout)

    # Events -------------------------------------------------------------------------------------

    def lines(self, stream: str, block: bytes, count: int, ts: float | None = None) -> None:
        """``count`` complete lines (joined by newlines) the session read from ``stream``."""
        if not count:
            return
        with self._lock:
            first = self._lines + 1
            stream_first = self._stream_lines.get(stream, 0) + 1
            self._lines += count
            self._stream_lines[stream] = stream_first + count - 1
            self._seq += 1
            event = protocol.Output(
                run_id=self.run_id,
                process=self.process,
                seq=self._seq,
                ts=time.time() if ts is None else ts,
                nodeid="",
                worker="main",
                phase="",
                stream=stream,
                first=first,
                stream_first=stream_first,
                count=count,
                data=block,
            )
            self.sender.send(event)  # under the lock: events leave in seq order
        self.sender.wait_for_room()

    def status(
        self,
        status: str,
        *,
        pid: int | None = None,
        exit_code: int | None = None,
        message: str = "",
        ended: bool = False,
    ) -> None:
        self._emit(
            protocol.ProcessStatus, status=status, pid=pid, exit_code=exit_code, message=message, ended=ended
        )

    @property
    def lines_sent(self) -> int:
        return self._lines

    def _emit(self, cls: type[Any], **fields: Any) -> None:
        with self._lock:
            self._seq += 1
            self.sender.send(
                cls(run_id=self.run_id, process=self.process, seq=self._seq, ts=time.time(), **fields)
            )

    # Server -------------------------------------------------------------------------------------

    def _discover(self) -> tuple[str, str] | None:
        """--server-url (its token in the URL, $MCPDEBUG_TOKEN, or server.json), else server.json:
        read again at each attempt, so a restarted server (new port, new token) is found."""
        info = read_server_info(self.dir)
        if self._server_url:
            url, token = split_token(self._server_url)
            return url, self._token or token or (info.token if info is not None else "")
        return (info.url, info.token) if info is not None else None

    def _on_frame(self, frame: protocol.ServerFrame) -> None:
        label = frame.label if isinstance(frame, (protocol.Welcome, protocol.Registered)) else ""
        if label and label != self.label:
            self.label = label
            self.registered.set()
            if self.say is not None:
                self.say(f'session "{label}" (run {self.run_id}) streaming to {self.sender.connected_url}')
