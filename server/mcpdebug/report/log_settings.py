"""`mcpdebug serve`'s ``--log-*`` options, apart from the log's writer (`server_log`), which
imports a JSON formatter that a start-up over stdio need not wait for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_MAX_BYTES: Final = 10 * 1024 * 1024
DEFAULT_BACKUPS: Final = 5


@dataclass(frozen=True)
class LogSettings:
    """`mcpdebug serve`'s ``--log-*`` options."""

    level: str = "info"
    path: Path | None = None
    """Default: ``<store folder>/logs/debug-mcp-server.log``; see `enabled`."""
    enabled: bool = True
    """``--log-file none``: no log file (the entries cost one level check each)."""
    max_bytes: int = DEFAULT_MAX_BYTES
    backups: int = DEFAULT_BACKUPS
