"""What the reading commands print (`mcpdebug show`, `runs`, `logs`, `tail`): the views of the MCP
tools, laid out for a terminal.

`cli` picks the command and the store; everything here only reads it. Hints name `mcpdebug`
commands (`cli.main` switches `views.calls` to the terminal's style before any of these runs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
import time
from typing import Any

from mcpdebug.names import EXIT_NOT_FOUND
from mcpdebug.store import FINAL_OUTCOMES, PROBLEM_OUTCOMES, Store, output_query
from mcpdebug.store.output_query import ErrorType, OutputError
from mcpdebug.views import calls, lookup, output_window, time_text
from mcpdebug.views import environment as environment_view
from mcpdebug.views import markdown as markdown_view
from mcpdebug.views import output as output_view
from mcpdebug.views import output_search as search_view
from mcpdebug.views import runs as runs_view


def logs(store: Store, args: argparse.Namespace) -> int:
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


def tail(store: Store, args: argparse.Namespace) -> int:
    """Print each unit's new lines as they are stored, like ``tail -f`` over every test's output."""

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
                name = output_window.describe_unit(unit["unit"])
                if run["kind"] == "process" and unit["unit"] == "":
                    name = f"process session {run['label']}"
                print(f"\n==> {name} <==")
                current = unit["id"]
            for line in view.lines(done + 1, view.total):
                prefix = (
                    "" if args.stream != "combined" or line.stream in ("stdout", "") else f"[{line.stream}] "
                )
                print(line.gap_text() if line.number is None else f"{line.number}: {prefix}{line.text}")
            printed[unit["id"]] = view.total
        sys.stdout.flush()
        ended = run["status"] != "running" and (run["kind"] != "process" or run["finished"] is not None)
        if first_look and ended:
            print(f"\n(run {rid} is {runs_view.status_text(run)}; nothing more will come)")
            return 0
        first_look = False
        if ended:  # a process session that crashed and restarts has not ended
            print(f"\n(run {rid} ended: {runs_view.status_text(run)})")
            return 0
        time.sleep(max(args.interval, 0.05))


PIPED_WIDTH = 200
"""A table's width when printed into a pipe or a file (an agent's shell, a log): rich would use 80
columns and fold every cell into several lines."""


def _console() -> Any:
    from rich.console import Console

    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(highlight=False, soft_wrap=False, width=PIPED_WIDTH if piped else None)


def runs(store: Store, args: argparse.Namespace) -> int:
    runs = store.runs(limit=max(1, args.limit))
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    width = _terminal_width()
    if not runs or (width is not None and width < 120):  # too narrow for a table: one block per run
        print(_fit(runs_view.sessions(runs), width))
        return 0
    from rich.table import Table

    table = Table(title=f"Recorded runs in {store.dir}", title_justify="left")
    for column in ("run", "started", "duration"):  # ids and times are never broken across lines
        table.add_column(column, no_wrap=True)
    for column in ("status", "tests", "command"):  # the prose gives way
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            run["run_id"],
            time_text.when(run["started"]),
            time_text.seconds(runs_view.run_duration(run)),
            runs_view.status_text(run),
            runs_view.counts_text(run["counts"]),
            run["label"],
        )
    _console().print(table)
    return 0


def show(store: Store, args: argparse.Namespace) -> int:
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
    if args.env is not None:
        print(environment_view.environment(store, run, args.env or None).text)
        return 0
    if args.markdown:
        print(markdown_view.run_markdown(store, run))
        return 0
    running = store.tests(rid, ("running",))
    width = _terminal_width()
    context = environment_view.context_lines(store, run)
    print(
        _fit(runs_view.run_summary(run, problems, errors, running, store.hangs(rid), context=context), width)
    )
    print()
    _print_tests(store, run, args, width)
    return 0


def _terminal_width() -> int | None:
    """The terminal's width when printing to one; None into a pipe or a file, where lines stay whole
    (a terminal would cut a long line anywhere, a node id included)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _fit(text: str, width: int | None) -> str:
    """Lines longer than the terminal wrapped at spaces only, so no node id or command is cut in two."""
    if width is None:
        return text
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


def _print_tests(store: Store, run: dict[str, Any], args: argparse.Namespace, width: int | None) -> None:
    """The run's tests, one a line, paged: by default the ones that did not fail (the summary has
    those), at most ``--limit`` of them (`names.SHOW_TESTS` by default), and how to see more."""
    rid = run["run_id"]
    if args.outcome:
        wanted = lookup.outcomes(args.outcome)
    else:
        wanted = [o for o in (*FINAL_OUTCOMES, "running") if o not in PROBLEM_OUTCOMES]
    offset = max(0, args.offset)
    # A page is read as such: a 100,000-test run's rows are not all made into dicts to print 50.
    shown, total = store.tests_page(rid, wanted or [], offset, None if args.all else max(1, args.limit))
    limit = total if args.all else max(1, args.limit)
    what = f"with outcome {args.outcome}" if args.outcome else "that did not fail"
    first = f"{offset + 1}-{offset + len(shown)} of " if len(shown) < total else ""
    print(f"Tests of run {rid} {what} ({first}{total}):" if total else f"No tests of run {rid} {what}.")
    for t in shown:
        print(_test_line(t, width))
    left = total - offset - len(shown)
    if left > 0:
        page = ["--offset", str(offset + len(shown)), *(["--outcome", args.outcome] if args.outcome else [])]
        more = (
            f"... {left} more: {calls.command('show', rid, *page)} for the next {min(limit, left)}, "
            f"`--all` for every one, `--outcome passed` (or skipped, xfailed, ...) to filter."
        )
        print(_fit(more, width))


def _test_line(t: dict[str, Any], width: int | None) -> str:
    """``OUTCOME  node id  duration worker - message``: the node id is never cut by the terminal's
    wrapping; when it does not fit after the outcome it starts its own line."""
    label = f"{runs_view.LABELS.get(t['status'], t['status']):8} "
    rest = f"  {time_text.seconds(t['duration'])} {t['worker'] or '-'}"
    if t["message"] and t["status"] in runs_view.WITH_MESSAGE:
        rest += f" - {t['message']}"
    if width is not None and len(label) + len(t["nodeid"]) > width:
        return f"{label.rstrip()}\n{t['nodeid']}\n  {rest.strip()}"
    return f"{label}{t['nodeid']}{rest}"
