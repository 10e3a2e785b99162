"""Which tools a server lists: the tool groups by name, the core set listed by default, and the
selection `mcpdebug serve --tools` and the enable_tools tool take.

Nothing here imports a tools module (or the MCP SDK): the CLI checks ``--tools`` and the server
names its groups before any of them is loaded, and a group that is never enabled is never imported.

The core set is what an agent investigating a failing or hanging test needs first (see README,
"Tools"): the runs and a run's summary, a failure's snapshot, a hang's diagnosis, a test's output
and a search through it, running tests (holding the first failure alive), evaluating in the held
test and letting it go on, and the suspects. Every other tool is one ``enable_tools`` call (or
``--tools``) away, and calling one enables its group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Group:
    module: str
    """The module of its `ToolGroup` subclass (imported when the group is first enabled)."""
    cls: str
    tools: tuple[str, ...]
    """Its tools, as its class defines them (a test checks the two agree)."""
    about: str
    """What its tools answer, in a few words (enable_tools' description, the CLI's help)."""


GROUPS: Final[dict[str, Group]] = {
    "runs": Group(
        "mcpdebug.tools.runs",
        "RunTools",
        ("list_sessions", "get_run_summary", "get_environment", "list_tests", "get_test"),
        "runs and their tests",
    ),
    "failures": Group(
        "mcpdebug.tools.failures",
        "FailureTools",
        (
            "get_failure",
            "get_stack_trace",
            "get_scopes",
            "get_variables",
            "get_local_variables",
            "get_source_context",
        ),
        "frames, scopes, variables, source",
    ),
    "hangs": Group(
        "mcpdebug.tools.hangs", "HangTools", ("get_hang", "detect_hang"), "hangs, recorded or detected"
    ),
    "live": Group(
        "mcpdebug.tools.live",
        "LiveTools",
        ("evaluate_expression", "continue_execution", "close_session", "run_tests", "wait_for_stop"),
        "running tests, held tests",
    ),
    "output": Group(
        "mcpdebug.tools.output",
        "OutputTools",
        ("get_output", "search_output", "get_logs"),
        "output, merged logs",
    ),
    "processes": Group(
        "mcpdebug.tools.processes",
        "ProcessTools",
        ("start_process", "control_process", "send_stdin"),
        "services and log sources",
    ),
    "debug": Group(
        "mcpdebug.tools.debug",
        "DebugTools",
        (
            "create_debug_session",
            "start_debugging",
            "list_debug_sessions",
            "close_debug_session",
            "set_breakpoint",
            "list_breakpoints",
            "remove_breakpoint",
            "toggle_breakpoint",
            "set_exception_breakpoints",
            "step_over",
            "step_into",
            "step_out",
            "pause_execution",
            "add_watch",
            "remove_watch",
            "list_watches",
        ),
        "debugpy: breakpoints, steps, watches",
    ),
    "diagnosis": Group(
        "mcpdebug.tools.diagnosis",
        "DiagnosisTools",
        ("get_suspects", "trace_test", "get_history", "get_test_history", "list_flaky"),
        "suspects, value histories, flakiness",
    ),
    "localize": Group(
        "mcpdebug.tools.localize",
        "LocalizeTools",
        ("localize",),
        "the faulty line, by re-running failing tests",
    ),
}
"""The tool groups by the name `mcpdebug serve --tools` and enable_tools take."""

CORE: Final[frozenset[str]] = frozenset(
    {
        "list_sessions",
        "get_run_summary",
        "get_failure",
        "get_hang",
        "get_output",
        "search_output",
        "run_tests",
        "evaluate_expression",
        "continue_execution",
        "get_suspects",
    }
)
"""The tools listed by default (with enable_tools): the first an agent needs on a failing or hanging
test."""

DEFAULT: Final = ("core",)
"""What `mcpdebug serve` lists without ``--tools``."""

CHOICES: Final = ("core", "all", *GROUPS)
"""What ``--tools`` and enable_tools take: ``core``, ``all``, or group names."""

Selection = dict[str, frozenset[str] | None]
"""Per group, the tools to list: None for the whole group."""


class SelectionError(ValueError):
    """An unknown name in a selection; the message names the valid ones."""


def select(names: Iterable[str]) -> Selection:
    """The tools ``names`` (``core``, ``all``, group names) stand for, per group."""
    chosen: Selection = {}
    given = [n.strip() for n in names if n.strip()]
    unknown = [n for n in given if n not in CHOICES]
    if unknown:
        raise SelectionError(
            f"unknown tool group {', '.join(map(repr, unknown))}; the groups are {', '.join(GROUPS)} "
            "(or core, all)"
        )
    for name in given:
        if name == "all":
            return dict.fromkeys(GROUPS)
        if name != "core":
            chosen[name] = None
            continue
        for group, about in GROUPS.items():
            core = frozenset(t for t in about.tools if t in CORE)
            if core and (group not in chosen or chosen[group] is not None):
                chosen[group] = core | (chosen.get(group) or frozenset())
    return chosen


def group_of(tool: str) -> str | None:
    """The group ``tool`` belongs to, or None for a name no group has."""
    return next((name for name, group in GROUPS.items() if tool in group.tools), None)
