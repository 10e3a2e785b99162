"""Spectrum-based fault localisation: which elements (lines, functions) failing tests ran and passing
tests did not.

For an element run by ``ef`` of the ``F`` failing tests and by ``ep`` passing tests:

- Ochiai = ef / sqrt(F * (ef + ep)), between 0 and 1; 1 for an element every failing test ran and no
  passing test did. Statement-level Ochiai is among the best single formulas on real Python bugs.
- DStar (star 2) = ef^2 / (ep + F - ef), unbounded (infinite when the denominator is 0): a second
  opinion that weighs failing tests more, used to order Ochiai's ties.

Elements no failing test ran are not suspects. Elements with equal Ochiai scores form a tie: each
gets the range of positions its group spans, so no order among them is claimed that the data
does not support.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T", bound=Hashable)
P = TypeVar("P", bound=Hashable)


def ochiai(ef: int, ep: int, failed: int) -> float:
    if ef <= 0 or failed <= 0:
        return 0.0
    return ef / math.sqrt(failed * (ef + ep))


def dstar(ef: int, ep: int, failed: int, star: int = 2) -> float:
    if ef <= 0:
        return 0.0
    denominator = ep + max(failed - ef, 0)
    return math.inf if denominator == 0 else ef**star / denominator


@dataclass(frozen=True)
class Suspect(Generic[K]):
    key: K
    failed: int
    """Failing tests that ran it (ef)."""
    passed: int
    """Passing tests that ran it (ep)."""
    ochiai: float
    dstar: float
    position: int
    """1-based place in the ranking (ties ordered by DStar, then by key)."""
    first: int
    """First and last position of its tie group (equal Ochiai): ``first == last`` when it ties with none."""
    last: int

    @property
    def tied(self) -> int:
        """How many other suspects share its score."""
        return self.last - self.first


def spectrum(covers: Mapping[K, Set[T]], failing: Set[T], passing: Set[T]) -> dict[K, tuple[int, int]]:
    """(ef, ep) of each element from the tests that ran it; tests in neither set do not count."""
    return {key: (len(tests & failing), len(tests & passing)) for key, tests in covers.items()}


def group(covers: Mapping[K, Set[T]], parent: Mapping[K, P]) -> dict[P, set[T]]:
    """Coverage of coarser elements (functions): a test ran a function if it ran any of its lines."""
    grouped: dict[P, set[T]] = {}
    for key, tests in covers.items():
        grouped.setdefault(parent[key], set()).update(tests)
    return grouped


def rank(
    counts: Mapping[K, tuple[int, int]], failed: int, order: Iterable[K] | None = None
) -> list[Suspect[K]]:
    """Every element some failing test ran, best first.

    ``order`` breaks the last ties (default: sorted keys, which must then be comparable), so the
    ranking never depends on the order of ``counts``.
    """
    keys = [k for k, (ef, _) in counts.items() if ef > 0]
    if order is None:
        keys.sort(key=_itself)
        order = keys
    place = {k: i for i, k in enumerate(order)}
    scored = [
        (
            ochiai(counts[k][0], counts[k][1], failed),
            dstar(counts[k][0], counts[k][1], failed),
            place.get(k),
            k,
        )
        for k in keys
    ]
    scored.sort(key=lambda s: (-s[0], -s[1], len(place) if s[2] is None else s[2], repr(s[3])))
    suspects: list[Suspect[K]] = []
    start = 0
    for i in range(len(scored) + 1):
        if i == len(scored) or (i > start and scored[i][0] != scored[start][0]):
            for j in range(start, i):
                score, second, _, key = scored[j]
                ef, ep = counts[key]
                suspects.append(Suspect(key, ef, ep, score, second, j + 1, start + 1, i))
            start = i
    return suspects


def _itself(key: Any) -> Any:
    return key  # keys are compared as they are (tuples of file and line)
