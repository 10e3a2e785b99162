"""Seed 000's log file: one JSON object a line in ``.mcpdebug/logs/debug-mcp-server.log``.

Standard `logging` all the way: the entries (`mcpdebug.report.entries`) are records of the
``debug-mcp.*`` loggers carrying their fields; a `QueueHandler` puts each record on a queue, so the
event loop pays for creating a record and nothing else; a `QueueListener` thread cleans the values
(`log_values`), turns the record into JSON with python-json-logger's formatter (on msgspec) and
writes it to a `RotatingFileHandler` (size-based, a bounded number of old files). A slow or full disk
delays that thread only; a queue that fills up drops entries and counts them rather than blocking.

The server's own messages (``mcpdebug.*`` loggers: start-up, ingest, warnings) go to the same file as
``server:log`` entries, so a CI artifact holds them too.

The seed writes ``timestamp`` twice (an ISO string to display, epoch milliseconds to sort), which a
JSON object cannot hold: here ``timestamp`` is the milliseconds (what the seed's TUI sorts on, and
what JSON parsers keep of a duplicated key) and ``time`` the ISO string.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from pythonjsonlogger.msgspec import MsgspecFormatter

from mcpdebug.report.log_settings import LogSettings
from mcpdebug.report.log_values import Cleaner

LOG_DIR: Final = "logs"
LOG_FILE: Final = "debug-mcp-server.log"
ROOT_LOGGER: Final = "debug-mcp"
"""Parent of the entries' loggers; a logger's name, dots made colons, is the entry's namespace."""
SERVER_LOGGER: Final = "mcpdebug"
"""The server's own loggers, written as ``server:log`` entries."""
# Limits
QUEUE_SIZE: Final = 20_000
"""Entries waiting for the writer thread; beyond that they are dropped and counted."""
SERVER_TEXT_CHARS: Final = 4_000
"""A server message keeps more than 200 characters: its traceback is what one reads it for."""

LEVELS: Final = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "error",
}
LEVEL_NAMES: Final = ("debug", "info", "warning", "error")


def log_path(directory: Path) -> Path:
    return directory / LOG_DIR / LOG_FILE


class EntryFormatter(MsgspecFormatter):
    """Seed 000's fields, common ones first, from a record of `entries` (or a server message)."""

    def __init__(self, cleaner: Cleaner) -> None:
        super().__init__()
        self.cleaner = cleaner

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = (
            datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds")[:-6]
            + "Z"
        )
        log_data["level"] = LEVELS.get(record.levelno, record.levelname.lower())
        fields: dict[str, Any] | None = getattr(record, "entry", None)
        if fields is None:  # one of the server's own messages
            log_data["namespace"] = record.name
            log_data["message"] = "server:log"
            log_data["text"] = self.cleaner.text(record.getMessage(), SERVER_TEXT_CHARS)
        else:
            log_data["namespace"] = record.name.replace(".", ":")
            log_data["message"] = record.msg
            name = fields.get("sessionName")
            log_data["sessionId"] = fields.get("sessionId")
            log_data["sessionName"] = self.cleaner.text(name) if isinstance(name, str) else None
            for key, value in fields.items():
                if key not in ("sessionId", "sessionName"):
                    log_data[key] = self.cleaner.value(value, key)
        log_data["timestamp"] = int(record.created * 1000)


class _RotatingFile(logging.handlers.RotatingFileHandler):
    """Formats each record once: the standard handler formats it again to decide on rotation."""

    def format(self, record: logging.LogRecord) -> str:
        text: str | None = record.__dict__.get("_json")
        if text is None:
            text = record.__dict__["_json"] = super().format(record)
        return text


class _Queue(logging.handlers.QueueHandler):
    """Never waits: a full queue (a disk that cannot keep up) drops the entry and counts it."""

    def __init__(self, bounded: queue.Queue[Any]) -> None:
        super().__init__(bounded)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


@dataclass
class ServerLog:
    """The open log: ``close()`` writes what is queued and detaches it."""

    path: Path
    handler: _Queue
    listener: logging.handlers.QueueListener
    file: _RotatingFile
    loggers: list[logging.Logger] = field(default_factory=list)
    _closed: threading.Event = field(default_factory=threading.Event)

    @property
    def dropped(self) -> int:
        return self.handler.dropped

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for logger in self.loggers:
            logger.removeHandler(self.handler)
        logging.getLogger(ROOT_LOGGER).setLevel(logging.CRITICAL + 10)
        self.listener.stop()  # writes everything queued before it
        self.file.close()
        if self.handler.dropped:
            print(
                f"mcpdebug serve: {self.handler.dropped} log entries were dropped: {self.path}'s disk "
                "could not keep up",
                file=sys.stderr,
            )


def open_log(directory: Path, settings: LogSettings, *, project: Path | None = None) -> ServerLog:
    """Start writing the log of the store in ``directory``; raises OSError if its folder cannot be made.

    ``project`` is the folder paths are shown relative to (default: the store folder's parent).
    """
    path = settings.path or log_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    file = _RotatingFile(
        path,
        maxBytes=max(settings.max_bytes, 1024),
        backupCount=max(settings.backups, 1),
        encoding="utf-8",
        delay=True,
    )
    file.setFormatter(EntryFormatter(Cleaner(project or directory.parent)))
    bounded: queue.Queue[Any] = queue.Queue(QUEUE_SIZE)
    handler = _Queue(bounded)
    listener = logging.handlers.QueueListener(bounded, file)
    entries = logging.getLogger(ROOT_LOGGER)
    entries.propagate = False  # entries belong to the file, not to stderr
    entries.setLevel(logging.getLevelName(settings.level.upper()))
    server = logging.getLogger(SERVER_LOGGER)
    for logger in (entries, server):
        logger.addHandler(handler)
    listener.start()
    return ServerLog(path=path, handler=handler, listener=listener, file=file, loggers=[entries, server])
