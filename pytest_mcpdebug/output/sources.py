"""Where a test's output can be read while it runs: pytest's capture files and buffers.

pytest's fd capture writes to temporary files that we read at an offset with ``pread`` (pytest's
file position stays where it was); its sys capture writes to in-memory buffers.
"""

from __future__ import annotations

import os
from typing import Any, Protocol


class Source(Protocol):
    def size(self) -> int: ...
    def read(self, offset: int, size: int) -> bytes: ...


class FileSource:
    """pytest's fd capture: a temporary file we read at an offset, leaving its position alone."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)


class BufferSource:
    """pytest's sys capture (``--capture=sys`` / ``tee-sys``): an in-memory text buffer."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer

    def size(self) -> int:
        return int(self.buffer.tell())  # writes append at the position; pytest rewinds when it empties

    def read(self, offset: int, size: int) -> bytes:
        # A view copies just the slice (getvalue() would copy the whole buffer on every read). It is
        # released before returning, and the copy holds the GIL, so no write can try to resize the
        # buffer while it is exported.
        with self.buffer.getbuffer() as view:
            return bytes(view[offset : offset + size])


def source(capture: Any) -> Source | None:
    """The readable side of one of pytest's global captures (None when not capturing)."""
    tmpfile = getattr(capture, "tmpfile", None)
    if tmpfile is None:
        return None
    if type(capture).__name__ in ("FDCapture", "FDCaptureBinary"):
        try:
            return FileSource(tmpfile.fileno())
        except (OSError, ValueError):
            return None
    buffer = getattr(tmpfile, "buffer", None)
    if buffer is not None and hasattr(buffer, "getvalue"):
        return BufferSource(buffer)
    return None
