"""Values as seed 000's log shows them: bounded, without secrets, environment or absolute paths.

Applied by the log's formatter, in the log's writer thread, so a tool call pays nothing for it on
the event loop. The rules are the seed's: strings cut at 200 characters with ``... (truncated)``,
arrays of more than 5 items shown as ``[a, b, c, d, e... +N more]``, objects cut to their first keys;
secrets redacted by the rule set every value shown goes through (`pytest_mcpdebug.redaction`): a
value under a secret's name becomes ``<redacted>`` (``passed`` or ``author`` are no such names), and
credentials inside a string (``token=abc``, a URL's password, a GitHub token) are replaced alone;
environment variables are left out; the project's folder is taken off every path, and an
interpreter outside it is named, not located.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug.redaction import REDACTED, hidden, is_secret_name, redact, reveals_nothing

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
        if name and is_secret_name(name) and not reveals_nothing(value):
            return hidden(value) if isinstance(value, str) else REDACTED
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
        text = redact(text)
        return text if len(text) <= limit and not cut else text[:limit] + TRUNCATED

    def interpreter(self, path: str) -> str:
        """The seed removes ``pythonPath``'s absolute path: relative inside the project, else its name."""
        if self.root and path.startswith(self.root):
            return path[len(self.root) :]
        return os.path.basename(path) or path


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
