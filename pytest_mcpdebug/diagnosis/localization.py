"""The suspects' ranking: which lines most likely hold the bug, each with the reason for its place.

One function (`rank_lines`) serves every reader: the server's `get_suspects` and `get_failure`, and
the plugin's short diagnosis in pytest's own output. It takes the per-test coverage and the
outcomes, plus whatever evidence the caller has:

- **coverage** (always): Ochiai over the failing and passing tests that ran each line
  (`ranking.ochiai`); lines no failing test ran are not suspects;
- **the failing stacks**: a line where the exception was raised, or a call on the way to it, is near
  the fault; so are the lines of a function on the stack, and of a function a stack line calls (the
  test's failing ``assert`` calls the code under test: those functions are one step from it);
- **statement kinds** (from the source): single-line faults sit most in conditions and returns;
- **branches**: a condition whose block only failing tests entered is as suspect as that block (the
  block is innocent when the condition let the wrong inputs in);
- **value evidence** (where a test was traced): lines the failing values were computed on;
- **the dynamic localizer's verdicts** (`localize`): lines whose small mutant made the failing
  tests pass, without breaking their passing neighbours.

Each kind of evidence adds to a line's score by a weight (`Weights`); coverage alone gives plain
Ochiai. Lines with equal scores tie (positions first-last), and each says why it ranks where it does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytest_mcpdebug.diagnosis.ranking import ochiai
from pytest_mcpdebug.diagnosis.statements import Statements, statements

Line = tuple[str, int]
"""(absolute file, line number)."""


@dataclass(frozen=True)
class StackFrame:
    """A frame of a failing test's stack, the raise point first (the test's own frames included)."""

    file: str
    line: int
    function: str = ""


@dataclass(frozen=True)
class Verdict:
    """What the dynamic localizer saw when it changed a line (`pytest_mcpdebug.localize`)."""

    mutant: str
    """The change that did best, e.g. ``"<" -> "<="``."""
    fixed: int
    """Failing tests that passed with it."""
    failing: int
    broke: int
    """Passing neighbours that failed with it."""
    passing: int
    tried: int = 1
    """Changes of the line that were run."""


@dataclass
class Evidence:
    stacks: Mapping[str, Sequence[StackFrame]] = field(default_factory=dict)
    """Failing test -> its stack, the raise point first."""
    source: Callable[[str], str] | None = None
    """A file's text (statement kinds, branches, what a line calls); None: no static evidence."""
    values: Mapping[Line, str] = field(default_factory=dict)
    """Lines a traced failing value was computed on -> how (e.g. "returned 15 to test_total")."""
    dynamic: Mapping[Line, Verdict] = field(default_factory=dict)
    """Lines the dynamic localizer changed -> what it saw."""


@dataclass(frozen=True)
class Weights:
    stack: float = 0.3
    """Times 1/(1 + distance) from the raise point, averaged over the failing tests."""
    kind: Mapping[str, float] = field(
        default_factory=lambda: {
            "predicate": 0.06,
            "return": 0.05,
            "assignment": 0.02,
            "loop": 0.02,
            "call": 0.01,
            "raise": 0.0,
            "other": 0.0,
        }
    )
    branch: float = 0.9
    """A condition gets this share of its block's Ochiai when that is above its own."""
    values: float = 0.15
    fixed: float = 2.0
    """Times the share of failing tests a change of the line made pass (less half the neighbours it broke)."""
    unfixed: float = -0.05
    """A line the localizer changed in every way it knows without any failing test passing."""


WEIGHTS: Final = Weights()
FAR: Final = 6
"""Call distances beyond this count as unrelated."""
HOPS: Final = 3
"""Calls followed down from a line of the failing stack (what it calls, what those call, ...)."""


@dataclass(frozen=True)
class Suspect:
    key: Line
    failed: int
    passed: int
    ochiai: float
    score: float
    position: int
    first: int
    last: int
    """The positions its tie group spans (equal scores)."""
    kind: str
    function: str
    why: str

    @property
    def tied(self) -> int:
        return self.last - self.first


