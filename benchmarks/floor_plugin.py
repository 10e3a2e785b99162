"""A floor for the recording's per-test cost: the least a recording can do a test, in one object.

Not the recording: a `-p` plugin for `in_loop.py --modes floor` (issue 16). It does what every test
of a spooling run must pay for, and nothing else: it stands in front of pytest's two capture calls
(the test's start, its phase; what pytest read), notes each quiet phase's report, writes the running
test's name into a mapped header at its start and clears it at its end, and copies a msgspec-encoded
record of each test into a mapped file, with one idle thread beside (``FLOOR_NO_THREAD=1``: none).
The recording's own per-test path is measured against it.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading
import time
from typing import Any

import msgspec
import pytest


class Record(msgspec.Struct, array_like=True, gc=False):
    run_id: str
    process: str
    seq: int
    ts: float
    nodeid: str
    worker: str
    file: str
    line: int | None
    attempt: int
    passed: list[tuple[str, float, float]]


_encode = msgspec.json.Encoder().encode


class Floor:
    def __init__(self, config: pytest.Config) -> None:
        self.folder = tempfile.mkdtemp(prefix="mcpdebug-floor-")
        header = os.open(os.path.join(self.folder, "header"), os.O_CREAT | os.O_RDWR)
        os.ftruncate(header, mmap.PAGESIZE)
        self.header = mmap.mmap(header, mmap.PAGESIZE)
        records = os.open(os.path.join(self.folder, "records"), os.O_CREAT | os.O_RDWR)
        os.posix_fallocate(records, 0, 1 << 22)
        self.records = mmap.mmap(records, 1 << 22)
        self.end = self.seq = self.name_len = 0
        self.lock, self.records_lock = threading.RLock(), threading.Lock()
        self.passed: list[tuple[str, float, float]] = []
        self.running: tuple[str, Any, float] | None = None
        self.phase = ""
        self.capman = config.pluginmanager.getplugin("capturemanager")
        self.item_capture, self.read = self.capman.item_capture, self.capman.read_global_capture
        self.capman.item_capture, self.capman.read_global_capture = self._item_capture, self._read
        self.stop = threading.Event()
        if not os.environ.get("FLOOR_NO_THREAD"):
            threading.Thread(target=self._wake, daemon=True).start()

    def _wake(self) -> None:
        while not self.stop.wait(0.1):
            _ = self.running

    def _item_capture(self, when: str, item: pytest.Item) -> Any:
        if when == "setup":
            nodeid = item.nodeid
            self.running = (nodeid, item.location, time.time())
            line = f"running {nodeid}\n".encode()
            size = max(len(line), self.name_len)
            self.header[64 : 64 + size] = line.ljust(size)
            self.name_len = len(line)
        with self.lock:
            self.phase = when
        return self.item_capture(when, item)

    def _read(self) -> Any:
        with self.lock:
            return self.read()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "passed":
            self.passed.append((report.when or "call", report.duration, report.stop))
        if report.when != "teardown" or self.running is None:
            return
        nodeid, location, _ = self.running
        with self.records_lock:
            self.seq += 1
            file, line, _ = location
            record = Record("run", "main", self.seq, time.time(), nodeid, "main", file, line, 1, self.passed)
            data = _encode(record) + b"\n"
            if self.end + len(data) <= len(self.records):
                self.records[self.end : self.end + len(data)] = data
                self.end += len(data)
        self.passed, self.running = [], None
        self.header[64] = 10

    def pytest_unconfigure(self) -> None:
        self.stop.set()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Floor(config), "mcpdebug-floor")
