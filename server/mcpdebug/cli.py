"""The `mcpdebug` command: serve the MCP server, or read the store from a terminal.

CLI → config → server, as uvicorn does it: a start-up failure is one clear line on stderr and an
exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from mcpdebug.store import FINAL_OUTCOMES, PROBLEM_OUTCOMES, Store, StoreError, output_query
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import calls, lookup, output_window
from mcpdebug.views import hang as hang_view
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view
from mcpdebug.views import runs as runs_view
from pytest_mcpdebug import __version__, limits
from pytest_mcpdebug.folder import DIRNAME, find_store, store_in

EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
SHOW_TESTS = 50
"""Tests `mcpdebug show` lists besides the failures, unless asked for more."""


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
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765; 0 picks a free one)")
    serve.add_argument(
        "--ingest-port",
        type=int,
        default=0,
        help="port of the WebSocket ingest endpoint (default: 0, a free one)",
    )
    serve.add_argument(
        "--tools",
        metavar="GROUPS",
        help="list only these tool groups, comma-separated: runs, failures, hangs, live, output "
        "(default: all)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level of the server's log on stderr (default: info)",
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
        "--limit", type=int, default=SHOW_TESTS, help=f"most tests to list (default: {SHOW_TESTS})"
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(_glue_negative_range(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        _parser().print_help()
        return EXIT_USAGE
    try:
        if args.command == "serve":
            return _serve(args)
        calls.for_terminal()
        directory = find_dir(args.dir, create=False)
        store = Store(directory, create=False, limits=_limits(args, directory))
        lookup.refresh(store)
        if args.command == "runs":
            return _runs(store, args)
        if args.command == "logs":
            return _logs(store, args)
        if args.command == "tail":
            return _tail(store, args)
        if args.command == "failure":
            print(hang_view.failure_or_hang(store, lookup.run(store, args.run), args.test).text)
            return 0
        return _show(store, args)
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


def _serve(args: argparse.Namespace) -> int:
    import anyio

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
    )
    try:
        anyio.run(run, config)
    except StoreError as exc:
        print(f"mcpdebug serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return 0


def _limits(args: argparse.Namespace, directory: Path) -> limits.Limits:
    """Limits from the serve flags, the environment and the project's pyproject.toml."""
    cli = {name: getattr(args, name, None) for name in limits.SPECS}
    return limits.load(cli=cli, env=os.environ, pyproject=directory.parent / "pyproject.toml")


def _logs(store: Store, args: argparse.Namespace) -> int:
    run = lookup.run(store, args.run)
    if args.grep is not None:
        found = search_view.search_output(
            store,
            run,
            args.grep,
            args.test,
            stream=args.stream,
            context=args.context,
            occurrence=args.occurrence,
            ignore_case=args.ignore_case,
            max_results=args.max_results,
        )
        print(found.render())
        return 0 if found.total else EXIT_NOT_FOUND
    start, end = _parse_range(args.range)
    print(
        output_view.get_output(
            store,
            run,
            args.test,
            stream=args.stream,
            phase=args.phase,
            start=start,
            end=end,
            line_numbers=not args.no_line_numbers,
        ).text
    )
    return 0


