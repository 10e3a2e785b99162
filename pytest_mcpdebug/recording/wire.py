"""What the sender holds, in the forms it sends and spools.

A written-ahead event waits in the sender as its JSON line, or, a quiet pass, as its short record
(`protocol.quick`): the spool keeps either as it is; the wire carries frames only, so a quiet pass's
`TestFinished` is built when it is sent, a batch at a time in the sender thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import QuickPass, Wire

QUICK_PASS_BYTES: Final = 400
"""About the size of a quiet pass's `TestFinished` (for the socket's room)."""
FRAGMENT_BYTES: Final = 256 * 1024
"""Largest WebSocket frame of a message. websockets copies each frame twice (masking, framing): copies
of a few hundred kilobytes reuse freed heap memory, while each copy of megabytes gets fresh pages
(glibc maps large blocks and unmaps them when freed), which cost the test process ~0.1 s of system
time per 100 MB of output, under its GIL."""

Ready = list[tuple[int, bytes | QuickPass]]
"""Events already in the write-ahead copy: (seq, JSON line) or (seq, a quiet pass's short record)."""


def packed(ready: Ready) -> list[tuple[int, Wire]]:
    """Written-ahead events as they are sent (JSON lines go as they are)."""
    return [(seq, item if type(item) is bytes else protocol.pack(item.event())) for seq, item in ready]  # type: ignore[union-attr]


def spooled(ready: Ready) -> list[bytes]:
    """Written-ahead events as the spool holds them: JSON lines, a quiet pass's as its short record."""
    return [item if type(item) is bytes else protocol.encode_quick(item) for _, item in ready]  # type: ignore[arg-type]


def size(item: bytes | QuickPass) -> int:
    return len(item) if type(item) is bytes else QUICK_PASS_BYTES


def fragments(message: bytes, size: int) -> bytes | Iterator[memoryview]:
    """A message as it is sent: whole, or as a fragmented message of frames of ``size`` bytes."""
    if not size or len(message) <= size:
        return message
    view = memoryview(message)
    return (view[start : start + size] for start in range(0, len(view), size))
