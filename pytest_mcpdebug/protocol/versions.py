"""The protocol's versions and its largest message, apart from the frames: a test process says its
version in its hello and sizes its batches before it has built a frame, and a run that only spools
never loads `frames` (see `plain`)."""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 3
"""3: a message of JSON lines may hold quiet passes' short records (`quick`), which a client sends to a
server that welcomes it with 3 or more; 2: a binary message may be a msgpack array of events, whose
`Output` lines travel as raw bytes (``data``); 1: every message is JSON lines. The server takes all
three (`ACCEPTED_VERSIONS`); a client's hello says `HELLO_VERSION`, so a server of 2 takes it too."""
ACCEPTED_VERSIONS: Final = (1, 2, 3)
SHORT_RECORDS_VERSION: Final = 3
HELLO_VERSION: Final = 2
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""Largest WebSocket message the server accepts. Clients batch below a quarter of it."""
