"""Setting keys of one section of an INI-style file (pytest.ini, tox.ini, setup.cfg) in place.

Only the lines of the keys set change: every other line, comment, blank line and line ending stays
as the user wrote it. A new key goes after the section's last key (not after the comments that lead
into the next section), written with the separator the section already uses (``=`` or ``:``).
The reading follows pytest's own INI reader (iniconfig): a section starts at a line beginning with
``[``, a key at column 0, an indented line continues the value above it (across blank and comment
lines: aiohttp's ``addopts`` comments each of its options), ``#`` and ``;`` start a comment line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Section:
    header: int
    """Index of the ``[name]`` line."""
    end: int
    """Index of the line after the section (the next header, or the end)."""
    keys: dict[str, tuple[int, int]]
    """Each key's first line and the line after its continuation lines."""
    values: dict[str, str]


def newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def find_section(lines: list[str], name: str) -> Section | None:
    header_re = re.compile(r"^\[\s*" + re.escape(name) + r"\s*\]\s*([#;].*)?$")
    start = next((i for i, line in enumerate(lines) if header_re.match(line.rstrip("\r\n"))), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    keys: dict[str, tuple[int, int]] = {}
    values: dict[str, str] = {}
    i = start + 1
    while i < end:
        line = lines[i].rstrip("\r\n")
        if not line.strip() or line.lstrip()[0] in "#;" or line[0] in " \t":
            i += 1
            continue
        key, value = _split(line)
        parts = [value]
        after = j = i + 1
        while j < end:  # as iniconfig reads: blank and comment lines do not end a value
            stripped = lines[j].strip()
            if stripped and stripped[0] not in "#;":
                if lines[j][:1] not in (" ", "\t"):
                    break
                parts.append(stripped)
                after = j + 1
            j += 1
        keys[key] = (i, after)
        values[key] = "\n".join(p for p in parts if p)
        i = after
    return Section(start, end, keys, values)


def read(text: str, name: str) -> dict[str, str] | None:
    """The section's keys and values, or None without that section."""
    found = find_section(text.splitlines(keepends=True), name)
    return None if found is None else found.values


def set_keys(text: str, name: str, values: dict[str, str], comment: str | None = None) -> str:
    """``text`` with ``values`` set in section ``name`` (added at the end when missing); ``comment``
    (without ``#``) goes above the keys added."""
    nl = newline_of(text)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    section = find_section(lines, name)
    if section is None:
        if lines and lines[-1].strip():
            lines.append(nl)
        lines.append(f"[{name}]{nl}")
        section = Section(len(lines) - 1, len(lines), {}, {})
    separator = _separator(lines, section)
    replaced: dict[int, tuple[int, str]] = {}
    added: list[str] = []
    for key, value in values.items():
        line = f"{key}{separator}{value}{nl}"
        if key in section.keys:
            first, after = section.keys[key]
            replaced[first] = (after, line)
        else:
            added.append(line)
    if added and comment:
        added.insert(0, f"# {comment}{nl}")
    last = max((after for _, after in section.keys.values()), default=section.header + 1)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i == last:
            out += added
        if i in replaced:
            after, line = replaced[i]
            out.append(line)
            i = after
            continue
        out.append(lines[i])
        i += 1
    if last >= len(lines):
        out += added
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    match = re.match(r"^([^=:]+?)\s*[=:]\s*(.*)$", line)
    if match is None:
        return line.strip(), ""
    return match[1].strip(), match[2].strip()


def _separator(lines: list[str], section: Section) -> str:
    """The separator of the first key whose value starts on its own line (``addopts =`` followed by
    indented lines says nothing about the spaces after it)."""
    for first, _ in section.keys.values():
        match = re.match(r"^[^=:]+?([ \t]*[=:][ \t]*)\S", lines[first])
        if match:
            return match[1]
    return " = "
