"""What the sender holds, in the forms it sends and spools.

A written-ahead event waits in the sender as the line the write-ahead copy holds: its JSON line, or, a
quiet pass, its short record (`protocol.quick`). The spool keeps either as it is, and so does the wire
to a server that reads short records (protocol 3); to an older one a quiet pass goes as its packed
`TestFinished`, built when it is sent. Lines are bytes, which the collector never walks (a pair of
an int and bytes it stops tracking at its first look): a second of quick tests' events waiting for
the spool is nearly nothing to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol.plain import Encoded

if TYPE_CHECKING:
    from pytest_mcpdebug.protocol import Event, Wire

FRAGMENT_BYTES: Final = 256 * 1024
"""Largest WebSocket frame of a message. websockets copies each frame twice (masking, framing): copies
of a few hundred kilobytes reuse freed heap memory, while each copy of megabytes gets fresh pages
(glibc maps large blocks and unmaps them when freed), which cost the test process ~0.1 s of system
time per 100 MB of output, under its GIL."""

Ready = list[tuple[int, bytes]]
"""Events already in the write-ahead copy: (seq, its line there), a JSON line or a short record."""


def packed(ready: Ready, *, short_records: bool) -> list[tuple[int, Wire]]:
    """Written-ahead events as they are sent: as they are to a server that reads short records
    (``short_records``), else each quiet pass as its packed `TestFinished`."""
    if short_records:
        return list(ready)
    return [(seq, _packed_quick(line) if line[:1] == b"[" else line) for seq, line in ready]


def _packed_quick(line: bytes) -> Wire:
    return protocol.pack(protocol.quick_event(line))


def spooled(ready: Ready) -> list[bytes]:
    """Written-ahead events as the spool holds them: the lines of the write-ahead copy."""
    return [line for _, line in ready]


def batches(items: list[Wire], sizes: list[int], limit: int) -> Iterator[list[Wire]]:
    """``items`` (of ``sizes``, each counted with a newline) cut into batches that end at the first
    item taking one to ``limit`` bytes or more: usually all of them, in one."""
    if sum(sizes) + len(sizes) < limit:
        if items:
            yield items
        return
    batch: list[Wire] = []
    size = 0
    for item, item_size in zip(items, sizes, strict=True):
        batch.append(item)
        size += item_size + 1
        if size >= limit:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def runs(items: list[Wire]) -> Iterator[tuple[bool, list[Wire]]]:
    """Consecutive items in one form, each run a message: (JSON lines or not, the items). Usually one
    run, all of them."""
    forms = protocol.json_forms(items)
    if not forms or forms.count(forms[0]) == len(forms):
        if items:
            yield forms[0], items
        return
    start = 0
    for end in range(1, len(items) + 1):
        if end == len(items) or forms[end] != forms[start]:
            yield forms[start], items[start:end]
            start = end


def fragments(message: bytes, size: int) -> bytes | Iterator[memoryview]:
    """A message as it is sent: whole, or as a fragmented message of frames of ``size`` bytes."""
    if not size or len(message) <= size:
        return message
    view = memoryview(message)
    return (view[start : start + size] for start in range(0, len(view), size))


def json_of(event: Event | Encoded) -> bytes:
    """An event's JSON line (a quiet pass's short record as it is)."""
    return event.line if type(event) is Encoded else protocol.encode(event)  # type: ignore[arg-type]
