"""What `mcpdebug run` and `mcpdebug forward` tell the user on stderr (kept apart from the session, so a
runner can say why its command did not start before it has imported the protocol)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def stderr_say(prefix: str) -> Callable[[str], None]:
    def say(message: str) -> None:
        try:
            sys.stderr.write(f"{prefix}: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    return say
