"""What the machine gave a run: CPUs it could use, its limits, its encodings, its user, umask, platform.

The CI conditions that most often make a run hang or fail only in CI are not variables: a runner
with one usable CPU (a pool sized by ``cpu_count()`` gets one worker and a nested task deadlocks),
a legacy locale that makes Python's encodings ASCII (``LC_ALL=C`` alone does not: UTF-8 mode turns
on, PEP 540), a non-root user, another umask. The controlling process reads them once, with its
environment (`ci_environment.context`), each read on its own: one that fails is left out.

Values are strings; a limit is only kept when there is one. Nothing here changes the process (the
umask is read from ``/proc/self/status``, never set to find it out) and nothing heavy is imported (not
even pathlib).
"""

from __future__ import annotations

import locale
import os
import sys
from collections.abc import Callable
from typing import Final

UNLIMITED_BYTES: Final = 1 << 60
"""A cgroup v1 memory limit at least this large means none (it says 9223372036854771712)."""

_CGROUP: Final = "/sys/fs/cgroup"


def facts() -> dict[str, str]:
    """Each fact the process can read about its machine, by name (see `NAMES`)."""
    found: dict[str, str] = {}
    for name, read in _READERS:
        try:
            value = read()
        except Exception:  # recording never changes a run: a fact not read is left out
            continue
        if value is not None and value != "":
            found[name] = value
    return found


def _cpus() -> str | None:
    count = os.cpu_count()
    return str(count) if count else None


def _cpus_usable() -> str | None:
    if not hasattr(os, "sched_getaffinity"):
        return None
    return str(len(os.sched_getaffinity(0)))


def cpu_quota(root: str = _CGROUP) -> str | None:
    """The cgroup's CPU quota as a number of CPUs (``1.5``), when it has one."""
    try:
        quota, period = _read(f"{root}/cpu.max").split()[:2]  # v2: "max 100000" or "150000 100000"
    except OSError:
        quota = _read(f"{root}/cpu/cpu.cfs_quota_us")  # v1: -1 when not limited
        period = _read(f"{root}/cpu/cpu.cfs_period_us")
    if quota == "max" or int(quota) <= 0 or int(period) <= 0:
        return None
    return f"{int(quota) / int(period):g}"


def memory_limit(root: str = _CGROUP) -> str | None:
    """The cgroup's memory limit in bytes, when it has one."""
    try:
        limit = _read(f"{root}/memory.max")  # v2: "max" when not limited
    except OSError:
        limit = _read(f"{root}/memory/memory.limit_in_bytes")
    if limit == "max" or int(limit) >= UNLIMITED_BYTES:
        return None
    return str(int(limit))


def _utf8_mode() -> str:
    return "on" if sys.flags.utf8_mode else "off"


def _preferred_encoding() -> str:
    return locale.getpreferredencoding(False)


def _locale_encoding() -> str | None:
    get = getattr(locale, "getencoding", None)  # 3.11+: the locale's, whatever UTF-8 mode says
    return str(get()) if get is not None else None


def _filesystem_encoding() -> str:
    return sys.getfilesystemencoding()


def _stdout_encoding() -> str | None:
    stream = sys.__stdout__
    return getattr(stream, "encoding", None) if stream is not None else None


def _uid() -> str | None:
    return str(os.getuid()) if hasattr(os, "getuid") else None


def _user() -> str | None:
    if not hasattr(os, "getuid"):
        return None
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def umask(status: str = "/proc/self/status") -> str | None:
    """The process's umask as Linux shows it (``0022``); None where /proc does not say."""
    text = _read(status, limit=512)  # its second line, after the name
    start = text.find("\nUmask:")
    if start < 0:
        return None
    return text[start + 7 :].split("\n", 1)[0].strip()


def _platform() -> str:
    return sys.platform


def _arch() -> str:
    return os.uname().machine if hasattr(os, "uname") else _machine_elsewhere()


def _machine_elsewhere() -> str:
    import platform  # Windows: os.uname does not exist

    return platform.machine()


def _read(path: str, limit: int = 256) -> str:
    """A small file's text, by the system calls themselves (a buffered text file costs ~10x more)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


_READERS: Final[tuple[tuple[str, Callable[[], str | None]], ...]] = (
    ("cpus", _cpus),
    ("cpus_usable", _cpus_usable),
    ("cpu_quota", cpu_quota),
    ("memory_limit", memory_limit),
    ("utf8_mode", _utf8_mode),
    ("preferred_encoding", _preferred_encoding),
    ("locale_encoding", _locale_encoding),
    ("filesystem_encoding", _filesystem_encoding),
    ("stdout_encoding", _stdout_encoding),
    ("uid", _uid),
    ("user", _user),
    ("umask", umask),
    ("platform", _platform),
    ("arch", _arch),
)
NAMES: Final = tuple(name for name, _ in _READERS)
