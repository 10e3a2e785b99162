"""The plugin's options, and whether a run asks for recording at all.

Imported when pytest loads the plugin, in every run whether recording is on or not: only names and
help texts here, and the few reads `is_enabled` needs; resolving the settings of a recorded run
(`settings`) is imported only when recording is on.
"""

from __future__ import annotations

import os
from typing import Final

import pytest

ENABLE_HELP: Final = "Record this run for mcpdebug (failures, output) and stream it to `mcpdebug serve`."
DIR_HELP: Final = (
    "Where runs are recorded: a .mcpdebug folder, or a project folder to record in its .mcpdebug "
    "(default: <rootdir>/.mcpdebug)."
)
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

TIMEOUT_HELP: Final = (
    "Fail a test that runs longer than this many seconds with a diagnosis of where it hangs (all "
    "threads' stacks, busy loop or blocking call); implies --mcp-debug. 0 or none: no timeout. A "
    "test's @pytest.mark.mcpdebug_timeout(seconds) wins."
)
FUNC_ONLY_HELP: Final = "Time only the test function, not its fixtures' set-up and teardown."
HANG_ACTION_HELP: Final = (
    "What a hang does: fail (the test fails and the run goes on; the default), pause (the hung process "
    "is held for an agent while a server is connected), or exit (the run ends)."
)
HANG_GRACE_HELP: Final = (
    "Seconds a hung test may take to stop once interrupted before the process is ended (a C call that "
    "holds the GIL cannot be interrupted); default 3."
)
SAMPLE_HELP: Final = "Seconds between the watchdog's samples of a running test's stack (default 0.1)."
SESSION_TIMEOUT_HELP: Final = (
    "End the whole run after this many seconds, recording where the running tests are (0: none)."
)
HTML_HELP: Final = (
    "Write the run as one self-contained HTML file at PATH when it ends (failures, hangs, output, "
    "durations; opens from disk, e.g. as a CI artifact); implies --mcp-debug."
)
COVERAGE_HELP: Final = (
    "Record which lines of the project's own code each test runs (coverage.py, a context per test), so "
    "get_suspects ranks the lines failing tests ran and passing ones did not; implies --mcp-debug. "
    "Costs what coverage with per-test contexts costs."
)
COVERAGE_TESTS_HELP: Final = "With --mcp-debug-coverage: measure the test files too (left out by default)."
TRACE_HELP: Final = (
    "Record how the values of each selected test's locals changed, line by line, in the project's own "
    "code (for get_history; slow: meant for one test, as trace_test runs it); implies --mcp-debug."
)
TRACE_WATCH_HELP: Final = "With --mcp-debug-trace: record only these names (comma-separated)."
RUN_ID_HELP: Final = (
    "The run's id (default: a new one): give the shards of one CI run the same id (e.g. ci-${{ "
    "github.run_id }}) and `mcpdebug merge` makes their stores one run; implies --mcp-debug; also "
    "MCPDEBUG_RUN_ID."
)
SHARD_HELP: Final = (
    "This shard's label within its run (letters, digits, '-', '_', '.'): it names the shard in the merged "
    "run; implies --mcp-debug; also MCPDEBUG_SHARD (default: pytest-split's group, or the CI's node "
    "index where it numbers parallel jobs)."
)
HANG_ACTIONS: Final = ("fail", "pause", "exit")
DEFAULT_HANG_GRACE: Final = 3.0
DEFAULT_SAMPLE_INTERVAL: Final = 0.1

