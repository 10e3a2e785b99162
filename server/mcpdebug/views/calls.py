"""The follow-up calls a reply names: MCP tool calls for an agent, `mcpdebug` commands in a terminal.

Views write ``call("get_output", run_id=..., test=..., start=...)`` once; the CLI switches the style
with `for_terminal()` before it renders anything, so the same view says ``get_failure(run_id="R")``
to an agent and ``mcpdebug failure R`` to a person. A terminal's commands work as pasted where the
command was typed: they name the program that runs (`.venv/bin/mcpdebug` when `mcpdebug` is not on
PATH) and carry the location flags it was given (``--dir``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class _Terminal:
    program: str
    """The shell word(s) that run `mcpdebug` here (`pytest_mcpdebug.commands.program`)."""
    location: tuple[str, ...]
    """Flags every command needs to find the same store, e.g. ``("--dir", "examples/demo")``."""


_terminal: ContextVar[_Terminal | None] = ContextVar("mcpdebug_terminal_hints", default=None)
_unlisted: ContextVar[Mapping[str, str]] = ContextVar("mcpdebug_unlisted_tools", default=MappingProxyType({}))


def for_terminal(program: str = "mcpdebug", location: Sequence[str] = ()) -> None:
    """From now on (in this context), name `mcpdebug` commands instead of MCP tools: run by
    ``program`` (already quoted for a shell), each followed by ``location``."""
    _terminal.set(_Terminal(program, tuple(location)))


def unlisted(groups: Mapping[str, str]) -> Token[Mapping[str, str]]:
    """While a tool answers: the tools its server does not list yet, each with the group that lists
    it, so that a call of one also names the enable_tools call after which the agent can make it."""
    return _unlisted.set(groups)


def listed_again(token: Token[Mapping[str, str]]) -> None:
    _unlisted.reset(token)


def location() -> tuple[str, ...]:
    """The location flags a terminal's commands carry (``--dir X``); none for an agent's calls."""
    terminal = _terminal.get()
    return terminal.location if terminal is not None else ()


def in_terminal() -> bool:
    return _terminal.get() is not None


def command(*args: str) -> str:
    """A `mcpdebug` command (``command("show", rid)``) as the terminal's hints write it, in
    backquotes: the program that runs here, then ``args``, then the location flags."""
    terminal = _terminal.get() or _Terminal("mcpdebug", ())
    return f"`{terminal.program} {shlex.join([*args, *terminal.location])}`"


def pytest_command(args: Sequence[str], cwd: str | None) -> str:
    """`pytest ARGS` as typed in a shell, after a ``cd`` into ``cwd`` when it is another folder; in
    a terminal, with the pytest of this environment (its path when the shell would not find it)."""
    from pathlib import Path

    from pytest_mcpdebug.commands import program

    folder = Path(cwd) if cwd else None
    terminal = in_terminal()
    here = Path.cwd() if terminal else None
    prefix = f"cd {shlex.quote(str(folder))} && " if folder is not None and folder != here else ""
    name = program("pytest", folder) if terminal else "pytest"
    return f"`{prefix}{name} {shlex.join(args)}`"


def call(name: str, **args: Any) -> str:
    """The call of tool ``name`` with ``args`` (None values left out), in the current style."""
    given = {k: v for k, v in args.items() if v is not None}
    if in_terminal():
        build = _COMMANDS.get(name)
        if build is not None:
            return command(*build(given)[1:])
        return f"{_tool(name, given)} (an MCP tool: {command('serve')})"
    group = _unlisted.get().get(name)
    return f'{_tool(name, given)} (after enable_tools(groups=["{group}"]))' if group else _tool(name, given)


def _tool(name: str, args: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in args.items())
    return f"{name}({shown})".replace("'", '"')


def _run_test(args: dict[str, Any]) -> list[str]:
    return [str(args.get("run_id", "latest")), *([str(args["test"])] if "test" in args else [])]


def _logs(args: dict[str, Any]) -> list[str]:
    out = ["mcpdebug", "logs", *_run_test(args)]
    if "start" in args or "end" in args:
        out.append(f"--range={args.get('start', '')}:{args.get('end', '')}")
    if "pattern" in args:
        out += ["--grep", str(args["pattern"])]
    for key, flag in (
        ("stream", "--stream"),
        ("phase", "--phase"),
        ("context", "-C"),
        ("occurrence", "--occurrence"),
    ):
        if key in args:
            out += [flag, str(args[key])]
    if args.get("ignore_case"):
        out.append("-i")
    return out


def _show(args: dict[str, Any]) -> list[str]:
    out = ["mcpdebug", "show", *_run_test(args)]
    if "outcome" in args:
        out += ["--outcome", str(args["outcome"])]
    if args.get("offset"):
        out += ["--offset", str(args["offset"])]
    if "tail_lines" in args:
        out += ["--tail", str(args["tail_lines"])]
    return out


_COMMANDS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "get_output": _logs,
    "search_output": _logs,
    "get_failure": lambda a: ["mcpdebug", "failure", *_run_test(a)],
    "get_hang": lambda a: ["mcpdebug", "failure", *_run_test(a)],
    "get_test": _show,
    "list_tests": lambda a: [*_show(a), *([] if "outcome" in a else ["--all"])],
    "get_run_summary": _show,
    "list_sessions": lambda a: ["mcpdebug", "runs"],
    "get_environment": lambda a: [
        "mcpdebug",
        "show",
        str(a.get("run_id", "latest")),
        f"--env={a['name']}" if a.get("name") else "--env",
    ],
    "localize": lambda a: [
        "mcpdebug",
        "localize",
        str(a.get("run_id", "latest")),
        *(["--budget", str(a["budget"])] if "budget" in a else []),
    ],
    "get_suspects": lambda a: [
        "mcpdebug",
        "suspects",
        str(a.get("run_id", "latest")),
        *(["--top", str(a["top"])] if "top" in a else []),
        *(["--level", str(a["level"])] if "level" in a else []),
    ],
}
