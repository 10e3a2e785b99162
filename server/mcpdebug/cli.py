"""The `mcpdebug` command: serve the MCP server, or read the store from a terminal.

CLI → config → server, as uvicorn does it: a start-up failure is one clear line on stderr and an
exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from mcpdebug import terminal
from mcpdebug.store import Store, StoreError, output_query
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import calls, lookup
from mcpdebug.views import hang as hang_view
from pytest_mcpdebug import __version__, limits
from pytest_mcpdebug.folder import DIRNAME, find_store, store_in

EXIT_USAGE = 2
EXIT_NOT_FOUND = terminal.EXIT_NOT_FOUND


def find_dir(given: str | None, *, create: bool) -> Path:
    """The store to use: from --dir (else $MCPDEBUG_DIR, else the current folder), which may be a
    project folder or a `.mcpdebug` folder; a project's store is its nearest `.mcpdebug/` upwards.

    ``create`` (serve): with no store found, a new one is made as `.mcpdebug/` in the folder given
    (or the current one), never in a folder that is not named so.
    """
    raw = given or os.environ.get("MCPDEBUG_DIR")
    start = Path(raw).expanduser().resolve() if raw else Path.cwd().resolve()
    if raw and not start.exists() and start.name != DIRNAME:
        raise StoreError(f"{start} does not exist; give a project folder or its {DIRNAME} folder")
    found = find_store(start)
    if found is not None:
        return found
    if create:
        return store_in(start)
    looked = start if start.name == DIRNAME else f"{start / DIRNAME} or the {DIRNAME}/ of a parent folder"
    raise StoreError(
        f"no recorded runs: looked for {looked}. Record a run with `pytest --mcp-debug` "
        "in the project first, or pass --dir PROJECT (or its .mcpdebug folder)"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpdebug",
        description="Inspect pytest runs recorded with `pytest --mcp-debug`, "
        "or serve them to an AI agent over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"mcpdebug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dir_help = (
        "the project folder or its .mcpdebug folder (default: $MCPDEBUG_DIR, else the nearest .mcpdebug/ "
        "upwards from the current folder)"
    )

    serve = sub.add_parser("serve", help="run the MCP server (stdio by default) and the live ingest endpoint")
    serve.add_argument("--dir", help=dir_help)
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
    serve.add_argument(
        "--read-only",
        action="store_true",
        help="offer only the tools that read recorded runs: none that runs code or changes a process",
    )
    serve.add_argument(
        "--ingest-port",
        type=int,
        default=0,
        help="port of the WebSocket ingest endpoint (default: 0, a free one)",
    )
    serve.add_argument(
        "--tools",
        metavar="GROUPS",
        help="list only these tool groups, comma-separated: runs, failures, hangs, live, output, "
        "processes, debug, diagnosis (default: all)",
    )
    serve.add_argument(
        "--debug-idle-timeout",
        type=_duration,
        default=1800.0,
        metavar="DURATION",
        help="close a debug session after this long without a tool call about it: seconds, or 30m, 2h "
        "(default: 30m)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level of the server's log: its JSON log file and stderr (default: info; debug adds every "
        "line the runs write)",
    )
    serve.add_argument(
        "--log-file",
        metavar="PATH",
        help="the JSON log (seed 000's format, what `mcpdebug tui` reads); none: no file "
        "(default: <dir>/logs/debug-mcp-server.log)",
    )
    serve.add_argument(
        "--log-max-size",
        type=limits.parse_size,
        default="10MB",
        metavar="SIZE",
        help="rotate the JSON log when it reaches this size (default: 10MB)",
    )
    serve.add_argument(
        "--log-backups", type=int, default=5, metavar="N", help="rotated JSON logs kept (default: 5)"
    )

    for name, spec in limits.SPECS.items():
        serve.add_argument(
            limits.option_name(name),
            dest=name,
            metavar="SIZE" if spec.parse is limits.parse_size else "N" if name == "max_runs" else "AGE",
            help=f"{spec.help}; also {limits.env_name(name)} or {name} in [tool.mcpdebug] of pyproject.toml",
        )

    runs = sub.add_parser("runs", help="list recorded runs, newest first")
    runs.add_argument("--dir", help=dir_help)
    runs.add_argument("--limit", type=int, default=20, help="how many runs (default: 20)")
    runs.add_argument("--json", action="store_true", help="print JSON")

    show = sub.add_parser("show", help="show a run (its failures and tests) or one test of it")
    show.add_argument("run", nargs="?", default="latest", help='run id or unique prefix (default: "latest")')
    show.add_argument("test", nargs="?", help="node id (or a unique part of one)")
    show.add_argument("--dir", help=dir_help)
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
        default=terminal.SHOW_TESTS,
        help=f"most tests to list (default: {terminal.SHOW_TESTS})",
    )
    show.add_argument("--json", action="store_true", help="print JSON")

    logs = sub.add_parser("logs", help="read or search a test's captured output (or the run's)")
    logs.add_argument("run", nargs="?", default="latest", help='run id or unique prefix (default: "latest")')
    logs.add_argument("test", nargs="?", help="node id or a unique part (default: output outside tests)")
    logs.add_argument("--dir", help=dir_help)
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
    logs.add_argument(
        "--stream", default="combined", choices=output_query.STREAM_CHOICES, help="default: combined"
    )
    logs.add_argument("--phase", choices=output_query.PHASE_CHOICES, help="only this phase's lines")
    logs.add_argument("--no-line-numbers", action="store_true", help="print lines without their numbers")

    failure = sub.add_parser("failure", help="a failure's frames, locals and source (as get_failure)")
    failure.add_argument(
        "run", nargs="?", default="latest", help='run id or unique prefix (default: "latest")'
    )
    failure.add_argument(
        "test", nargs="?", help="node id or a unique part (default: the run's first failure)"
    )
    failure.add_argument("--dir", help=dir_help)

    report = sub.add_parser("report", help="write a run as one self-contained HTML file")
    report.add_argument(
        "run", nargs="?", default="latest", help='run id or unique prefix (default: "latest")'
    )
    report.add_argument("--html", metavar="PATH", required=True, help="the HTML file to write")
    report.add_argument("--dir", help=dir_help)

    tui = sub.add_parser("tui", help="watch the server's log and the store live in a terminal UI")
    tui.add_argument("--dir", help=dir_help)
    tui.add_argument(
        "--log",
        metavar="PATH",
        help="the JSON log to read, e.g. a CI artifact (default: <dir>/logs/debug-mcp-server.log)",
    )

    hang = sub.add_parser("hang", help="sample a running Python process: where it loops or blocks")
    hang.add_argument("pid", type=int, help="the process id (its child processes are read too)")
    hang.add_argument("--seconds", type=float, default=2.0, help="how long to sample (default: 2)")
    hang.add_argument("--interval", type=float, default=0.1, help="seconds between samples (default: 0.1)")

    tail = sub.add_parser("tail", help="follow a run's output live, as it is written")
    tail.add_argument("run", nargs="?", default="latest", help='run id or unique prefix (default: "latest")')
    tail.add_argument("--dir", help=dir_help)
    tail.add_argument(
        "-n", "--lines", type=int, default=10, help="lines of history to show first (default: 10)"
    )
    tail.add_argument(
        "--stream", default="combined", choices=output_query.STREAM_CHOICES, help="default: combined"
    )
    tail.add_argument("--interval", type=float, default=0.25, help="seconds between looks (default: 0.25)")

    # Process sessions (implemented in mcpdebug.processes.runner and .forwarder)
    label_help = (
        "the session's label (default: the command's or file's name; a label in use gets -2, -3, ...)"
    )
    url_help = (
        "the server's ingest URL, ws://127.0.0.1:PORT/?token=T (default: $MCPDEBUG_URL, else the server "
        "found through the .mcpdebug folder's server.json, looked up again after a server restart)"
    )
    run = sub.add_parser(
        "run", help="run a command as a live process session: output streamed, process controllable over MCP"
    )
    run.add_argument("--label", help=label_help)
    run.add_argument("--server-url", metavar="URL", help=url_help)
    run.add_argument(
        "--restart",
        choices=["no", "on-failure", "always"],
        default="no",
        help="start the command again when it exits: on-failure after a non-zero status or a crash, "
        "always after any exit (default: no)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="record the output without printing it here")
    run.add_argument("--dir", help=dir_help)
    run.add_argument("--run-id", help=argparse.SUPPRESS)
    run.add_argument("--watch-fd", type=int, help=argparse.SUPPRESS)  # stop when this pipe closes
    run.add_argument("--managed", action="store_true", help=argparse.SUPPRESS)  # started by start_process
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS]", help="the command")

    forward = sub.add_parser(
        "forward", help="forward a log file (followed like tail -F), a named pipe or stdin (-) as a session"
    )
    forward.add_argument("source", metavar="SOURCE", help="a file, a named pipe, or - for stdin")
    forward.add_argument("--label", help=label_help)
    forward.add_argument("--server-url", metavar="URL", help=url_help)
    forward.add_argument(
        "-n", "--lines", type=int, metavar="N", help="start with the file's last N lines (default: all of it)"
    )
    forward.add_argument("-q", "--quiet", action="store_true", help="print nothing about the session")
    forward.add_argument("--dir", help=dir_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(_glue_negative_range(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        _parser().print_help()
        return EXIT_USAGE
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "hang":
            return _hang(args)
        if args.command in ("run", "forward"):
            return _process_session(args)
        if args.command == "tui":
            return _tui(args)
        calls.for_terminal()
        directory = find_dir(args.dir, create=False)
        store = Store(directory, create=False, limits=_limits(args, directory))
        if store.read_only:
            print(f"mcpdebug: note: {store.path} is read-only here: showing what it holds", file=sys.stderr)
        lookup.refresh(store)
        if args.command == "runs":
            return terminal.runs(store, args)
        if args.command == "logs":
            return terminal.logs(store, args)
        if args.command == "tail":
            return terminal.tail(store, args)
        if args.command == "report":
            return _report(store, args)
        if args.command == "failure":
            print(hang_view.failure_or_hang(store, lookup.run(store, args.run), args.test).text)
            return 0
        return terminal.show(store, args)
    except (StoreError, limits.LimitsError) as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except lookup.NotFound as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except OutputError as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND if exc.kind in (ErrorType.LOG_NOT_FOUND, ErrorType.NO_MATCHES) else EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mcpdebug logs ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _hang(args: argparse.Namespace) -> int:
    from mcpdebug.processes.hang_detection import process_text
    from mcpdebug.processes.test_runs import RunError

    if args.seconds <= 0 or args.interval <= 0:
        print("mcpdebug hang: --seconds and --interval must be above 0", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(process_text(args.pid, args.seconds, min(args.interval, args.seconds)))
    except RunError as exc:
        print(f"mcpdebug hang: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    return 0


def _duration(text: str) -> float:
    """Seconds from "90", "90s", "30m" or "2h" (argparse turns a ValueError into a usage error)."""
    raw = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], 0)
    value = float(raw[:-1] if scale else raw) * (scale or 1)
    if not 0 < value < 1e9:
        raise ValueError(text)
    return value


_duration.__name__ = "duration"  # argparse's message: "invalid duration value: 'x'"


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from mcpdebug import http_auth
    from mcpdebug.serve import ServeConfig, run

    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("mcpdebug.ingest.websockets").setLevel(logging.WARNING)
    from mcpdebug.app import GROUPS

    groups = [g.strip() for g in args.tools.split(",") if g.strip()] if args.tools else None
    unknown = [g for g in groups or [] if g not in GROUPS]
    if unknown:
        print(
            f"mcpdebug serve: unknown tool group {', '.join(map(repr, unknown))}; "
            f"the groups are {', '.join(GROUPS)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        security = http_auth.from_serve_args(args)
    except http_auth.HttpConfigError as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        directory = find_dir(args.dir, create=True)
        found = _limits(args, directory)
    except (StoreError, limits.LimitsError) as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = ServeConfig(
        directory=directory,
        limits=found,
        http=args.http,
        host=args.host,
        port=args.port,
        ingest_port=args.ingest_port,
        tools=tuple(groups) if groups is not None else None,
        debug_idle_timeout=args.debug_idle_timeout,
        read_only=args.read_only,
        security=security,
        log=_log_settings(args),
    )
    try:
        anyio.run(run, config)
    except StoreError as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return 0


def _report(store: Store, args: argparse.Namespace) -> int:
    from mcpdebug.report import html

    run = lookup.run(store, args.run)
    path = Path(args.html).expanduser()
    try:
        size = html.write(store, run, path)
    except OSError as exc:
        print(f"mcpdebug report: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"mcpdebug: HTML report of run {run['run_id']} written to {path} ({size / 1024:.0f} KB)")
    return 0


def _tui(args: argparse.Namespace) -> int:
    from mcpdebug.report import tui

    return tui.main(args)


def _log_settings(args: argparse.Namespace) -> Any:
    from mcpdebug.report.server_log import LogSettings

    given = args.log_file
    return LogSettings(
        level=args.log_level,
        path=Path(given).expanduser().resolve() if given and given.lower() != "none" else None,
        enabled=not (given and given.lower() == "none"),
        max_bytes=args.log_max_size,
        backups=max(1, args.log_backups),
    )


def _process_session(args: argparse.Namespace) -> int:
    directory = find_dir(args.dir, create=True)
    if args.command == "run":
        from mcpdebug.processes import runner

        return runner.main(args, directory)
    from mcpdebug.processes import forwarder

    return forwarder.main(args, directory)


def _limits(args: argparse.Namespace, directory: Path) -> limits.Limits:
    """Limits from the serve flags, the environment and the project's pyproject.toml."""
    cli = {name: getattr(args, name, None) for name in limits.SPECS}
    return limits.load(cli=cli, env=os.environ, pyproject=directory.parent / "pyproject.toml")


def _glue_negative_range(argv: list[str]) -> list[str]:
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


if __name__ == "__main__":
    sys.exit(main())
