"""The failing examples of a doctest, as `get_failure` shows them: where, the code, expected and got."""

from __future__ import annotations

from pytest_mcpdebug.protocol import DoctestExample

PROMPT_LINES = 30
"""Lines shown of an example's source, expected or actual output."""


def lines(examples: list[DoctestExample]) -> list[str]:
    """doctest's own layout (the example with its prompts, "Expected:", "Got:"), with where it is."""
    out: list[str] = []
    for example in examples:
        where = f"{example.file}:{example.line}" if example.line else example.file
        number = f", example {example.number} of {example.examples}" if example.number else ""
        out += ["", f"Doctest {example.name}{number}, at {where}:"]
        out += _block(example.source, prompt=True)
        out += ["  Expected:", *(_block(example.want) or ["    (nothing)"])]
        if example.exception:
            out += ["  Raised instead:", *_block(example.exception)]
        else:
            out += ["  Got:", *(_block(example.got) or ["    (nothing)"])]
    return out


def _block(text: str, prompt: bool = False) -> list[str]:
    rows = text.rstrip("\n").splitlines()
    shown = [f"    {_prompt(i) if prompt else ''}{row}" for i, row in enumerate(rows[:PROMPT_LINES])]
    if len(rows) > PROMPT_LINES:
        shown.append(f"    ... {len(rows) - PROMPT_LINES} more lines")
    return shown


def _prompt(line: int) -> str:
    return "... " if line else ">>> "
