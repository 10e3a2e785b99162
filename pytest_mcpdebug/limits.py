"""Output and retention limits: what they are, where they come from, and how they are checked.

Each limit can be set on the command line, in the environment (``MCPDEBUG_<NAME>``) or in
``[tool.mcpdebug]`` of the project's pyproject.toml, in that order of precedence. A bad value is an
error that names where it came from and what would be valid. No pytest import: the server and the
plugin both use this.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from pytest_mcpdebug.record import Record

KB: Final = 1024
MB: Final = 1024 * KB
GB: Final = 1024 * MB
TB: Final = 1024 * GB

_SIZE_UNITS = {"": 1, "b": 1, "bytes": 1, "k": KB, "kb": KB, "kib": KB, "m": MB, "mb": MB, "mib": MB}
_SIZE_UNITS |= {"g": GB, "gb": GB, "gib": GB, "t": TB, "tb": TB, "tib": TB}
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER_UNIT = r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$"  # compiled on first use (by `re`)


class LimitsError(ValueError):
    """A limit with a bad value; the message names its source and the valid range."""


MAX_LINE_LENGTH: Final = 64 * KB
"""The default of `Limits.max_line_length`."""


class Limits(Record):
    """(A `Record`: a dataclass or a NamedTuple costs ~0.3-0.4 ms of every recorded run's start-up to
    define, and a msgspec Struct needs msgspec's import, which would delay `mcpdebug run`'s command by
    ~10 ms.)"""

    max_line_length: int = MAX_LINE_LENGTH
    """A longer line is cut here, with a marker saying how much was dropped."""
    max_test_output: int = 10 * MB
    """A test writing more keeps its first and last halves of this, with a marker for the gap."""
    max_runs: int = 50
    max_store_size: int = 1 * GB
    max_age: float = 7 * 86400.0
    """Seconds; older runs are evicted."""


def parse_size(value: object) -> int:
    """Bytes from ``65536``, ``"64KB"``, ``"1.5 GB"`` (1024-based units)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    match = re.match(_NUMBER_UNIT, str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{value!r} is not a size; write bytes or a number with KB, MB, GB or TB")
    size = float(match.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(size):  # a number too long for a float
        raise ValueError(f"{value!r} is not a size")
    return int(size)


def parse_duration(value: object) -> float:
    """Seconds from ``3600``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = re.match(_NUMBER_UNIT, str(value))
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _DURATION_UNITS:
            raise ValueError(f"{value!r} is not a duration; write seconds or a number with s, m, h, d or w")
        seconds = float(match.group(1)) * _DURATION_UNITS[unit]
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a duration")
    return seconds


def parse_count(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a whole number")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError(f"{value!r} is not a whole number")
    return int(text)


def _size_text(n: float) -> str:
    for unit, size in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{unit}"
    return f"{int(n)} bytes"


def _duration_text(s: float) -> str:
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{int(s)}s" if s == int(s) else f"{s}s"  # not "g": 1000001 s is not "1e+06s"


class _Spec(Record):
    parse: Callable[[object], float]
    low: float
    high: float
    show: Callable[[float], str]
    help: str


SPECS: Final[dict[str, _Spec]] = {
    "max_line_length": _Spec(
        parse_size, 1 * KB, 16 * MB, _size_text, "cut output lines longer than this (default 64KB)"
    ),
    "max_test_output": _Spec(
        parse_size,
        64 * KB,
        100 * GB,
        _size_text,
        "keep head and tail of a test's output over this size (default 10MB)",
    ),
    "max_runs": _Spec(
        parse_count, 1, 100_000, lambda n: str(int(n)), "keep at most this many runs (default 50)"
    ),
    "max_store_size": _Spec(
        parse_size, 1 * MB, 100 * TB, _size_text, "evict the oldest runs above this store size (default 1GB)"
    ),
    "max_age": _Spec(
        parse_duration, 60, 100 * 365 * 86400, _duration_text, "evict runs older than this (default 7d)"
    ),
}
ENV_PREFIX: Final = "MCPDEBUG_"


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def check(name: str, raw: object, source: str) -> float:
    """One limit's value, parsed and range-checked; errors name ``source``."""
    spec = SPECS[name]
    try:
        value = spec.parse(raw)
    except ValueError as exc:
        raise LimitsError(f"{source}: {exc}") from None
    if not spec.low <= value <= spec.high:
        raise LimitsError(
            f"{source}: {raw!r} is out of range; {name} must be between {spec.show(spec.low)} "
            f"and {spec.show(spec.high)}"
        )
    return value


def read_pyproject(path: Path) -> dict[str, Any]:
    """The ``[tool.mcpdebug]`` table of a pyproject.toml (empty if there is none)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LimitsError(f"cannot read {path}: {exc}") from None
    if b"mcpdebug" not in text:  # no table of ours: the TOML parser is not even imported
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LimitsError(f"cannot read {path}: {exc}") from None
    table = data.get("tool", {}).get("mcpdebug", {})
    if not isinstance(table, dict):
        raise LimitsError(f"{path}: [tool.mcpdebug] must be a table")
    return table


def load(
    *,
    cli: Mapping[str, object | None] | None = None,
    env: Mapping[str, str] | None = None,
    pyproject: Path | None = None,
) -> Limits:
    """Limits from the command line, then the environment, then pyproject.toml, then defaults.

    The plugin and the server both read every limit this way, so a project's settings are accepted or
    refused alike by both (and checked against each other as configured). An unknown key
    in ``[tool.mcpdebug]`` is an error, so a misspelt limit does not go unnoticed.
    """
    names = tuple(SPECS)
    table = read_pyproject(pyproject) if pyproject is not None else {}
    table = {str(k).replace("-", "_"): v for k, v in table.items()}
    unknown = sorted(set(table) - set(SPECS))
    if unknown:
        raise LimitsError(
            f"{pyproject} [tool.mcpdebug]: unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; known keys: {', '.join(SPECS)}"
        )
    values: dict[str, Any] = {}
    for name in names:
        cli_value = (cli or {}).get(name)
        env_value = (env or {}).get(env_name(name))
        if cli_value is not None:
            raw, source = cli_value, option_name(name)
        elif env_value:
            raw, source = env_value, f"environment variable {env_name(name)}"
        elif name in table:
            raw, source = table[name], f"{pyproject} [tool.mcpdebug] {name}"
        else:
            continue
        value = check(name, raw, source)
        values[name] = value if name == "max_age" else int(value)
    limits = Limits(**values)
    if limits.max_line_length > limits.max_test_output:
        raise LimitsError(
            f"max_line_length ({_size_text(limits.max_line_length)}) cannot exceed max_test_output "
            f"({_size_text(limits.max_test_output)})"
        )
    return limits


def describe(limits: Limits) -> str:
    return ", ".join(f"{name}={SPECS[name].show(getattr(limits, name))}" for name in Limits._fields)
