"""`mcpdebug init [DIR]`: plan every change, show it, ask (on a terminal), write.

Idempotent: each part is planned from what the file holds now, so a second run finds nothing to
change and says so. Nothing is written with `--dry-run` or `--check` (which exits 1 when something
would change, for CI).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from mcpdebug.command_line import CLIENTS as CLIENT_NAMES
from mcpdebug.command_line import DEFAULT_TIMEOUT
from mcpdebug.project_init import agents_md, clients, environment, pytest_config
from mcpdebug.project_init.changes import Change, read_if_any
from pytest_mcpdebug.commands import program, shortest
from pytest_mcpdebug.folder import DIRNAME, store_in

EXIT_USAGE = 2
EXIT_PENDING = 1


def main(args: argparse.Namespace) -> int:
    project = Path(args.dir).expanduser()
    if not project.is_dir():
        return _usage(f"{project} is not a folder; give the project's folder (default: the current one)")
    project = project.resolve()
    chosen = _clients(args.clients)
    if chosen is None:
        return _usage(f"--clients takes a comma-separated list of {', '.join(CLIENT_NAMES)}, or none")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout >= 0):
        return _usage("--timeout takes seconds (0: no hang timeout)")
    try:
        config = pytest_config.locate(project)
    except pytest_config.ConfigError as exc:
        return _usage(str(exc))
    root = config.path.parent if config.exists else project
    custom = str(config.values.get("mcpdebug_dir", "")).strip()
    store = store_in(root / Path(custom).expanduser()) if custom else root / DIRNAME
    pythonpath = [str(root / p) for p in config.pythonpath()]  # pytest reads them from the config's folder
    server = environment.server_command(project, store, pythonpath)
    planned, problems = _plan(args, project, config, server, chosen)
    return _carry_out(args, project, server, planned, problems)


def _plan(
    args: argparse.Namespace,
    project: Path,
    config: pytest_config.PytestConfig,
    server: environment.ServerCommand,
    chosen: list[str],
) -> tuple[list[Change], list[str]]:
    settings = pytest_config.wanted(config, args.timeout, DEFAULT_TIMEOUT, args.coverage)
    configured = _number(config.values.get("mcpdebug_timeout"), DEFAULT_TIMEOUT)
    timeout = float(settings.get("mcpdebug_timeout", configured))
    before = read_if_any(config.path)
    what = "record every run" + (f", hang timeout {timeout:g} s" if timeout else ", no hang timeout")
    planned: list[Change] = []
    problems: list[str] = []
    try:
        planned.append(Change(config.path, before, pytest_config.render(config, settings), f"pytest: {what}"))
    except pytest_config.ConfigError as exc:
        problems.append(str(exc))
    written: list[str] = []
    for name in chosen:
        client = clients.CLIENTS[name]
        try:
            path, old, new = clients.render(project, client, server)
        except clients.ClientConfigError as exc:
            problems.append(str(exc))
            continue
        planned.append(Change(path, old, new, f"{client.title}: the mcpdebug MCP server"))
        written.append(client.path)
    if not args.no_agents_md:
        coverage = args.coverage or pytest_config.same_value(config.values.get("mcpdebug_coverage"), True)
        text = agents_md.section(_program_in(project, server), timeout, coverage, written)
        for name, create in (("AGENTS.md", True), ("CLAUDE.md", False)):
            path = project / name
            try:
                current, wanted = agents_md.render(path, text, create=create)
            except (agents_md.SectionError, OSError, UnicodeDecodeError) as exc:
                problems.append(str(exc))
                continue
            if wanted is not None:
                why = "what to run and which tool answers which question"
                planned.append(Change(path, current, wanted, why))
    return planned, problems


def _carry_out(
    args: argparse.Namespace,
    project: Path,
    server: environment.ServerCommand,
    planned: list[Change],
    problems: list[str],
) -> int:
    print(f"mcpdebug init: {project}")
    for note in server.notes:
        print(f"  {note}")
    for warning in server.warnings:
        print(f"  warning: {warning}")
    pending = [c for c in planned if c.changed]
    current = [c for c in planned if not c.changed]
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    for change in pending:
        state = "new file" if change.before is None else "changed"
        print(f"\n{change.shown_path(project)} ({state}): {change.why}")
        print(change.diff(project, color=color), end="")
    if current:
        print(f"\nUp to date: {', '.join(c.shown_path(project) for c in current)}")
    for problem in problems:
        print(f"\nmcpdebug init: {problem}", file=sys.stderr)
    failed = EXIT_PENDING if problems else 0
    if not pending:
        print("\nNothing to change: the project is ready for agents.")
        return failed
    if args.dry_run or args.check:
        what = "Dry run" if args.dry_run else "Check"
        print(f"\n{what}: nothing written ({len(pending)} file(s) would change).")
        return EXIT_PENDING if args.check else failed
    if sys.stdin.isatty() and not args.yes and not _confirm(len(pending)):
        print("Nothing written.")
        return failed
    for change in pending:
        try:
            change.write()
        except OSError as exc:
            print(f"mcpdebug init: cannot write {change.path}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
    print(f"\nWrote {', '.join(c.shown_path(project) for c in pending)}.")
    mcpdebug = _program_in(project, server)
    print(
        f"Next: run the tests as usual (`pytest`): every run is recorded; `{mcpdebug} show` shows the "
        "latest. "
        "Restart or reload your agent's client so it starts the mcpdebug server (Claude Code asks once "
        "to approve a project's .mcp.json server)."
    )
    return failed


def _confirm(count: int) -> bool:
    try:
        answer = input(f"\nWrite {'this change' if count == 1 else f'these {count} changes'}? [Y/n] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("", "y", "yes")


def _program_in(project: Path, server: environment.ServerCommand) -> str:
    """`mcpdebug` as an agent's shell in the project runs it: the project's own script by its
    relative path (works whatever is on PATH), else as `commands.program` names it."""
    command = Path(server.command)
    if command.name.startswith("mcpdebug"):
        if Path(os.path.abspath(command)).is_relative_to(project):  # not resolved: a venv's may be a link
            return shortest(command, project)
        return program("mcpdebug", project) if command == _this_script() else str(command)
    return program("mcpdebug", project)


def _this_script() -> Path | None:
    from pytest_mcpdebug.commands import script

    return script("mcpdebug")


def _clients(raw: str) -> list[str] | None:
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    if names == ["none"]:
        return []
    if not names or any(n not in CLIENT_NAMES for n in names):
        return None
    return list(dict.fromkeys(names))


def _number(raw: object, default: float) -> float:
    if raw is None or not str(raw).strip():
        return default
    try:
        return float(str(raw))
    except ValueError:
        return 0.0 if str(raw).strip().lower() in ("none", "off") else default


def _usage(message: str) -> int:
    print(f"mcpdebug init: {message}", file=sys.stderr)
    return EXIT_USAGE
