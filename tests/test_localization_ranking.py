"""The suspects' ranking (`diagnosis.localization.rank_lines`) by its properties: coverage alone is
plain Ochiai with explicit ties; each kind of evidence breaks ties the way it says, and says so."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_mcpdebug.diagnosis.localization import Evidence, StackFrame, Verdict, rank_lines
from pytest_mcpdebug.diagnosis.ranking import ochiai
from pytest_mcpdebug.diagnosis.statements import statements

SOURCE = """\
def price(qty, unit):
    if qty >= 10:
        total = qty * unit * 0.9
        return total
    return qty * unit


def label(qty):
    name = "bulk"
    return name
"""
FILE = "/project/shop.py"


def source(file: str) -> str:
    return SOURCE if file == FILE else ""


TESTS = st.sets(st.sampled_from([f"t{i}" for i in range(8)]), max_size=8)


@given(st.dictionaries(st.integers(1, 12), TESTS, max_size=12), TESTS)
def test_coverage_alone_is_ochiai_with_explicit_ties(covers: dict[int, set[str]], failing: set[str]) -> None:
    everyone = {f"t{i}" for i in range(8)}
    passing = everyone - failing
    lines = {("/x.py", n): frozenset(t) for n, t in covers.items()}
    ranked = rank_lines(lines, failing, passing)
    measured = {t for tests in lines.values() for t in tests}
    assert {s.key for s in ranked} == {k for k, t in lines.items() if t & failing}
    for s in ranked:
        expected = ochiai(len(lines[s.key] & failing), len(lines[s.key] & passing), len(failing & measured))
        assert math.isclose(s.score, expected) and s.first <= s.position <= s.last
        assert s.why.startswith(f"ran in {s.failed}/")
    scores = [s.score for s in ranked]
    assert scores == sorted(scores, reverse=True)
    for a in ranked:  # a tie group is exactly the suspects of equal score
        assert {b.key for b in ranked if b.first == a.first} == {
            b.key for b in ranked if math.isclose(b.score, a.score)
        }


def test_statement_kinds_calls_and_branches() -> None:
    found = statements(SOURCE)
    assert found.kind(2) == "predicate" and found.kind(4) == "return" and found.kind(3) == "assignment"
    assert found.decides[2] == (3,)
    assert found.functions[3] == "price" and found.functions[9] == "label"
    assert "__ge__" in statements("x = a >= b\n").calls[1]
    assert statements("def f(:\n").kinds == {}  # does not parse: no statements


def test_evidence_breaks_ties_and_says_why() -> None:
    every = frozenset({"fail", "p1", "p2"})
    covers = {(FILE, 2): every, (FILE, 5): frozenset({"p1", "p2"}), (FILE, 9): every, (FILE, 10): every}
    covers[(FILE, 3)] = covers[(FILE, 4)] = frozenset({"fail"})
    failing, passing = {"fail"}, {"p1", "p2"}
    plain = rank_lines(covers, failing, passing)
    assert {s.key[1] for s in plain if s.first == 1} == {3, 4}  # the block only the failing test entered
    assert plain[2].first == 3 and plain[2].last == 5  # 2, 9, 10 tie on coverage alone

    ranked = rank_lines(covers, failing, passing, Evidence(source=source))
    where = {s.key[1]: s for s in ranked}
    assert where[2].score > where[9].score and "decides a block only failing tests entered" in where[2].why
    assert "a predicate" in where[2].why and "a return" in where[4].why

    stack = {"fail": [StackFrame(FILE, 10, "label"), StackFrame("/project/test_shop.py", 7, "test_label")]}
    without = {s.key[1]: s.score for s in rank_lines(covers, failing, passing, Evidence(source=source))}
    ranked = rank_lines(covers, failing, passing, Evidence(stacks=stack, source=source))
    where = {s.key[1]: s for s in ranked}
    assert where[10].score - without[10] > where[9].score - without[9] > 0  # the raise point, its function
    assert where[2].score == without[2]  # price() is not on the way
    assert "on the failing stack (the raise point)" in where[10].why
    assert "in label(), on the failing stack" in where[9].why

    verdicts = {(FILE, 9): Verdict("'>=' -> '>'", fixed=1, failing=1, broke=0, passing=2)}
    ranked = rank_lines(covers, failing, passing, Evidence(source=source, dynamic=verdicts))
    assert ranked[0].key == (FILE, 9) and ranked[0].first == ranked[0].last == 1
    assert "changing it ('>=' -> '>') made 1/1 failing tests pass, 0/2 passing ones fail" in ranked[0].why


CHAIN = """\
def first(x):
    return second(x) + 1


def second(x):
    return third(x) * 2


def third(x):
    return fourth(x) - 1


def fourth(x):
    return fifth(x)


def fifth(x):
    return x
"""
CHAIN_FILE = "/project/chain.py"


def test_calls_are_followed_down_from_the_failing_stack_a_step_farther_each() -> None:
    lines = {2: "first", 6: "second", 10: "third", 14: "fourth", 18: "fifth"}
    covers = {(CHAIN_FILE, n): frozenset({"fail", "pass"}) for n in lines}
    test_file = "/project/test_chain.py"
    stack = {"fail": [StackFrame(test_file, 4, "test_first")]}
    sources = {CHAIN_FILE: CHAIN, test_file: "def test_first():\n    x = 1\n\n    assert first(x) == 9\n"}
    ranked = rank_lines(
        covers, {"fail"}, {"pass"}, Evidence(stacks=stack, source=lambda f: sources.get(f, ""))
    )
    where = {s.key[1]: s for s in ranked}
    # the line the test's assert calls is one call away; what it calls, two; then three
    assert where[2].score > where[6].score > where[10].score > where[14].score == where[18].score
    assert "in first(), called by test_chain.py:4" in where[2].why
    assert "in second(), called by first() (chain.py:2)" in where[6].why
    assert "in third(), called by second() (chain.py:6)" in where[10].why
    assert "called by" not in where[14].why  # four calls down: beyond the calls followed (HOPS)
