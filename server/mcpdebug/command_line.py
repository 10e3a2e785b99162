"""The `mcpdebug` command line: each command's arguments and help, one function per command.

`cli` runs what is parsed here; the README's CLI section documents the same flags.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mcpdebug.names import PHASE_CHOICES, SHOW_TESTS, STREAM_CHOICES
from pytest_mcpdebug import __version__, limits

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

DIR_HELP = (
    "the project folder or its .mcpdebug folder (default: $MCPDEBUG_DIR, else the nearest .mcpdebug/ "
    "upwards from the current folder)"
)
RUN_HELP = 'run id or unique prefix (default: "latest")'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpdebug",
        description="Inspect pytest runs recorded with `pytest --mcp-debug`, "
        "or serve them to an AI agent over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"mcpdebug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        _init,
        _serve,
        _runs,
        _show,
        _logs,
        _failure,
        _suspects,
        _localize,
        _report,
        _merge,
        _tui,
        _hang,
        _tail,
        _run,
        _forward,
    ):
        add(sub)
    return parser


def glue_negative_range(argv: list[str]) -> list[str]:
    """``--range -50:-1`` would read as an unknown option to argparse: pass it as ``--range=-50:-1``."""
    if next((a for a in argv if not a.startswith("-")), None) != "logs":
        return argv  # never rewrite the command of `mcpdebug run`
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--range":
            value = next(args, None)
            out.append(arg if value is None else f"--range={value}")
        else:
            out.append(arg)
    return out


def _duration(text: str) -> float:
    """Seconds from "90", "90s", "30m" or "2h" (argparse turns a ValueError into a usage error)."""
    raw = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], 0)
    value = float(raw[:-1] if scale else raw) * (scale or 1)
    if not 0 < value < 1e9:
        raise ValueError(text)
    return value


_duration.__name__ = "duration"  # argparse's message: "invalid duration value: 'x'"


CLIENTS = ("claude", "vscode", "cursor")
DEFAULT_TIMEOUT = 60.0
"""The hang timeout `mcpdebug init` suggests: under the 2 minutes an agent's shell tool (Claude
Code's Bash) waits by default, so a hanging test is diagnosed before the agent gives up on the run."""


def _init(sub: Subparsers) -> None:
    init = sub.add_parser(
        "init",
        help="make a project ready for agents: pytest records every run, MCP client configs, AGENTS.md",
        description="Write what makes the project ready for agents: the pytest configuration that "
        "records every run (with a hang timeout), the MCP server in the configs of Claude Code "
        "(.mcp.json), VS Code (.vscode/mcp.json) and Cursor (.cursor/mcp.json), and a short section in "
        "AGENTS.md (and CLAUDE.md where it exists). Each change is shown first; existing files are "
        "merged into, never replaced; a second run changes nothing.",
    )
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the project folder (default: .)")
    what = init.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="show the changes and write nothing")
    what.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit with status 1 if anything would change (for CI)",
    )
    init.add_argument(
        "-y", "--yes", action="store_true", help="write without asking (it asks only on a terminal)"
    )
    init.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"fail a test running longer with a hang diagnosis (mcpdebug_timeout; 0: none). Default: "
        f"the value already configured, else {DEFAULT_TIMEOUT:g}",
    )
    init.add_argument(
        "--coverage",
        action="store_true",
        help="also record per-test coverage in every run, for get_suspects (mcpdebug_coverage; slower)",
    )
    init.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        metavar="LIST",
        help=f"the MCP clients to configure, comma-separated: {', '.join(CLIENTS)}, or none "
        f"(default: {','.join(CLIENTS)})",
    )
    init.add_argument("--no-agents-md", action="store_true", help="leave AGENTS.md and CLAUDE.md alone")


