"""The `mcpdebug` command: serve the MCP server, or read the store from a terminal.

CLI → config → server, as uvicorn does it: a start-up failure is one clear line on stderr and an
exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpdebug import command_line
from mcpdebug.names import EXIT_NOT_FOUND, StoreError
from mcpdebug.store_dir import find_dir
from pytest_mcpdebug import limits
from pytest_mcpdebug.folder import dir_args

if TYPE_CHECKING:
    from mcpdebug.store import Store

EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    parser = command_line.build_parser()
    args = parser.parse_args(command_line.glue_negative_range(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "init":
            from mcpdebug.project_init.command import main as init

            return init(args)
        if args.command == "hang":
            return _hang(args)
        if args.command in ("run", "forward"):
            return _process_session(args)
        if args.command == "tui":
            return _tui(args)
        if args.command == "merge":
            from mcpdebug.merging.command import main as merge

            return merge(args)
        return _read(args)
    except (StoreError, limits.LimitsError) as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mcpdebug logs ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _read(args: argparse.Namespace) -> int:
    """The commands that read the store (`runs`, `show`, `failure`, `logs`, `tail`, `report`): they
    alone import it, so `run`, `forward` and `hang` start quickly."""
    from mcpdebug import terminal
    from mcpdebug.store import Store
    from mcpdebug.store.output_query import ErrorType, OutputError
    from mcpdebug.views import calls, lookup
    from mcpdebug.views import hang as hang_view
    from mcpdebug.views import localize as localize_view
    from pytest_mcpdebug.commands import program

    directory = find_dir(args.dir, create=False)
    calls.for_terminal(program("mcpdebug"), dir_args(directory, Path.cwd()))
    store = Store(directory, create=False, limits=_limits(args, directory))
    if store.read_only:
        print(f"mcpdebug: note: {store.path} is read-only here: showing what it holds", file=sys.stderr)
    try:
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
            run = lookup.run(store, args.run)
            suspects = localize_view.suspects_and_note(store, run)  # as get_failure
            print(hang_view.failure_or_hang(store, run, args.test).text + suspects)
            return 0
        if args.command == "suspects":
            return _suspects(store, args)
        if args.command == "localize":
            return _localize(store, args)
        return terminal.show(store, args)
    except lookup.NotFound as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except OutputError as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND if exc.kind in (ErrorType.LOG_NOT_FOUND, ErrorType.NO_MATCHES) else EXIT_USAGE


def _suspects(store: Store, args: argparse.Namespace) -> int:
    from mcpdebug.views import lookup
    from mcpdebug.views import suspects as suspects_view

    if not 1 <= args.top <= 200:
        print("mcpdebug suspects: --top must be from 1 to 200", file=sys.stderr)
        return EXIT_USAGE
    print(suspects_view.suspects(store, lookup.run(store, args.run), args.top, args.level).text)
    return 0


def _localize(store: Store, args: argparse.Namespace) -> int:
    import subprocess
    import time

    from mcpdebug.views import localize, lookup

    if not 1 <= args.budget <= 600 or not 1 <= args.lines <= 100:
        print(
            "mcpdebug localize: --budget must be from 1 to 600 seconds, --lines from 1 to 100",
            file=sys.stderr,
        )
        return EXIT_USAGE
    started = time.monotonic()
    planned = localize.plan(store, lookup.run(store, args.run), args.budget, args.lines, started)
    try:
        done = subprocess.run(
            planned.command(),
            cwd=planned.cwd,
            env=planned.environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=max(planned.deadline - time.monotonic(), 0.1),
        )
        terminal = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:  # what it learnt so far is in its result file
        terminal = str(exc.stdout or "")
    result = localize.store_result(store, planned, time.monotonic() - started, terminal)
    print(localize.reply(store, planned.run, result).text)
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


def _serve(args: argparse.Namespace) -> int:
    import logging  # here: `mcpdebug run` starts its command sooner without it

    import anyio

    from mcpdebug import http_auth
    from mcpdebug.serve import ServeConfig, run

    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("mcpdebug.ingest.websockets").setLevel(logging.WARNING)
    from mcpdebug.tools import groups as tool_groups

    groups = [g.strip() for g in args.tools.split(",") if g.strip()] if args.tools else tool_groups.DEFAULT
    try:
        tool_groups.select(groups)
    except tool_groups.SelectionError as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
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
        tools=tuple(groups),
        debug_idle_timeout=args.debug_idle_timeout,
        debug_spare=args.debug_spare,
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
    from mcpdebug.views import lookup

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
    from mcpdebug.report.log_settings import LogSettings

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


if __name__ == "__main__":
    sys.exit(main())