def _glue_negative_range(argv: list[str]) -> list[str]:
    """``--range -50:-1`` would read as an unknown option to argparse: pass it as ``--range=-50:-1``."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--range":
            value = next(args, None)
            out.append(arg if value is None else f"--range={value}")
        else:
            out.append(arg)
    return out


def _parse_range(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    head, sep, tail = text.partition(":")
    try:
        start = int(head) if head.strip() else None
        end = int(tail) if tail.strip() else None
    except ValueError:
        raise OutputError(
            ErrorType.INVALID_RANGE, f"--range {text!r} is not START:END; e.g. 1:100, -50:-1 or 10:-10"
        ) from None
    if not sep:
        end = start
    return start, end


def _tail(store: Store, args: argparse.Namespace) -> int:
    """Print each unit's new lines as they are stored, like ``tail -f`` over every test's output."""
    import time

    run = lookup.run(store, args.run)
    rid = run["run_id"]
    printed: dict[int, int] = {}
    current: int | None = None
    first_look = True
    while True:
        lookup.refresh(store)
        run = store.run(rid) or run
        for unit in output_query.units(store.db, rid):
            view = output_query.build_view(store.outputs, store.db, rid, unit, stream=args.stream)
            done = printed.get(unit["id"], 0)
            if first_look:
                done = max(view.total - args.lines, 0) if unit is not None else 0
            if view.total <= done:
                printed[unit["id"]] = done
                continue
            if current != unit["id"]:
                print(f"\n==> {output_window.describe_unit(unit['unit'])} <==")
                current = unit["id"]
            for line in view.lines(done + 1, view.total):
                prefix = (
                    "" if args.stream != "combined" or line.stream in ("stdout", "") else f"[{line.stream}] "
                )
                print(line.gap_text() if line.number is None else f"{line.number}: {prefix}{line.text}")
            printed[unit["id"]] = view.total
        sys.stdout.flush()
        if first_look and run["status"] != "running":
            print(f"\n(run {rid} is {runs_view.status_text(run)}; nothing more will come)")
            return 0
        first_look = False
        if run["status"] != "running":
            print(f"\n(run {rid} ended: {runs_view.status_text(run)})")
            return 0
        time.sleep(max(args.interval, 0.05))


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _runs(store: Store, args: argparse.Namespace) -> int:
    runs = store.runs(limit=max(1, args.limit))
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(runs_view.sessions(runs))
        return 0
    from rich.table import Table

    table = Table(title=f"Recorded runs in {store.dir}", title_justify="left")
    for column in ("run", "status", "started", "duration", "tests", "command"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            run["run_id"],
            runs_view.status_text(run),
            runs_view.when(run["started"]),
            runs_view.seconds(runs_view.run_duration(run)),
            runs_view.counts_text(run["counts"]),
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
            output = output_view.output_tail(store, run, test["nodeid"], max(0, args.tail))
            print(runs_view.test_detail(run, test, phases, output).text)
        return 0
    problems = store.problems(rid)
    errors = store.collection_errors(rid)
    if args.json:
        tests = store.tests(rid, lookup.outcomes(args.outcome))
        print(
            json.dumps({**run, "problems": problems, "collection_errors": errors, "tests": tests}, indent=2)
        )
        return 0
    running = store.tests(rid, ("running",))
    width = shutil.get_terminal_size((120, 24)).columns
    print(_fit(runs_view.run_summary(run, problems, errors, running, store.hangs(rid)), width))
    print()
    _print_tests(store, run, args, width)
    return 0


def _fit(text: str, width: int) -> str:
    """Lines longer than the terminal wrapped at spaces only, so no node id or command is cut in two."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        out += textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        )
    return "\n".join(out)


def _print_tests(store: Store, run: dict[str, Any], args: argparse.Namespace, width: int) -> None:
    """The run's tests, one a line, paged: by default the ones that did not fail (the summary has
    those), at most `SHOW_TESTS` of them, and how to see more."""
    rid = run["run_id"]
    if args.outcome:
        wanted = lookup.outcomes(args.outcome)
    else:
        wanted = [o for o in (*FINAL_OUTCOMES, "running") if o not in PROBLEM_OUTCOMES]
    tests = store.tests(rid, wanted)
    limit = len(tests) if args.all else max(1, args.limit)
    offset = max(0, args.offset)
    shown = tests[offset : offset + limit]
    what = f"with outcome {args.outcome}" if args.outcome else "that did not fail"
    first = f"{offset + 1}-{offset + len(shown)} of " if len(shown) < len(tests) else ""
    print(f"Tests of run {rid} {what} ({first}{len(tests)}):" if tests else f"No tests of run {rid} {what}.")
    for t in shown:
        print(_test_line(t, width))
    left = len(tests) - offset - len(shown)
    if left > 0:
        page = f"--offset {offset + len(shown)}" + (f" --outcome {args.outcome}" if args.outcome else "")
        more = (
            f"... {left} more: `mcpdebug show {rid} {page}` for the next {min(limit, left)}, "
            f"`--all` for every one, `--outcome passed` (or skipped, xfailed, ...) to filter."
        )
        print(_fit(more, width))


def _test_line(t: dict[str, Any], width: int) -> str:
    """``OUTCOME  node id  duration worker - message``: the node id is never cut by the terminal's
    wrapping; when it does not fit after the outcome it starts its own line."""
    label = f"{runs_view.LABELS.get(t['status'], t['status']):8} "
    rest = f"  {runs_view.seconds(t['duration'])} {t['worker'] or '-'}"
    if t["message"] and t["status"] in runs_view.WITH_MESSAGE:
        rest += f" - {t['message']}"
    if len(label) + len(t["nodeid"]) > width:
        return f"{label.rstrip()}\n{t['nodeid']}\n  {rest.strip()}"
    return f"{label}{t['nodeid']}{rest}"


if __name__ == "__main__":
    sys.exit(main())