def _serve(sub: Subparsers) -> None:
    serve = sub.add_parser("serve", help="run the MCP server (stdio by default) and the live ingest endpoint")
    serve.add_argument("--dir", help=DIR_HELP)
    serve.add_argument("--http", action="store_true", help="serve MCP over streamable HTTP instead of stdio")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="HTTP bind address (default: 127.0.0.1; any other needs --allow-remote)",
    )
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765; 0 picks a free one)")
    serve.add_argument(
        "--token",
        help="the HTTP bearer token every request must carry (default: $MCPDEBUG_HTTP_TOKEN, else a "
        "random one, printed at start and kept in .mcpdebug/server.json)",
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --host to be an address other machines can reach (needs --tls-cert and --tls-key)",
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="TLS certificate (chain) file: serve HTTPS")
    serve.add_argument("--tls-key", metavar="PEM", help="private key file of --tls-cert")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a further Host name clients reach a remote server by (repeatable; default: this "
        "machine's names and addresses)",
    )
    _serve_tools(serve)
    _serve_log(serve)
    _serve_limits(serve)


def _serve_tools(parser: argparse.ArgumentParser) -> None:
    """What serve offers: read-only or all tools, which groups, its ingest port, idle debug sessions."""
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="offer only the tools that read recorded runs: none that runs code or changes a process",
    )
    parser.add_argument(
        "--ingest-port",
        type=int,
        default=0,
        help="port of the WebSocket ingest endpoint (default: 0, a free one)",
    )
    parser.add_argument(
        "--tools",
        metavar="GROUPS",
        help="the tools listed at first, comma-separated: core (the tools a failing or hanging test "
        "needs first), all, or groups: runs, failures, hangs, live, output, processes, debug, diagnosis, "
        "localize "
        "(default: core; the enable_tools tool lists more within a session)",
    )
    parser.add_argument(
        "--debug-idle-timeout",
        type=_duration,
        default=1800.0,
        metavar="DURATION",
        help="close a debug session after this long without a tool call about it: seconds, or 30m, 2h "
        "(default: 30m)",
    )
    parser.add_argument(
        "--debug-spare",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep one debuggee started (pytest and debugpy imported) for the next debug session once "
        "one has started, a script session is created or a run fails; it ends after 10 min unused "
        "(default: on)",
    )


def _serve_log(parser: argparse.ArgumentParser) -> None:
    """The server's JSON log: its level, file and rotation."""
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level of the server's log: its JSON log file and stderr (default: info; debug adds every "
        "line the runs write)",
    )
    parser.add_argument(
        "--log-file",
        metavar="PATH",
        help="the JSON log (seed 000's format, what `mcpdebug tui` reads); none: no file "
        "(default: <dir>/logs/debug-mcp-server.log)",
    )
    parser.add_argument(
        "--log-max-size",
        type=limits.parse_size,
        default="10MB",
        metavar="SIZE",
        help="rotate the JSON log when it reaches this size (default: 10MB)",
    )
    parser.add_argument(
        "--log-backups", type=int, default=5, metavar="N", help="rotated JSON logs kept (default: 5)"
    )


def _serve_limits(parser: argparse.ArgumentParser) -> None:
    """The store's limits, one flag each (also settable by environment and pyproject.toml)."""
    for name, spec in limits.SPECS.items():
        parser.add_argument(
            limits.option_name(name),
            dest=name,
            metavar="SIZE" if spec.parse is limits.parse_size else "N" if name == "max_runs" else "AGE",
            help=f"{spec.help}; also {limits.env_name(name)} or {name} in [tool.mcpdebug] of pyproject.toml",
        )


def _runs(sub: Subparsers) -> None:
    runs = sub.add_parser("runs", help="list recorded runs, newest first")
    runs.add_argument("--dir", help=DIR_HELP)
    runs.add_argument("--limit", type=int, default=20, help="how many runs (default: 20)")
    runs.add_argument("--json", action="store_true", help="print JSON")