def rank_lines(
    covers: Mapping[Line, Set[str]],
    failing: Set[str],
    passing: Set[str],
    evidence: Evidence | None = None,
    weights: Weights = WEIGHTS,
) -> list[Suspect]:
    """Every line some failing test ran, best first, each with why."""
    evidence = evidence or Evidence()
    measured = {t for tests in covers.values() for t in tests}
    failed = len(failing & measured)
    counts = {key: (len(tests & failing), len(tests & passing)) for key, tests in covers.items()}
    lines = [key for key, (ef, _) in counts.items() if ef > 0]
    parsed = _Sources(evidence.source)
    base = {key: ochiai(*counts[key], failed) for key in lines}
    distance = _distances(lines, evidence.stacks, parsed, failing & measured)
    scored: list[tuple[float, Line, str, list[str]]] = []
    for key in lines:
        ef, ep = counts[key]
        found = parsed.get(key[0])
        kind = found.kind(key[1]) if found else "other"
        score = base[key]
        why = [f"ran in {ef}/{failed} failing, {ep} passing tests (Ochiai {base[key]:.2f})"]
        lifted = _branch(key, found, base) if found else 0.0
        if lifted > base[key]:
            score += weights.branch * (lifted - base[key])
            why.append(f"decides a block only failing tests entered (Ochiai {lifted:.2f})")
        near = distance.get(key)
        if near is not None:
            score += weights.stack * near[0]
            why.append(near[1])
        if weights.kind.get(kind):
            score += weights.kind[kind]
            why.append(f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}")
        value = evidence.values.get(key)
        if value:
            score += weights.values
            why.append(value)
        verdict = evidence.dynamic.get(key)
        if verdict is not None:
            score, note = _dynamic(score, verdict, weights)
            why.append(note)
        scored.append((score, key, kind, why))
    scored.sort(key=lambda s: (-round(s[0], 9), s[1]))
    suspects: list[Suspect] = []
    start = 0
    for i in range(len(scored) + 1):
        if i == len(scored) or (i > start and round(scored[i][0], 9) != round(scored[start][0], 9)):
            for j in range(start, i):
                score, key, kind, why = scored[j]
                ef, ep = counts[key]
                found = parsed.get(key[0])
                function = found.functions.get(key[1], "<module>") if found else "<module>"
                suspects.append(
                    Suspect(
                        key, ef, ep, base[key], score, j + 1, start + 1, i, kind, function, "; ".join(why)
                    )
                )
            start = i
    return suspects


def _dynamic(score: float, verdict: Verdict, weights: Weights) -> tuple[float, str]:
    if verdict.fixed:
        share = verdict.fixed / max(verdict.failing, 1) - 0.5 * verdict.broke / max(verdict.passing, 1)
        note = f"changing it ({verdict.mutant}) made {verdict.fixed}/{verdict.failing} failing tests pass" + (
            f", {verdict.broke}/{verdict.passing} passing ones fail" if verdict.passing else ""
        )
        return score + weights.fixed * share, note
    plural = "s" if verdict.tried != 1 else ""
    return score + weights.unfixed, f"{verdict.tried} change{plural} of it left the failing tests failing"


def _branch(key: Line, found: Statements, base: Mapping[Line, float]) -> float:
    blocks = found.decides.get(key[1], ())
    return max((base.get((key[0], line), 0.0) for line in blocks), default=0.0)


def _distances(
    lines: list[Line], stacks: Mapping[str, Sequence[StackFrame]], parsed: _Sources, failing: Set[str]
) -> dict[Line, tuple[float, str]]:
    """Each line's closeness to the failures: 1/(1 + call distance from the raise point), averaged
    over the failing tests with a stack, and the reason of its best one."""
    if not stacks:
        return {}
    by_function: dict[tuple[str, str], list[Line]] = {}
    by_name: dict[str, list[tuple[str, str]]] = {}
    for key in lines:
        found = parsed.get(key[0])
        function = found.functions.get(key[1]) if found else None
        if function:
            by_function.setdefault((key[0], function), []).append(key)
    for file, function in by_function:
        parts = function.split(".")
        by_name.setdefault(parts[-1], []).append((file, function))
        if len(parts) > 1:  # Money.__init__, called as Money(...)
            by_name.setdefault(".".join(parts[-2:]), []).append((file, function))
    totals: dict[Line, float] = {}
    reasons: dict[Line, tuple[float, str]] = {}
    # in node id order: the reason kept on a tie is the same whatever order the stacks arrived in (xdist)
    tests = sorted(t for t in stacks if t in failing) or sorted(stacks)
    for test in tests:
        for key, (closeness, reason) in _closeness(stacks[test], parsed, by_function, by_name).items():
            totals[key] = totals.get(key, 0.0) + closeness
            if closeness > reasons.get(key, (0.0, ""))[0]:
                reasons[key] = (closeness, reason)
    return {key: (total / len(tests), reasons[key][1]) for key, total in totals.items()}


