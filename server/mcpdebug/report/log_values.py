"""Values as seed 000's log shows them: bounded, without secrets, environment or absolute paths.

Applied by the log's formatter, in the log's writer thread, so a tool call pays nothing for it on
the event loop. The rules are the seed's: strings cut at 200 characters with ``... (truncated)``,
arrays of more than 5 items shown as ``[a, b, c, d, e... +N more]``, objects cut to their first keys;
values under a name that looks secret (`pytest_mcpdebug.values.is_secret`) become ``<redacted>``, and
secrets written inside a string (``token=abc``) are redacted too; environment variables are left out;
the project's folder is taken off every path, and an interpreter outside it is named, not located.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug.values import REDACTED, SECRET_IN_REPR, is_secret

# Limits
STRING_CHARS: Final = 200
ITEMS: Final = 5
"""Items of an array shown before ``... +N more`` (the seed's rule)."""
KEYS: Final = 20
"""Keys of an object kept; the rest are counted under ``"..."``."""
DEPTH: Final = 4
"""Levels of nesting kept; deeper values are shown as one short string."""
VARIABLES: Final = 20
"""Variables of one ``debug:variables`` entry (``variableCount`` tells how many there were)."""

TRUNCATED: Final = "... (truncated)"
ENVIRONMENT_KEYS: Final = frozenset({"env", "environ", "environment", "extra_env"})
OWN_IDS: Final = frozenset({"session_id", "sessionId", "breakpoint_id", "breakpointId"})
"""Names of this server's own ids: they match the secret pattern (``session_id``) but are not secrets."""
INTERPRETER_KEYS: Final = frozenset({"pythonPath", "python", "executable", "executable_path"})


class Rows(list[Any]):
    """A list logged as objects (up to `VARIABLES`), not cut to 5 items: a debug:variables entry's."""


class Cleaner:
    """Cleans values for one project folder (``root``): paths in it are shown relative to it."""

    def __init__(self, root: Path | None) -> None:
        self.root = str(root.resolve()) + os.sep if root is not None else ""
        home = os.path.expanduser("~")
        self.home = home + os.sep if home not in ("", "/", "~") else ""

    def value(self, value: Any, name: str = "", depth: int = 0) -> Any:
        """A value of the log, cleaned; ``name`` is the key it is logged under."""
        if name and name not in OWN_IDS and is_secret(name) and value not in (None, "", [], {}):
            return REDACTED
        if isinstance(value, str):
            if name in INTERPRETER_KEYS:
                return self.interpreter(value)
            return self.text(value)
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if depth >= DEPTH:
            return self.text(_short_repr(value))
        if isinstance(value, dict):
            return self.mapping(value, depth)
        if isinstance(value, Rows):
            return [self.value(v, "", depth + 1) for v in value[:VARIABLES]]
        if isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)
            if len(items) > ITEMS:
                shown = ", ".join(_item_text(self.value(v, "", depth + 1)) for v in items[:ITEMS])
                return f"[{shown}... +{len(items) - ITEMS} more]"
            return [self.value(v, "", depth + 1) for v in items]
        return self.text(_short_repr(value))

    def mapping(self, value: dict[Any, Any], depth: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if name.lower() in ENVIRONMENT_KEYS:
                continue  # never the environment: it is where secrets live
            if len(out) == KEYS:
                out["..."] = f"+{len(value) - KEYS} more keys"
                break
            out[name] = self.value(item, name, depth + 1)
        return out

    def text(self, text: str, limit: int = STRING_CHARS) -> str:
        """A string: secrets inside it redacted, project paths made relative, cut at ``limit``."""
        bound = 2 * limit + len(self.root)
        cut = len(text) > bound
        if cut:  # a 30,000-character reply: work on what is kept
            text = text[:bound]
        if self.root and self.root in text:
            text = text.replace(self.root, "")
        if self.home and self.home in text:
            text = text.replace(self.home, "~" + os.sep)
        if ("=" in text or ":" in text) and _may_name_a_secret(text):  # sub is slow: look first
            text = SECRET_IN_REPR.sub(_redact, text)
        return text if len(text) <= limit and not cut else text[:limit] + TRUNCATED

    def interpreter(self, path: str) -> str:
        """The seed removes ``pythonPath``'s absolute path: relative inside the project, else its name."""
        if self.root and path.startswith(self.root):
            return path[len(self.root) :]
        return os.path.basename(path) or path


_SECRET_WORDS: Final = (
    "pass",
    "secret",
    "token",
    "api",
    "auth",
    "credential",
    "private",
    "cookie",
    "session",
)
"""A word of every alternative of `pytest_mcpdebug.values`'s secret pattern: substring tests are ~50x
cheaper than the pattern on a 400-character reply."""


def _may_name_a_secret(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _SECRET_WORDS) and is_secret(text)


def _redact(match: re.Match[str]) -> str:
    name = match["key"].strip(" \t'\"=:")
    return match[0] if name in OWN_IDS else match["key"] + REDACTED


def _short_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a value's broken __repr__ must not lose the entry
        return f"<{type(value).__name__}; repr() failed: {type(exc).__name__}>"


def _item_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        import json

        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
