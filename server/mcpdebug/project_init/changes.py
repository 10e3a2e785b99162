"""A planned change of one file: shown as a unified diff, then written in one step.

A file is replaced atomically (a temporary file beside it, then a rename) and keeps its mode, so an
interrupted init never leaves half a config behind.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

_COLORS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
_RESET = "\033[0m"


def read_text(path: Path) -> str:
    """A file's text with its line endings as they are (CRLF stays), so a rewrite keeps them."""
    with open(path, encoding="utf-8", newline="") as source:
        return source.read()


def read_if_any(path: Path) -> str | None:
    return read_text(path) if path.is_file() else None


@dataclass
class Change:
    path: Path
    before: str | None
    """The file's text now; None when it does not exist."""
    after: str
    why: str
    """What the change does, in a few words."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def shown_path(self, base: Path) -> str:
        try:
            return str(self.path.relative_to(base))
        except ValueError:
            return str(self.path)

    def diff(self, base: Path, *, color: bool = False) -> str:
        name = self.shown_path(base)
        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        lines = list(
            difflib.unified_diff(
                old,
                new,
                fromfile="/dev/null" if self.before is None else f"a/{name}",
                tofile=f"b/{name}",
                n=2,
            )
        )
        out = []
        for line in lines:
            text = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            if color and line[:1] in _COLORS and not line.startswith(("---", "+++")):
                text = f"{_COLORS[line[0]]}{text.rstrip(chr(10))}{_RESET}\n"
            out.append(text)
        return "".join(out)

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = self.path.stat().st_mode & 0o7777 if self.path.exists() else None
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                out.write(self.after)
            if mode is not None:
                os.chmod(tmp, mode)
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