def _closeness(
    stack: Sequence[StackFrame],
    parsed: _Sources,
    by_function: Mapping[tuple[str, str], list[Line]],
    by_name: Mapping[str, list[tuple[str, str]]],
) -> dict[Line, tuple[float, str]]:
    """One failing test: each line's best 1/(1 + distance) from its raise point, and how."""
    best: dict[Line, tuple[float, str]] = {}

    def offer(key: Line, closeness: float, reason: str) -> None:
        if closeness > best.get(key, (0.0, ""))[0]:
            best[key] = (closeness, reason)

    for depth, frame in enumerate(stack[:FAR]):
        where = "the raise point" if depth == 0 else f"a call {depth} frame(s) out from the raise point"
        offer((frame.file, frame.line), 1 / (1 + depth), f"on the failing stack ({where})")
        found = parsed.get(frame.file)
        if found is None:
            continue
        function = found.functions.get(frame.line, "")
        for key in by_function.get((frame.file, function), ()):
            offer(key, 1 / (2 + depth), f"in {function}(), on the failing stack")
        earlier = (
            [n for n, f in found.functions.items() if f == function and n < frame.line] if function else []
        )
        reached: list[tuple[tuple[str, str], int, str]] = []
        for line in [frame.line, *sorted(earlier, reverse=True)]:
            # what the failing line calls is one call away; what the lines before it called, a little more
            steps = 1 if line == frame.line else 2
            for name in sorted(found.calls.get(line, ())):
                for target in by_name.get(name, ()):
                    if target == (frame.file, function):
                        continue
                    reason = f"in {target[1]}(), called by {Path(frame.file).name}:{line}"
                    for key in by_function[target]:
                        offer(key, 1 / (1 + depth + steps), reason)
                    reached.append((target, steps, reason))
        _called_further(reached, depth, parsed, by_function, by_name, offer)
    return best


def _called_further(
    reached: list[tuple[tuple[str, str], int, str]],
    depth: int,
    parsed: _Sources,
    by_function: Mapping[tuple[str, str], list[Line]],
    by_name: Mapping[str, list[tuple[str, str]]],
    offer: Callable[[Line, float, str], None],
) -> None:
    """What the functions a stack line called call in turn (up to `HOPS` calls on), each call one
    step farther: a failing assert's operand computed two calls down is still on the way to it."""
    seen = {target for target, _, _ in reached}
    frontier = list(reached)
    for _ in range(HOPS - 1):
        following: list[tuple[tuple[str, str], int, str]] = []
        for (file, function), steps, _ in frontier:
            found = parsed.get(file)
            if found is None:
                continue
            for key in by_function.get((file, function), ()):
                for name in sorted(found.calls.get(key[1], ())):
                    for target in by_name.get(name, ()):
                        if target in seen:
                            continue
                        seen.add(target)
                        reason = f"in {target[1]}(), called by {function}() ({Path(file).name}:{key[1]})"
                        for line in by_function[target]:
                            offer(line, 1 / (2 + depth + steps), reason)
                        following.append((target, steps + 1, reason))
        frontier = following


class _Sources:
    """Each file's statements, parsed once per ranking."""

    def __init__(self, source: Callable[[str], str] | None) -> None:
        self._source = source
        self._parsed: dict[str, Statements | None] = {}

    def get(self, file: str) -> Statements | None:
        if self._source is None:
            return None
        if file not in self._parsed:
            try:
                text = self._source(file)
            except (OSError, UnicodeDecodeError):
                text = ""
            self._parsed[file] = statements(text) if text else None
        return self._parsed[file]


def worst_place(ranked: Sequence[Suspect], key: Hashable) -> int | None:
    """Where ``key`` ranks at the end of its tie group (no luck in tie order); None: not a suspect."""
    for suspect in ranked:
        if suspect.key == key:
            return suspect.last
    return None
