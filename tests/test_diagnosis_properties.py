"""Properties of the pure diagnosis parts: the suspects ranking, flaky verdicts and value traces."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_mcpdebug.diagnosis import ranking
from pytest_mcpdebug.diagnosis.flaky import Entry, classify, flaky_tests
from pytest_mcpdebug.diagnosis.values import ValueHistory
from pytest_mcpdebug.tracing.recorder import ValueRecorder

TESTS = [f"t{i}" for i in range(12)]
lines = st.tuples(st.sampled_from(["a.py", "b.py"]), st.integers(1, 40))
coverage = st.dictionaries(lines, st.frozensets(st.sampled_from(TESTS), min_size=1), max_size=40)
outcomes = st.dictionaries(st.sampled_from(TESTS), st.sampled_from(["failed", "passed"]), min_size=1)


def spectrum_of(covers, results):
    failing = {t for t, o in results.items() if o == "failed"}
    passing = {t for t, o in results.items() if o == "passed"}
    return ranking.spectrum(covers, failing, passing), len(failing)


@given(coverage, outcomes)
def test_ranking_is_ordered_with_explicit_ties(covers, results) -> None:
    counts, failed = spectrum_of(covers, results)
    ranked = ranking.rank(counts, failed)
    # every element a failing test ran, and only those
    assert {s.key for s in ranked} == {k for k, (ef, _) in counts.items() if ef > 0}
    assert [s.position for s in ranked] == list(range(1, len(ranked) + 1))
    for s in ranked:
        assert 0 < s.ochiai <= 1
        assert s.first <= s.position <= s.last
        assert (s.failed, s.passed) == counts[s.key]
    for before, after in itertools.pairwise(ranked):
        assert before.ochiai >= after.ochiai
        if before.ochiai == after.ochiai:  # a tie: one group, ordered by DStar
            assert (before.first, before.last) == (after.first, after.last)
            assert before.dstar >= after.dstar
        else:
            assert before.last == before.position and after.first == after.position


@given(coverage, outcomes, st.randoms())
def test_ranking_does_not_depend_on_input_order(covers, results, random) -> None:
    counts, failed = spectrum_of(covers, results)
    shuffled = list(counts.items())
    random.shuffle(shuffled)
    assert ranking.rank(counts, failed) == ranking.rank(dict(shuffled), failed)


@given(st.integers(1, 50), st.integers(0, 50), st.integers(0, 50), st.integers(1, 50))
def test_scores_grow_with_failing_runs_and_shrink_with_passing_ones(ef, ep, more, failed) -> None:
    ef = min(ef, failed)
    assert ranking.ochiai(ef, ep + more, failed) <= ranking.ochiai(ef, ep, failed)
    assert ranking.dstar(ef, ep + more, failed) <= ranking.dstar(ef, ep, failed)
    if ef < failed:
        assert ranking.ochiai(ef + 1, ep, failed) >= ranking.ochiai(ef, ep, failed)
        assert ranking.dstar(ef + 1, ep, failed) >= ranking.dstar(ef, ep, failed)
    assert ranking.ochiai(failed, 0, failed) == 1.0
    assert math.isinf(ranking.dstar(failed, 0, failed))


@given(coverage, outcomes)
def test_a_line_only_and_always_failing_tests_ran_ranks_first(covers, results) -> None:
    failing = frozenset(t for t, o in results.items() if o == "failed")
    if not failing:
        return
    covers = {**covers, ("bug.py", 1): failing}
    counts, failed = spectrum_of(covers, results)
    top = ranking.rank(counts, failed)[0]
    assert top.ochiai == 1.0 and top.first == 1
    assert ("bug.py", 1) in {s.key for s in ranking.rank(counts, failed) if s.first == 1}


@given(coverage, outcomes)
def test_a_function_ran_whenever_one_of_its_lines_ran(covers, results) -> None:
    owner = {key: (key[0], key[1] // 10) for key in covers}  # "functions" of ten lines
    grouped = ranking.group(covers, owner)
    counts, _ = spectrum_of(covers, results)
    by_function, _ = spectrum_of(grouped, results)
    for key, (ef, ep) in counts.items():
        fef, fep = by_function[owner[key]]
        assert fef >= ef and fep >= ep


# Flaky verdicts ------------------------------------------------------------------------------------

runs = st.lists(
    st.tuples(st.sampled_from(["passed", "failed"]), st.sampled_from(["c1", "c2", ""])),
    min_size=1,
    max_size=12,
)


def entries(history):
    return [
        Entry(run_id=f"r{i}", finished=float(i), outcome=o, commit=c, nodeid="t")
        for i, (o, c) in enumerate(history)
    ]


@given(runs)
def test_verdicts_follow_the_history(history) -> None:
    *earlier, current = entries([*history, ("failed", history[-1][1])])
    verdict = classify(current, list(reversed(earlier)))
    same_code_pass = current.commit and any(e.passed and e.commit == current.commit for e in earlier)
    if same_code_pass:
        assert verdict.kind == "flaky"
    elif not earlier:
        assert verdict.kind == "first"
    elif earlier[-1].passed:
        assert verdict.kind == "new" and verdict.last_pass == earlier[-1]
        assert f"after {verdict.passes_before} pass" in verdict.text
    else:
        assert verdict.kind == "failing" and verdict.since is not None and verdict.since.failed


@given(runs)
def test_flaky_means_passed_and_failed_on_one_known_version(history) -> None:
    found = {f.nodeid: f for f in flaky_tests(entries(history))}
    versions = {c for _, c in history if c}
    flaky = any({"passed", "failed"} <= {o for o, c2 in history if c2 == c} for c in versions)
    assert ("t" in found and found["t"].versioned) == flaky


# Value traces -------------------------------------------------------------------------------------


def _traced(fn, *args, **options):
    import sys

    from pytest_mcpdebug.tracing.backends import SettraceBackend

    recorder = ValueRecorder(backend="test", **options)
    backend = SettraceBackend(recorder)
    previous = sys.gettrace()
    backend.start()
    try:
        fn(*args)
    finally:
        backend.stop()
        sys.settrace(previous)
    return recorder.result()


def _count(n):
    total = 0
    for i in range(n):
        total += i
    return total


def _caller():
    value = _count(4)
    return value + 1


def test_trace_keeps_its_head_and_tail_and_counts_the_rest() -> None:
    trace = _traced(_count, 1000, max_steps=50, head=20)
    assert len(trace.steps) == 50 and trace.head == 20
    assert trace.dropped > 1500  # two changes a line (i, total) over 1000 turns, less what was kept
    assert trace.steps[0].kind == "call"
    assert trace.steps[-1].kind == "return" and trace.steps[-1].value == "499500"
    assert trace.lines >= 2000


def test_a_value_is_traced_back_to_the_return_that_produced_it() -> None:
    trace = _traced(_caller)
    history = ValueHistory(trace)
    (value,) = history.of_name("value")
    assert value.new == "6" and value.old is None
    origin = history.origin(value)
    assert origin is not None and origin.frame.function == "_count" and origin.value == "6"
    totals = [c.new for c in history.of_name("total")]
    assert totals == ["0", "1", "3", "6"]  # 0 + 0 is no change
