"""Options of the plugin: each help text written once, one resolver with one precedence.

Precedence is CLI > environment > ini (later issues add markers on top). A bad value raises
`pytest.UsageError` naming where it came from, so the user knows which place to fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_mcpdebug import limits
from pytest_mcpdebug.folder import DIRNAME, store_in
from pytest_mcpdebug.options import (
    DEFAULT_BREAK_TIMEOUT,
    DEFAULT_HANG_GRACE,
    DEFAULT_SAMPLE_INTERVAL,
    ENV_BREAK_TIMEOUT,
    ENV_COVERAGE_TESTS,
    ENV_DIR,
    ENV_FUNC_ONLY,
    ENV_HANG_ACTION,
    ENV_HANG_GRACE,
    ENV_HTML,
    ENV_RUN_ID,
    ENV_SAMPLE,
    ENV_SESSION_TIMEOUT,
    ENV_SHARD,
    ENV_TIMEOUT,
    ENV_TOKEN,
    ENV_TRACE_WATCH,
    ENV_URL,
    HANG_ACTIONS,
    breaks,
    coverage,
    first_value,
    flag,
    parse_bool,
    traces,
)
from pytest_mcpdebug.record import Record


def _break_timeout(config: pytest.Config) -> float:
    return _seconds(config, "mcpdebug_break_timeout", ENV_BREAK_TIMEOUT, DEFAULT_BREAK_TIMEOUT, "300") or 0.0


def parse_seconds(raw: object, where: str, *, example: str, zero: bool = False) -> float | None:
    """Seconds from a setting; None for "none"/0 when ``zero`` is allowed. Errors name ``where``."""
    text = str(raw).strip().lower()
    if zero and text in ("", "0", "none", "off"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e9:
        allowed = " (or 0 for none)" if zero else ""
        raise pytest.UsageError(
            f"mcpdebug: {where}={raw!r} is not a number of seconds above 0{allowed}; e.g. {example}"
        )
    return seconds


def _seconds(config: pytest.Config, name: str, env: str, default: float | None, example: str) -> float | None:
    raw, where = first_value(config, name, env)
    if not raw:
        return default
    return parse_seconds(raw, where, example=example, zero=default is None)


class HangSettings(Record):
    timeout: float | None = None
    """The default per-test timeout (CLI > env > ini); a marker overrides it per test."""
    func_only: bool = False
    action: str = "fail"
    grace: float = DEFAULT_HANG_GRACE
    interval: float = DEFAULT_SAMPLE_INTERVAL
    session_timeout: float | None = None


def hang_settings(config: pytest.Config) -> HangSettings:
    action, where = first_value(config, "mcpdebug_hang_action", ENV_HANG_ACTION)
    if action and action not in HANG_ACTIONS:
        raise pytest.UsageError(f"mcpdebug: {where}={action!r} is not one of {', '.join(HANG_ACTIONS)}")
    func_only = bool(config.getoption("mcpdebug_timeout_func_only"))
    if not func_only and os.environ.get(ENV_FUNC_ONLY) is not None:
        func_only = parse_bool(os.environ[ENV_FUNC_ONLY], f"environment variable {ENV_FUNC_ONLY}")
    elif not func_only:
        func_only = bool(config.getini("mcpdebug_timeout_func_only"))
    return HangSettings(
        timeout=_seconds(config, "mcpdebug_timeout", ENV_TIMEOUT, None, "30"),
        func_only=func_only,
        action=action or "fail",
        grace=_seconds(config, "mcpdebug_hang_grace", ENV_HANG_GRACE, DEFAULT_HANG_GRACE, "3") or 0.0,
        interval=_seconds(config, "mcpdebug_sample_interval", ENV_SAMPLE, DEFAULT_SAMPLE_INTERVAL, "0.1")
        or 0.0,
        session_timeout=_seconds(config, "mcpdebug_session_timeout", ENV_SESSION_TIMEOUT, None, "3600"),
    )


def _run_id(config: pytest.Config) -> str | None:
    """--mcp-debug-run-id > MCPDEBUG_RUN_ID; None: a new id. No ini option: every run would share it."""
    raw, where = first_value(config, "mcpdebug_run_id", ENV_RUN_ID, ini=False)
    if not raw:
        return None
    from pytest_mcpdebug.protocol import is_run_id  # only when an id is given

    if not is_run_id(raw):
        raise pytest.UsageError(
            f"mcpdebug: {where}={raw!r} is not a run id (a letter or digit, then letters, digits, '-', "
            "'_' and '.', at most 64 in all); leave it out to get a new id"
        )
    return raw


def _shard(config: pytest.Config) -> str:
    """--mcp-debug-shard > MCPDEBUG_SHARD > pytest-split's group > the CI's node index; "" for none."""
    from pytest_mcpdebug.recording import ci_environment

    raw, where = first_value(config, "mcpdebug_shard", ENV_SHARD, ini=False)
    if raw:
        if not ci_environment.is_shard_label(raw):
            raise pytest.UsageError(
                f"mcpdebug: {where}={raw!r} is not a shard label: a letter or digit, then letters, digits, "
                "'-', '_' and '.', at most 40 in all (e.g. linux-3)"
            )
        return raw
    group, splits = getattr(config.option, "group", None), getattr(config.option, "splits", None)
    if isinstance(group, int) and isinstance(splits, int) and splits > 1:  # pytest-split
        return f"{group}-of-{splits}"
    return ci_environment.shard_from_ci()


class DiagnosisSettings(Record):
    """What the opt-in diagnosis parts record; handed to xdist workers like the rest."""

    coverage: bool = False
    coverage_tests: bool = False
    trace: bool = False
    trace_watch: tuple[str, ...] = ()


def diagnosis_settings(config: pytest.Config) -> DiagnosisSettings:
    watch, _ = first_value(config, "mcpdebug_trace_watch", ENV_TRACE_WATCH, ini=False)
    return DiagnosisSettings(
        coverage=coverage(config),
        coverage_tests=flag(config, "mcpdebug_coverage_tests", ENV_COVERAGE_TESTS),
        trace=traces(config),
        trace_watch=tuple(n.strip() for n in watch.split(",") if n.strip()),
    )


class Settings(Record):
    dir: Path
    url: str | None
    """Explicit server URL (CLI, env or ini); None means look in `dir/server.json`."""
    token: str | None
    max_line_length: int = limits.MAX_LINE_LENGTH
    break_on_failure: bool = False
    break_timeout: float = DEFAULT_BREAK_TIMEOUT
    run_id: str | None = None
    """A run id chosen by whoever started pytest (`run_tests`, a CI job's shards); None: a new one."""
    shard: str = ""
    """This shard's label within a run recorded in several parts (CI shards); "" for none."""
    hangs: HangSettings = HangSettings()
    html: Path | None = None
    """--mcp-debug-html: the report written when the run ends."""
    diagnosis: DiagnosisSettings = DiagnosisSettings()


def resolve(config: pytest.Config) -> Settings:
    root = Path(config.rootpath)
    raw_dir, _ = first_value(config, "mcpdebug_dir", ENV_DIR)
    directory = (root / DIRNAME) if not raw_dir else (Path(os.path.expanduser(raw_dir)))
    if not directory.is_absolute():
        directory = Path(config.invocation_params.dir) / directory
    directory = store_in(directory)  # a project folder given: its .mcpdebug, never the folder itself
    url, where = first_value(config, "mcpdebug_url", ENV_URL)
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
        )  # every limit, as the server reads them: max_line_length is checked against the configured rest
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
        run_id=_run_id(config),
        shard=_shard(config),
        hangs=hang_settings(config),
        html=_html_path(config),
        diagnosis=diagnosis_settings(config),
    )


def _html_path(config: pytest.Config) -> Path | None:
    raw, _ = first_value(config, "mcpdebug_html", ENV_HTML)
    if not raw:
        return None
    path = Path(os.path.expanduser(raw))
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path
