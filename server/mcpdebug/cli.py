"""The `mcpdebug` command: serve the MCP server, or read the store from a terminal.

CLI → config → server, as uvicorn does it: a start-up failure is one clear line on stderr and an
exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pytest_mcpdebug import __version__
from pytest_mcpdebug.layout import DIRNAME, STORE_FILE

from . import lookup, render
from .store import Store, StoreError

EXIT_USAGE = 2
EXIT_NOT_FOUND = 3


def find_dir(given: str | None, *, create: bool) -> Path:
    """--dir, else $MCPDEBUG_DIR, else the nearest `.mcpdebug/` in this folder or a parent."""
    if given:
        return Path(given).expanduser().resolve()
    if os.environ.get("MCPDEBUG_DIR"):
        return Path(os.environ["MCPDEBUG_DIR"]).expanduser().resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / DIRNAME / STORE_FILE).exists() or (folder / DIRNAME / "spool").is_dir():
            return folder / DIRNAME
    if create:
        return here / DIRNAME
    raise StoreError(
        f"no {DIRNAME}/ folder in {here} or its parents: record a run with "
        "`pytest --mcp-debug` first, or pass --dir PATH/.mcpdebug"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpdebug",
        description="Inspect pytest runs recorded with `pytest --mcp-debug`, "
        "or serve them to an AI agent over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"mcpdebug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dir_help = "the .mcpdebug folder (default: $MCPDEBUG_DIR, else the nearest .mcpdebug/ upwards)"

    serve = sub.add_parser("serve", help="run the MCP server (stdio by default) and the live ingest endpoint")
    serve.add_argument("--dir", help=dir_help)
    serve.add_argument("--http", action="store_true", help="serve MCP over streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765; 0 picks a free one)")
    serve.add_argument(
        "--ingest-port",
        type=int,
        default=0,
        help="port of the WebSocket ingest endpoint (default: 0, a free one)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level of the server's log on stderr (default: info)",
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
        "--tail", type=int, default=50, help="lines of captured output per stream (default: 50)"
    )
    show.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return EXIT_USAGE
    try:
        if args.command == "serve":
            return _serve(args)
        store = Store(find_dir(args.dir, create=False), create=False)
        lookup.refresh(store)
        if args.command == "runs":
            return _runs(store, args)
        return _show(store, args)
    except StoreError as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except lookup.NotFound as exc:
        print(f"mcpdebug: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except KeyboardInterrupt:
        return 130


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from .serve import ServeConfig, run

    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("mcpdebug.ingest.websockets").setLevel(logging.WARNING)
    config = ServeConfig(
        directory=find_dir(args.dir, create=True),
        http=args.http,
        host=args.host,
        port=args.port,
        ingest_port=args.ingest_port,
    )
    try:
        anyio.run(run, config)
    except StoreError as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return 0


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _runs(store: Store, args: argparse.Namespace) -> int:
    runs = store.runs(limit=max(1, args.limit))
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(render.sessions(runs))
        return 0
    from rich.table import Table

    table = Table(title=f"Recorded runs in {store.dir}", title_justify="left")
    for column in ("run", "status", "started", "duration", "tests", "command"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            run["run_id"],
            render.status_text(run),
            render.when(run["started"]),
            render.seconds(render.run_duration(run)),
            render.counts_text(run["counts"]),
            run["label"],
        )
    _console().print(table)
    return 0


def _show(store: Store, args: argparse.Namespace) -> int:
    run = lookup.run(store, args.run)
    rid = run["run_id"]
    if args.test:
        test = lookup.test(store, run, args.test)
        phases = store.phases(rid, test["nodeid"])
        if args.json:
            print(json.dumps({"run_id": rid, **test, "phases": phases}, indent=2))
        else:
            print(render.test_detail(run, test, phases, max(0, args.tail)))
        return 0
    problems = store.problems(rid)
    errors = store.collection_errors(rid)
    tests = store.tests(rid)
    if args.json:
        print(
            json.dumps({**run, "problems": problems, "collection_errors": errors, "tests": tests}, indent=2)
        )
        return 0
    from rich.table import Table

    print(render.run_summary(run, problems, errors, [t for t in tests if t["status"] == "running"]))
    table = Table(title=f"Tests of run {rid}", title_justify="left")
    for column in ("outcome", "duration", "worker", "test", "message"):
        table.add_column(column, overflow="fold")
    styles = {"failed": "red", "error": "red", "passed": "green", "running": "yellow"}
    for t in tests:
        table.add_row(
            f"[{styles.get(t['status'], '')}]{t['status']}[/]" if t["status"] in styles else t["status"],
            render.seconds(t["duration"]),
            t["worker"],
            t["nodeid"],
            t["message"],
        )
    print()
    _console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
