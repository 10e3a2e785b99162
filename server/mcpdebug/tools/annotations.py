"""A tool's annotation: which tools `--read-only` serves, and what the others say they do first."""

from __future__ import annotations

from mcp.types import ToolAnnotations

# A tool's annotation decides where it is offered: `--read-only` serves only READ_ONLY tools, and
# every other tool's description starts with what it does beyond reading (see `side_effect`).
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
CONTROLS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def side_effect(annotations: ToolAnnotations | None) -> str | None:
    """What a tool does beyond reading the store, said first in its description; None if nothing.

    Decided from the annotation alone, so a new tool is classified by how it is registered. A tool
    registered without annotations counts as running code: what is not declared safe is not offered
    as safe.
    """
    if annotations is not None and annotations.read_only_hint is True:
        return None
    if annotations is not None and annotations.destructive_hint is False:
        return "Changes a running test process"
    return "Runs code on this machine"
