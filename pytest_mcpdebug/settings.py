"""Options of the plugin: each help text written once, one resolver with one precedence.

Precedence is CLI > environment > ini (later issues add markers on top). A bad value raises
`pytest.UsageError` naming where it came from, so the user knows which place to fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from . import limits
from .layout import DIRNAME

ENABLE_HELP: Final = "Record this run for mcpdebug (failures, output) and stream it to `mcpdebug serve`."
DIR_HELP: Final = "Folder of the mcpdebug store and spool (default: <rootdir>/.mcpdebug)."
URL_HELP: Final = (
    "WebSocket URL of a running `mcpdebug serve` ingest endpoint, e.g. ws://127.0.0.1:PORT/?token=T "
    "(default: found through <dir>/server.json)."
)

MAX_LINE_HELP: Final = (
    "Cut captured output lines longer than this (e.g. 64KB, the default); also MCPDEBUG_MAX_LINE_LENGTH "
    "or max_line_length in [tool.mcpdebug] of pyproject.toml."
)

BREAK_HELP: Final = (
    "Hold a failing test alive at its failure for an agent (evaluate_expression, continue_execution) "
    "when a `mcpdebug serve` is connected; implies --mcp-debug. Never holds without a server."
)
BREAK_TIMEOUT_HELP: Final = (
    "Seconds a held test waits without a request from the agent before it resumes by itself (default 300)."
)
DEFAULT_BREAK_TIMEOUT: Final = 300.0

ENV_ENABLE: Final = "MCPDEBUG"
ENV_BREAK: Final = "MCPDEBUG_BREAK"
ENV_BREAK_TIMEOUT: Final = "MCPDEBUG_BREAK_TIMEOUT"
ENV_RUN_ID: Final = "MCPDEBUG_RUN_ID"
"""Set by `mcpdebug serve`'s run_tests: the id the run must have, so the server can follow it."""
ENV_DIR: Final = "MCPDEBUG_DIR"
ENV_URL: Final = "MCPDEBUG_URL"
ENV_TOKEN: Final = "MCPDEBUG_TOKEN"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpdebug", "recording runs for AI-agent debugging (pytest-mcpdebug)")
    group.addoption("--mcp-debug", action="store_true", default=None, dest="mcpdebug", help=ENABLE_HELP)
    group.addoption("--mcp-debug-dir", metavar="PATH", dest="mcpdebug_dir", help=DIR_HELP)
    group.addoption("--mcp-debug-url", metavar="URL", dest="mcpdebug_url", help=URL_HELP)
    group.addoption(
        "--mcp-debug-max-line-length", metavar="SIZE", dest="mcpdebug_max_line_length", help=MAX_LINE_HELP
    )
    group.addoption(
        "--mcp-debug-break", action="store_true", default=None, dest="mcpdebug_break", help=BREAK_HELP
    )
    group.addoption(
        "--mcp-debug-break-timeout", metavar="SECONDS", dest="mcpdebug_break_timeout", help=BREAK_TIMEOUT_HELP
    )
    parser.addini("mcpdebug", type="bool", default=False, help=ENABLE_HELP)
    parser.addini("mcpdebug_break", type="bool", default=False, help=BREAK_HELP)
    parser.addini("mcpdebug_break_timeout", help=BREAK_TIMEOUT_HELP)
    parser.addini("mcpdebug_dir", help=DIR_HELP)
    parser.addini("mcpdebug_url", help=URL_HELP)


def _parse_bool(value: str, where: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise pytest.UsageError(f"mcpdebug: {where}={value!r} is not a boolean; use 1/0, true/false, yes/no")


def is_enabled(config: pytest.Config) -> bool:
    if config.getoption("mcpdebug") or breaks(config):
        return True
    env = os.environ.get(ENV_ENABLE)
    if env is not None:
        return _parse_bool(env, f"environment variable {ENV_ENABLE}")
    return bool(config.getini("mcpdebug"))


def breaks(config: pytest.Config) -> bool:
    """--mcp-debug-break > MCPDEBUG_BREAK > ini mcpdebug_break."""
    if config.getoption("mcpdebug_break"):
        return True
    env = os.environ.get(ENV_BREAK)
    if env is not None:
        return _parse_bool(env, f"environment variable {ENV_BREAK}")
    return bool(config.getini("mcpdebug_break"))


def _break_timeout(config: pytest.Config) -> float:
    raw, where = _first(config, "mcpdebug_break_timeout", ENV_BREAK_TIMEOUT)
    if not raw:
        return DEFAULT_BREAK_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e9:
        raise pytest.UsageError(
            f"mcpdebug: {where}={raw!r} is not a number of seconds above 0; e.g. 300 (five minutes)"
        )
    return seconds


def _run_id() -> str | None:
    raw = os.environ.get(ENV_RUN_ID)
    if not raw:
        return None
    if not (len(raw) <= 64 and all(c.isalnum() or c in "-_." for c in raw)):
        raise pytest.UsageError(
            f"mcpdebug: environment variable {ENV_RUN_ID}={raw!r} is not a run id (letters, digits, "
            "'-', '_' and '.', at most 64); unset it to get a new id"
        )
    return raw


@dataclass(frozen=True)
class Settings:
    dir: Path
    url: str | None
    """Explicit server URL (CLI, env or ini); None means look in `dir/server.json`."""
    token: str | None
    max_line_length: int = limits.Limits.max_line_length
    break_on_failure: bool = False
    break_timeout: float = DEFAULT_BREAK_TIMEOUT
    run_id: str | None = None
    """A run id chosen by whoever started pytest (`run_tests`); None: a new one."""


def resolve(config: pytest.Config) -> Settings:
    root = Path(config.rootpath)
    raw_dir, _ = _first(config, "mcpdebug_dir", ENV_DIR)
    directory = (root / DIRNAME) if not raw_dir else (Path(os.path.expanduser(raw_dir)))
    if not directory.is_absolute():
        directory = Path(config.invocation_params.dir) / directory
    url, where = _first(config, "mcpdebug_url", ENV_URL)
    if url and not url.startswith(("ws://", "wss://")):
        raise pytest.UsageError(
            f"mcpdebug: {where} {url!r} is not a WebSocket URL; it looks like ws://127.0.0.1:PORT/?token=T "
            "(the URL `mcpdebug serve` writes to .mcpdebug/server.json)"
        )
    try:
        found = limits.load(
            cli={"max_line_length": config.getoption("mcpdebug_max_line_length")},
            env=os.environ,
            pyproject=root / "pyproject.toml",
            only=("max_line_length",),
        )
    except limits.LimitsError as exc:
        raise pytest.UsageError(
            f"mcpdebug: {str(exc).replace('--max-line', '--mcp-debug-max-line')}"
        ) from None
    return Settings(
        dir=directory,
        url=url or None,
        token=os.environ.get(ENV_TOKEN) or None,
        max_line_length=found.max_line_length,
        break_on_failure=breaks(config),
        break_timeout=_break_timeout(config),
        run_id=_run_id(),
    )


def _first(config: pytest.Config, name: str, env: str) -> tuple[str, str]:
    """The value of an option by precedence, with a description of where it came from."""
    value = config.getoption(name)
    if value:
        return str(value), "--" + name.replace("_", "-").replace("mcpdebug", "mcp-debug")
    if os.environ.get(env):
        return os.environ[env], f"environment variable {env}"
    ini = config.getini(name)
    if ini:
        return str(ini), f"ini option {name}"
    return "", ""
