"""What the machine gave a run (`pytest_mcpdebug.recording.machine`), in words.

`get_environment` and ``mcpdebug show RUN --env`` open with a short "Machine:" block (CPUs usable and
the cgroup's limits, the encodings Python chose, the user and umask, the platform); a run's shards that
differ each say theirs. A failure's environment section, for a run recorded in CI or on another host,
lists the facts that differ from the reader's process (`differing`), as it lists process-wide variables.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any, Final

LIMITS: Final = ("cpu_quota", "memory_limit")
"""Facts recorded only when there is a limit: a machine that says nothing of them had none."""
COMPARED: Final = (
    ("cpus", "CPUs"),
    ("cpus_usable", "CPUs usable"),
    ("cpu_quota", "cgroup CPU quota"),
    ("memory_limit", "memory limit"),
    ("utf8_mode", "UTF-8 mode"),
    ("preferred_encoding", "preferred encoding"),
    ("locale_encoding", "locale encoding"),
    ("filesystem_encoding", "filesystem encoding"),
    ("stdout_encoding", "stdout encoding"),
    ("uid", "uid"),
    ("umask", "umask"),
    ("platform", "platform"),
    ("arch", "arch"),
)
"""The facts a failure compares with the reader's process, and their names in words."""
_WORDS: Final = frozenset({"preferred_encoding", "locale_encoding", "filesystem_encoding", "stdout_encoding"})
"""Facts shown quoted (``'ANSI_X3.4-1968'``), as variables' values are; numbers and on/off are not."""


def block(shards: list[dict[str, Any]]) -> list[str]:
    """``Machine:`` and its lines; a line that differs between shards once for each (``[label] ...``);
    [] when no shard recorded its machine (a plugin from before machines were kept)."""
    recorded = [(s["label"], s.get("machine") or {}) for s in shards]
    described = [(label, describe(facts)) for label, facts in recorded if facts]
    if not described:
        return []
    every = [line for line in described[0][1] if all(line in lines for _, lines in described)]
    out = ["Machine:"] + [f"  {line}" for line in every]
    if len(described) > 1:
        for label, lines in described:
            out += [f"  [{label or 'no label'}] {line}" for line in lines if line not in every]
    return out


def limits(facts: Mapping[str, str]) -> str:
    """The CPUs a limited machine gave the run (fewer usable than it has, a cgroup quota), for the run's
    summary: ``1 CPU usable of 2 (affinity)``; "" when nothing limited them."""
    cpus, usable, quota = facts.get("cpus"), facts.get("cpus_usable"), facts.get("cpu_quota")
    parts = []
    if usable and cpus and usable != cpus:
        parts.append(f"{usable} CPU{'' if usable == '1' else 's'} usable of {cpus} (affinity)")
    if quota:
        parts.append(f"cgroup CPU quota {quota}")
    return "; ".join(parts)


def describe(facts: Mapping[str, str]) -> list[str]:
    """A machine's facts in four short lines: CPUs and limits, encodings, user, platform."""
    out: list[str] = []
    cpus, usable = facts.get("cpus"), facts.get("cpus_usable")
    parts = []
    if usable and cpus and usable != cpus:
        parts.append(f"{usable} usable of {cpus} (affinity)")
    elif usable or cpus:
        parts.append(str(usable or cpus))
    if facts.get("cpu_quota"):
        parts.append(f"cgroup quota {facts['cpu_quota']}")
    if facts.get("memory_limit"):
        parts.append(f"memory limit {_size(facts['memory_limit'])}")
    if parts:
        out.append("CPUs: " + "; ".join(parts))
    preferred = facts.get("preferred_encoding")
    encodings = [f"preferred {preferred}"] if preferred else []
    if facts.get("utf8_mode"):
        encodings.append(f"UTF-8 mode {facts['utf8_mode']}")
    for key, word in (("locale_encoding", "locale"), ("filesystem_encoding", "filesystem")):
        if facts.get(key) and _codec(facts[key]) != _codec(preferred or ""):
            encodings.append(f"{word} {facts[key]}")
    if facts.get("stdout_encoding"):
        encodings.append(f"stdout {facts['stdout_encoding']}")
    if encodings:
        out.append("encodings: " + ", ".join(encodings))
    user = _user(facts)
    if user:
        out.append(user)
    where = " ".join(facts[k] for k in ("platform", "arch") if facts.get(k))
    if where:
        out.append(where)
    return out


def differing(recorded: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    """The facts the run's machine had otherwise than ``here`` (the reader's process), in words:
    ``CPUs usable: 1 (here: 2)``; a fact either side did not read is left out (a limit is "none")."""
    if not recorded:
        return []
    out = []
    for key, words in COMPARED:
        theirs, ours = recorded.get(key), here.get(key)
        if key in LIMITS:
            theirs, ours = theirs or "none", ours or "none"
        if theirs is None or ours is None or theirs == ours:
            continue
        if key in _WORDS and _codec(theirs) == _codec(ours):
            continue  # utf-8 and UTF-8: one codec
        out.append(f"{words}: {_shown(key, theirs)} (here: {_shown(key, ours)})")
    return out


def _user(facts: Mapping[str, str]) -> str:
    name, uid, umask = facts.get("user"), facts.get("uid"), facts.get("umask")
    who = f"{name} (uid {uid})" if name and uid else name or (f"uid {uid}" if uid else "")
    if umask:
        return f"user: {who}, umask {umask}" if who else f"umask {umask}"
    return f"user: {who}" if who else ""


def _shown(key: str, value: str) -> str:
    if key == "memory_limit" and value != "none":
        return _size(value)
    return repr(value) if key in _WORDS else value


def _size(value: str) -> str:
    """Bytes in binary units: ``2 GiB``, ``512 MiB``."""
    try:
        size = float(value)
    except ValueError:
        return value
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.3g} TiB"


def _codec(name: str) -> str:
    """An encoding's codec (``UTF-8`` and ``utf-8`` are one, ``ANSI_X3.4-1968`` is ``ascii``), to tell
    which differ."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name.lower()
