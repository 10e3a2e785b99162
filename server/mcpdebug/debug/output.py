"""A debugged script's output, stored as a run of kind ``debug`` (seed 000's ``debug:output``).

The script's stdout and stderr (read from its pipes) and what debugpy sends as DAP output (logpoint
messages, stream ``log``) become the same events a test process sends, numbered here as the plugin
numbers them (`protocol.Output`), and go through `Store.apply` like any other run's: get_output,
search_output and `mcpdebug logs` read them with the run id, which is the debug session's id.
Events are applied in small batches off the event loop, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from typing import Any, Final

from mcpdebug.report import entries
from mcpdebug.store import Store
from pytest_mcpdebug import __version__, protocol
from pytest_mcpdebug.output.lines import LineSplitter

FLUSH_DELAY: Final = 0.05
"""Seconds lines wait to be stored together: a chatty script costs few transactions."""
TAIL_LINES: Final = 40
"""Last lines kept in memory, for a reply about a script that ended."""


class OutputRecorder:
    def __init__(
        self, store: Store, run_id: str, *, label: str, args: list[str], cwd: str, python: str, pid: int
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.process = f"debug-{pid}"
        self.started = time.time()
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._seq = 0
        self._numbers: dict[str, int] = {}
        self._splitters: dict[str, LineSplitter] = {}
        self._pending: list[protocol.Event] = []
        self._flushing: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._event(
            protocol.RunStarted,
            args=args,
            rootdir=cwd,
            cwd=cwd,
            python=python,
            pytest_version="",
            plugin_version=__version__,
            host=socket.gethostname(),
            pid=pid,
            label=label,
            kind="debug",
        )
        self._event(protocol.ProcessStarted, worker="main", pid=pid, host=socket.gethostname())
        self._schedule()

    async def read(self, stream: str, pipe: asyncio.StreamReader | None) -> None:
        """Store what ``pipe`` delivers as ``stream`` lines, until it closes."""
        if pipe is None:
            return
        while True:
            chunk = await pipe.read(65536)
            if not chunk:
                break
            self.write(stream, chunk)
        self.write(stream, b"", final=True)

    def write(self, stream: str, data: bytes, *, final: bool = False) -> None:
        splitter = self._splitters.setdefault(stream, LineSplitter(self.store.limits.max_line_length))
        block, count = splitter.flush() if final else splitter.feed(data)
        if count:
            self._lines(stream, block.decode("utf-8", "replace"), count)

    def log(self, text: str) -> None:
        """debugpy's own output (logpoints): whole messages, each ending with a newline."""
        lines = text.rstrip("\r\n").replace("\r\n", "\n").split("\n")
        self._lines("log", "\n".join(lines), len(lines))

    async def finish(self, exit_code: int | None) -> None:
        for stream in list(self._splitters):
            self.write(stream, b"", final=True)
        status = exit_code if exit_code is not None else -1
        self._event(protocol.RunFinished, exit_status=status, duration=time.time() - self.started)
        self._event(protocol.ProcessFinished, events=self._seq + 1)
        await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            events, self._pending = self._pending, []
            if events:
                with contextlib.suppress(Exception):  # a full disk must not take the session down
                    await asyncio.to_thread(self.store.apply, events)

    # Internals --------------------------------------------------------------------------------------

    def _lines(self, stream: str, text: str, count: int) -> None:
        first, stream_first = self._numbers.get("", 0) + 1, self._numbers.get(stream, 0) + 1
        self._numbers[""] = first + count - 1
        self._numbers[stream] = stream_first + count - 1
        self.tail.extend(text.split("\n")[-TAIL_LINES:])
        entries.debug_output(self.run_id, stream, text)
        self._event(
            protocol.Output,
            nodeid="",
            worker="main",
            phase="",
            stream=stream,
            first=first,
            stream_first=stream_first,
            count=count,
            text=text,
        )
        self._schedule()

    def _event(self, cls: Any, **fields: Any) -> None:
        self._seq += 1
        event = cls(run_id=self.run_id, process=self.process, seq=self._seq, ts=time.time(), **fields)
        self._pending.append(event)

    def _schedule(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._delayed_flush())

    async def _delayed_flush(self) -> None:
        while True:  # what arrived while a batch was being stored goes in the next one
            await asyncio.sleep(FLUSH_DELAY)
            await self.flush()
            if not self._pending:
                return