def _show(sub: Subparsers) -> None:
    show = sub.add_parser("show", help="show a run (its failures and tests) or one test of it")
    show.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    show.add_argument("test", nargs="?", help="node id (or a unique part of one)")
    show.add_argument("--dir", help=DIR_HELP)
    show.add_argument(
        "--tail", type=int, default=50, help="last lines of the test's output to show (default: 50)"
    )
    show.add_argument("--all", action="store_true", help="list every test of the run (default: at most 50)")
    show.add_argument(
        "--outcome",
        help="list only tests with this outcome: passed, failed, error, skipped, ... (comma-separated)",
    )
    show.add_argument("--offset", type=int, default=0, help="tests to skip, for paging (default: 0)")
    show.add_argument(
        "--limit",
        type=int,
        default=SHOW_TESTS,
        help=f"most tests to list (default: {SHOW_TESTS})",
    )
    show.add_argument("--json", action="store_true", help="print JSON")
    show.add_argument(
        "--env",
        nargs="?",
        const="",
        metavar="NAME",
        help="print what the run ran in: its machine, CI job, shards and environment variables (secrets "
        "hidden); with NAME, only variables whose name contains it",
    )
    show.add_argument(
        "--markdown",
        action="store_true",
        help="print the run's summary as Markdown (for $GITHUB_STEP_SUMMARY or a merge request's note)",
    )


def _logs(sub: Subparsers) -> None:
    logs = sub.add_parser("logs", help="read or search a test's captured output (or the run's)")
    logs.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    logs.add_argument("test", nargs="?", help="node id or a unique part (default: output outside tests)")
    logs.add_argument("--dir", help=DIR_HELP)
    logs.add_argument(
        "--range",
        metavar="START:END",
        help="lines to show, 1-based, negative from the end: 1:100, -50:-1, 10:-10, -20: (default: last 200)",
    )
    logs.add_argument("--grep", metavar="PATTERN", help="show lines matching this Python regex, with context")
    logs.add_argument(
        "-C", "--context", type=int, default=3, help="context lines around a match (default: 3)"
    )
    logs.add_argument("-i", "--ignore-case", action="store_true", help="case-insensitive --grep")
    logs.add_argument("--occurrence", type=int, default=1, help="first match to show (default: 1)")
    logs.add_argument("--max-results", type=int, default=20, help="matches to show (default: 20)")
    logs.add_argument("--stream", default="combined", choices=STREAM_CHOICES, help="default: combined")
    logs.add_argument("--phase", choices=PHASE_CHOICES, help="only this phase's lines")
    logs.add_argument("--no-line-numbers", action="store_true", help="print lines without their numbers")


def _failure(sub: Subparsers) -> None:
    failure = sub.add_parser("failure", help="a failure's frames, locals and source (as get_failure)")
    failure.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    failure.add_argument(
        "test", nargs="?", help="node id or a unique part (default: the run's first failure)"
    )
    failure.add_argument("--dir", help=DIR_HELP)


def _suspects(sub: Subparsers) -> None:
    suspects = sub.add_parser(
        "suspects", help="the lines most likely to hold the bug, from per-test coverage (as get_suspects)"
    )
    suspects.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    suspects.add_argument("--top", type=int, default=10, help="how many suspects to list (default: 10)")
    suspects.add_argument(
        "--level",
        choices=["statement", "function"],
        default="statement",
        help="rank lines (statement, the default) or whole functions",
    )
    suspects.add_argument("--dir", help=DIR_HELP)


def _localize(sub: Subparsers) -> None:
    localize = sub.add_parser(
        "localize",
        help="re-run a run's failing tests with small changes of its top suspects, within a time budget "
        "(as localize); stored with the run",
    )
    localize.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    localize.add_argument(
        "--budget", type=float, default=30.0, help="seconds to spend re-running tests (default: 30)"
    )
    localize.add_argument("--lines", type=int, default=20, help="top suspect lines to try (default: 20)")
    localize.add_argument("--dir", help=DIR_HELP)


def _report(sub: Subparsers) -> None:
    report = sub.add_parser("report", help="write a run as one self-contained HTML file")
    report.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    report.add_argument("--html", metavar="PATH", required=True, help="the HTML file to write")
    report.add_argument("--dir", help=DIR_HELP)


