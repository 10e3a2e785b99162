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
    exact: bool = True
    """The call returned exactly the new value (else the value was computed from what it returned)."""


@dataclass(frozen=True)
class Link:
    """One step of an explanation: ``name`` as used at a line, the change that last set it before, and
    where that value came from; ``depth`` counts calls followed. A call whose value was used without
    being assigned has no change: ``name`` is ``function()`` and ``origin`` says what it returned."""

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
    index: int = 0


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
        exactly the new value, else the last call that returned something (not None)."""
        best: tuple[bool, int, Origin] | None = None
        for number, step in self.returns.items():
            callee = self.frames[number]
            if callee.caller != change.frame.number or callee.at != change.line or step.index > change.index:
                continue
            exact = step.value == change.new
            if not exact and step.value == "None":
                continue  # __init__, a procedure: it did not produce the value
            candidate = (exact, step.index, Origin(callee, step.line, step.value, exact))
            if best is None or candidate[:2] > best[:2]:
                best = candidate
        return best[2] if best else None

    def failure(self) -> Failure | None:
        """Where the test's exception surfaced: the last raise in a frame the test's runner called."""
        for step in reversed(self.raises):
            frame = self.frames[step.frame]
            if frame.caller == -1:
                return Failure(frame, step.line, step.name, step.value, step.index)
        return None

    def raised_at(self, failure: Failure) -> Failure | None:
        """Where the failure's exception was raised, when deeper than where it surfaced."""
        first = None
        for step in reversed(self.raises):
            if step.index > failure.index:
                continue
            if step.name != failure.exception or step.value != failure.message:
                break
            first = step
        if first is None or first.frame == failure.frame.number:
            return None
        return Failure(self.frames[first.frame], first.line, first.name, first.value, first.index)

    def calls_at(self, frame: Frame, line: int, before: int) -> list[Origin]:
        """The traced calls made on ``line`` of ``frame`` (the last of each function), in call order."""
        last: dict[str, tuple[int, Origin]] = {}
        for number, step in self.returns.items():
            callee = self.frames[number]
            if callee.caller != frame.number or callee.at != line or step.index > before:
                continue
            if callee.function not in last or last[callee.function][0] < step.index:
                last[callee.function] = (step.index, Origin(callee, step.line, step.value))
        return [origin for _, origin in sorted(last.values(), key=lambda pair: pair[0])]

    def explain(
        self, frame: Frame, line: int, names: list[str], before: int, names_at: NamesAt
    ) -> list[Link]:
        """Each of ``names`` as used on ``line`` of ``frame``: where it was last set; and each traced call
        on the line whose value was used directly. Followed through returns into the functions that
        computed them, 3 calls deep."""
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
            if origin is not None:
                yield from self._follow(origin, names_at, depth, seen)
        for origin in self.calls_at(frame, line, before):
            if origin.frame.number not in seen:
                yield Link(depth, f"{origin.frame.function}()", None, origin)
                yield from self._follow(origin, names_at, depth, seen)

    def _follow(self, origin: Origin, names_at: NamesAt, depth: int, seen: set[int]) -> Iterator[Link]:
        if depth >= 3 or origin.frame.number in seen:
            return
        seen.add(origin.frame.number)
        end = self.returns[origin.frame.number].index
        operands = names_at(origin.frame.file, origin.line)
        yield from self._explain(origin.frame, origin.line, operands, end, names_at, depth + 1, seen)


def failing_value_lines(trace: Trace, names_at: NamesAt) -> dict[tuple[str, int], str]:
    """The lines a traced failing test's failing values were computed on (its failing line's operands,
    followed through the returns that produced them), each with how: evidence for the suspects."""
    values = ValueHistory(trace)
    failure = values.failure()
    if failure is None:
        return {}
    links = values.explain(
        failure.frame, failure.line, names_at(failure.frame.file, failure.line), failure.index, names_at
    )
    deeper = values.raised_at(failure)
    if deeper is not None:
        links += values.explain(
            deeper.frame, deeper.line, names_at(deeper.frame.file, deeper.line), deeper.index, names_at
        )
    found: dict[tuple[str, int], str] = {}
    for link in links:
        if link.change is not None:
            change = link.change
            found.setdefault(
                (change.frame.file, change.line),
                f"set {change.name} = {change.new[:40]} on the failing path (traced)",
            )
        if link.origin is not None:
            origin = link.origin
            found.setdefault(
                (origin.frame.file, origin.line),
                f"returned {origin.value[:40]} toward the failing line (traced)",
            )
    return found