ENV_ENABLE: Final = "MCPDEBUG"
ENV_TIMEOUT: Final = "MCPDEBUG_TIMEOUT"
ENV_FUNC_ONLY: Final = "MCPDEBUG_TIMEOUT_FUNC_ONLY"
ENV_HANG_ACTION: Final = "MCPDEBUG_HANG_ACTION"
ENV_HANG_GRACE: Final = "MCPDEBUG_HANG_GRACE"
ENV_SAMPLE: Final = "MCPDEBUG_SAMPLE_INTERVAL"
ENV_SESSION_TIMEOUT: Final = "MCPDEBUG_SESSION_TIMEOUT"
ENV_BREAK: Final = "MCPDEBUG_BREAK"
ENV_BREAK_TIMEOUT: Final = "MCPDEBUG_BREAK_TIMEOUT"
ENV_COVERAGE: Final = "MCPDEBUG_COVERAGE"
ENV_COVERAGE_TESTS: Final = "MCPDEBUG_COVERAGE_TESTS"
ENV_TRACE: Final = "MCPDEBUG_TRACE"
ENV_TRACE_WATCH: Final = "MCPDEBUG_TRACE_WATCH"
ENV_RUN_ID: Final = "MCPDEBUG_RUN_ID"
"""Set by `mcpdebug serve`'s run_tests (the id the run must have, so the server can follow it), or by a
CI job whose shards share one run id."""
ENV_SHARD: Final = "MCPDEBUG_SHARD"
ENV_DIR: Final = "MCPDEBUG_DIR"
ENV_URL: Final = "MCPDEBUG_URL"
ENV_TOKEN: Final = "MCPDEBUG_TOKEN"
ENV_HTML: Final = "MCPDEBUG_HTML"

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
    group.addoption("--mcp-debug-timeout", metavar="SECONDS", dest="mcpdebug_timeout", help=TIMEOUT_HELP)
    group.addoption(
        "--mcp-debug-timeout-func-only",
        action="store_true",
        default=None,
        dest="mcpdebug_timeout_func_only",
        help=FUNC_ONLY_HELP,
    )
    group.addoption(
        "--mcp-debug-hang-action", choices=HANG_ACTIONS, dest="mcpdebug_hang_action", help=HANG_ACTION_HELP
    )
    group.addoption(
        "--mcp-debug-hang-grace", metavar="SECONDS", dest="mcpdebug_hang_grace", help=HANG_GRACE_HELP
    )
    group.addoption(
        "--mcp-debug-sample-interval", metavar="SECONDS", dest="mcpdebug_sample_interval", help=SAMPLE_HELP
    )
    group.addoption(
        "--mcp-debug-session-timeout",
        metavar="SECONDS",
        dest="mcpdebug_session_timeout",
        help=SESSION_TIMEOUT_HELP,
    )
    group.addoption("--mcp-debug-html", metavar="PATH", dest="mcpdebug_html", help=HTML_HELP)
    parser.addini("mcpdebug_html", help=HTML_HELP)
    group.addoption(
        "--mcp-debug-coverage",
        action="store_true",
        default=None,
        dest="mcpdebug_coverage",
        help=COVERAGE_HELP,
    )
    group.addoption(
        "--mcp-debug-coverage-tests",
        action="store_true",
        default=None,
        dest="mcpdebug_coverage_tests",
        help=COVERAGE_TESTS_HELP,
    )
    group.addoption(
        "--mcp-debug-trace", action="store_true", default=None, dest="mcpdebug_trace", help=TRACE_HELP
    )
    group.addoption(
        "--mcp-debug-trace-watch", metavar="NAMES", dest="mcpdebug_trace_watch", help=TRACE_WATCH_HELP
    )
    group.addoption("--mcp-debug-run-id", metavar="ID", dest="mcpdebug_run_id", help=RUN_ID_HELP)
    group.addoption("--mcp-debug-shard", metavar="LABEL", dest="mcpdebug_shard", help=SHARD_HELP)
    parser.addini("mcpdebug_coverage", type="bool", default=False, help=COVERAGE_HELP)
    parser.addini("mcpdebug_coverage_tests", type="bool", default=False, help=COVERAGE_TESTS_HELP)
    parser.addini("mcpdebug_timeout", help=TIMEOUT_HELP)
    parser.addini("mcpdebug_timeout_func_only", type="bool", default=False, help=FUNC_ONLY_HELP)
    parser.addini("mcpdebug_hang_action", help=HANG_ACTION_HELP)
    parser.addini("mcpdebug_hang_grace", help=HANG_GRACE_HELP)
    parser.addini("mcpdebug_sample_interval", help=SAMPLE_HELP)
    parser.addini("mcpdebug_session_timeout", help=SESSION_TIMEOUT_HELP)
    parser.addini("mcpdebug", type="bool", default=False, help=ENABLE_HELP)
    parser.addini("mcpdebug_break", type="bool", default=False, help=BREAK_HELP)
    parser.addini("mcpdebug_break_timeout", help=BREAK_TIMEOUT_HELP)
    parser.addini("mcpdebug_dir", help=DIR_HELP)
    parser.addini("mcpdebug_url", help=URL_HELP)


def parse_bool(value: str, where: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise pytest.UsageError(f"mcpdebug: {where}={value!r} is not a boolean; use 1/0, true/false, yes/no")


def is_enabled(config: pytest.Config) -> bool:
    if (
        config.getoption("mcpdebug")
        or breaks(config)
        or coverage(config)
        or traces(config)
        or first_value(config, "mcpdebug_html", ENV_HTML)[0]
        or config.getoption("mcpdebug_run_id")  # naming a run (a CI shard's) is asking for it
        or config.getoption("mcpdebug_shard")
    ):
        return True
    timeout, _ = first_value(config, "mcpdebug_timeout", ENV_TIMEOUT)
    if timeout and timeout.strip().lower() not in ("0", "none", "off"):
        return True  # asking for hang timeouts is asking for the recording that diagnoses them
    env = os.environ.get(ENV_ENABLE)
    if env is not None:
        return parse_bool(env, f"environment variable {ENV_ENABLE}")
    return bool(config.getini("mcpdebug"))


def breaks(config: pytest.Config) -> bool:
    """--mcp-debug-break > MCPDEBUG_BREAK > ini mcpdebug_break."""
    if config.getoption("mcpdebug_break"):
        return True
    env = os.environ.get(ENV_BREAK)
    if env is not None:
        return parse_bool(env, f"environment variable {ENV_BREAK}")
    return bool(config.getini("mcpdebug_break"))


def flag(config: pytest.Config, name: str, env: str, *, ini: bool = True) -> bool:
    """A flag by precedence: CLI > environment > ini."""
    if config.getoption(name):
        return True
    raw = os.environ.get(env)
    if raw is not None:
        return parse_bool(raw, f"environment variable {env}")
    return bool(config.getini(name)) if ini else False


def coverage(config: pytest.Config) -> bool:
    """--mcp-debug-coverage > MCPDEBUG_COVERAGE > ini mcpdebug_coverage."""
    return flag(config, "mcpdebug_coverage", ENV_COVERAGE)


def traces(config: pytest.Config) -> bool:
    """--mcp-debug-trace > MCPDEBUG_TRACE (set by the server's trace_test)."""
    return flag(config, "mcpdebug_trace", ENV_TRACE, ini=False)


def first_value(config: pytest.Config, name: str, env: str, *, ini: bool = True) -> tuple[str, str]:
    """The value of an option by precedence, with a description of where it came from."""
    value = config.getoption(name)
    if value:
        return str(value), "--" + name.replace("_", "-").replace("mcpdebug", "mcp-debug")
    if os.environ.get(env):
        return os.environ[env], f"environment variable {env}"
    if not ini:
        return "", ""
    ini_value = config.getini(name)
    if ini_value:
        return str(ini_value), f"ini option {name}"
    return "", ""
