"""How a traced test's values got their state: assignments, the calls that produced them, and the
operands of the failing line traced back through the functions that computed them.

Pure over a `protocol.Trace`; the source of a line (to know its operands) comes from the caller as
``names_at(file, line)``, so nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pytest_mcpdebug.protocol import Trace, TraceStep

NamesAt = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Frame:
    number: int
    function: str
    file: str
    caller: int
    """-1: called from code that was not traced (the test function, a fixture)."""
    at: int
    """The caller's line that made the call."""
    caller_file: str = ""


@dataclass(frozen=True)
class Change:
    index: int
    frame: Frame
    line: int
    name: str
    old: str | None
    """The value before (None: the name was unset, or its earlier value was not kept)."""
    new: str
    argument: bool = False
    """Set on entry: an argument of the call."""


@dataclass(frozen=True)
class Origin:
    """A call on the changing line returned the value: the traced function, its return line and value."""

    frame: Frame
    line: int
    value: str


@dataclass(frozen=True)
class Link:
    """One step of an explanation: ``name`` as used at a line, the change that last set it before, and
    where that value came from; ``depth`` counts calls followed."""

    depth: int
    name: str
    change: Change | None
    origin: Origin | None


@dataclass(frozen=True)
class Failure:
    frame: Frame
    line: int
    exception: str
    message: str


class ValueHistory:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.frames: dict[int, Frame] = {}
        self.changes: list[Change] = []
        self.returns: dict[int, TraceStep] = {}
        self.raises: list[TraceStep] = []
        last: dict[tuple[int, str], str] = {}
        entered: dict[int, int] = {}  # frame -> index of its call step
        for step in trace.steps:
            frame = self._frame(step)
            if step.kind == "call":
                entered[step.frame] = step.index
            elif step.kind == "set":
                key = (step.frame, step.name)
                argument = entered.get(step.frame) == step.index and key not in last
                self.changes.append(
                    Change(step.index, frame, step.line, step.name, last.get(key), step.value, argument)
                )
                last[key] = step.value
            elif step.kind == "return":
                self.returns[step.frame] = step
            elif step.kind == "raise":
                self.raises.append(step)

    def _frame(self, step: TraceStep) -> Frame:
        found = self.frames.get(step.frame)
        if found is None or step.kind == "call":
            found = self.frames[step.frame] = Frame(
                step.frame,
                self.trace.functions[step.function] if step.function < len(self.trace.functions) else "?",
                self.trace.files[step.file] if step.file < len(self.trace.files) else "?",
                step.caller if step.kind == "call" else -1,
                step.at if step.kind == "call" else 0,
                self.frames[step.caller].file if step.kind == "call" and step.caller in self.frames else "",
            )
        return found

    # Questions ----------------------------------------------------------------------------------------

    def of_name(self, name: str) -> list[Change]:
        return [c for c in self.changes if c.name == name]

    def names(self) -> list[str]:
        return sorted({c.name for c in self.changes})

    def last_set(self, frame: int, name: str, before: int) -> Change | None:
        found = None
        for change in self.changes:
            if change.index > before:
                break
            if change.frame.number == frame and change.name == name:
                found = change
        return found

    def origin(self, change: Change) -> Origin | None:
        """The traced call on the change's line whose return gave the value: the last call returning
        exactly the new value, else the last call on that line."""
        candidates = [
            (step.value == change.new, step.index, Origin(self.frames[number], step.line, step.value))
            for number, step in self.returns.items()
            if self.frames[number].caller == change.frame.number
            and self.frames[number].at == change.line
            and step.index <= change.index
        ]
        return max(candidates, key=lambda c: (c[0], c[1]))[2] if candidates else None

    def failure(self) -> Failure | None:
        """Where the test's exception surfaced: the last raise in a frame the test's runner called."""
        for step in reversed(self.raises):
            frame = self.frames[step.frame]
            if frame.caller == -1:
                return Failure(frame, step.line, step.name, step.value)
        return None

    def explain(
        self, frame: Frame, line: int, names: list[str], before: int, names_at: NamesAt
    ) -> list[Link]:
        """Each of ``names`` as used on ``line`` of ``frame``: where it was last set, and (following
        returns into called functions, 3 calls deep) where the values it was computed from were set."""
        return list(self._explain(frame, line, names, before, names_at, 0, set()))

    def _explain(
        self,
        frame: Frame,
        line: int,
        names: list[str],
        before: int,
        names_at: NamesAt,
        depth: int,
        seen: set[int],
    ) -> Iterator[Link]:
        for name in names:
            change = self.last_set(frame.number, name, before)
            if change is None:
                continue
            origin = self.origin(change)
            yield Link(depth, name, change, origin)
            if origin is None or depth >= 3 or origin.frame.number in seen:
                continue
            seen.add(origin.frame.number)
            end = self.returns[origin.frame.number].index
            operands = names_at(origin.frame.file, origin.line)
            yield from self._explain(origin.frame, origin.line, operands, end, names_at, depth + 1, seen)