def _merge(sub: Subparsers) -> None:
    merge = sub.add_parser(
        "merge",
        help="merge stores, spool folders and unpacked CI artifacts into one store",
        description="Import recorded runs into one store: CI shards recorded with one --mcp-debug-run-id "
        "become one run holding every shard's tests. Each SRC is a .mcpdebug folder, the folder it was "
        "uploaded from, a folder of downloaded artifacts (searched for stores), or a spool folder. "
        "Merging a source again changes nothing; records that contradict what the store holds (the same "
        "test ended otherwise, a shard's label taken by another process) are left out and listed.",
    )
    merge.add_argument("sources", nargs="+", metavar="SRC", help="stores, artifact folders or spool folders")
    merge.add_argument(
        "--dir",
        help="the store to merge into: a new or empty folder becomes one (default: $MCPDEBUG_DIR, else the "
        "nearest .mcpdebug/ upwards from the current folder)",
    )


def _tui(sub: Subparsers) -> None:
    tui = sub.add_parser("tui", help="watch the recorded runs and the server's log live in a terminal UI")
    tui.add_argument("--dir", help=DIR_HELP)
    tui.add_argument(
        "--log",
        metavar="PATH",
        help="the JSON log to read, e.g. a CI artifact (default: <dir>/logs/debug-mcp-server.log)",
    )
    tui.add_argument(
        "--view",
        choices=("runs", "log"),
        help="the view shown first: the recorded runs, or the server's log (default: runs; log with --log)",
    )


def _hang(sub: Subparsers) -> None:
    hang = sub.add_parser("hang", help="sample a running Python process: where it loops or blocks")
    hang.add_argument("pid", type=int, help="the process id (its child processes are read too)")
    hang.add_argument("--seconds", type=float, default=2.0, help="how long to sample (default: 2)")
    hang.add_argument("--interval", type=float, default=0.1, help="seconds between samples (default: 0.1)")


def _tail(sub: Subparsers) -> None:
    tail = sub.add_parser("tail", help="follow a run's output live, as it is written")
    tail.add_argument("run", nargs="?", default="latest", help=RUN_HELP)
    tail.add_argument("--dir", help=DIR_HELP)
    tail.add_argument(
        "-n", "--lines", type=int, default=10, help="lines of history to show first (default: 10)"
    )
    tail.add_argument("--stream", default="combined", choices=STREAM_CHOICES, help="default: combined")
    tail.add_argument("--interval", type=float, default=0.25, help="seconds between looks (default: 0.25)")


# Process sessions (implemented in mcpdebug.processes.runner and .forwarder)
LABEL_HELP = "the session's label (default: the command's or file's name; a label in use gets -2, -3, ...)"
URL_HELP = (
    "the server's ingest URL, ws://127.0.0.1:PORT/?token=T (default: $MCPDEBUG_URL, else the server "
    "found through the .mcpdebug folder's server.json, looked up again after a server restart)"
)


def _run(sub: Subparsers) -> None:
    run = sub.add_parser(
        "run", help="run a command as a live process session: output streamed, process controllable over MCP"
    )
    run.add_argument("--label", help=LABEL_HELP)
    run.add_argument("--server-url", metavar="URL", help=URL_HELP)
    run.add_argument(
        "--restart",
        choices=["no", "on-failure", "always"],
        default="no",
        help="start the command again when it exits: on-failure after a non-zero status or a crash, "
        "always after any exit (default: no)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="record the output without printing it here")
    run.add_argument("--dir", help=DIR_HELP)
    run.add_argument("--run-id", help=argparse.SUPPRESS)
    run.add_argument("--watch-fd", type=int, help=argparse.SUPPRESS)  # stop when this pipe closes
    run.add_argument("--managed", action="store_true", help=argparse.SUPPRESS)  # started by start_process
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS]", help="the command")


def _forward(sub: Subparsers) -> None:
    forward = sub.add_parser(
        "forward", help="forward a log file (followed like tail -F), a named pipe or stdin (-) as a session"
    )
    forward.add_argument("source", metavar="SOURCE", help="a file, a named pipe, or - for stdin")
    forward.add_argument("--label", help=LABEL_HELP)
    forward.add_argument("--server-url", metavar="URL", help=URL_HELP)
    forward.add_argument(
        "-n", "--lines", type=int, metavar="N", help="start with the file's last N lines (default: all of it)"
    )
    forward.add_argument("-q", "--quiet", action="store_true", help="print nothing about the session")
    forward.add_argument("--dir", help=DIR_HELP)
