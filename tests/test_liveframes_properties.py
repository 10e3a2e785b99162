"""Live frames (`liveframes`) on real frames: seed 001's property 8 and the variables a held test shows.

Every example raises a real exception through a real test-like function and a helper, takes the
frames from its traceback as the inspector does (`failure_frames`, innermost first), and asks
`LiveFrames.handle` what an agent would. References are computed by running the same code in a
real function with the same locals, i.e. what executing it at that point would give.
"""

from __future__ import annotations

import copy
import functools
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_mcpdebug.failures.live_frames import (
    GLOBALS_BASE,
    LOCALS_BASE,
    RESULT_CHARS,
    EvaluationTimeout,
    InspectError,
    LiveFrames,
    run_limited,
)
from pytest_mcpdebug.failures.snapshot import failure_frames
from pytest_mcpdebug.values import REDACTED, is_secret, render

PARAMS = ("a", "b", "xs", "d", "s", "flag")
TEST_FRAME, HELPER_FRAME = 1, 0


class Stop(Exception):
    pass


def held_test(a: Any, b: Any, xs: Any, d: Any, s: Any, flag: Any, inner: dict[str, Any]) -> None:
    def peek() -> Any:  # b becomes a cell: writes must reach closures too
        return b

    helper(**inner)
    peek()


def helper(a: Any, b: Any, xs: Any, d: Any, s: Any, flag: Any) -> None:
    raise Stop("held here")


def held(test: Any, *args: Any, **kwargs: Any) -> LiveFrames:
    """The live frames of the failure ``test(...)`` raises, taken as the inspector takes them."""
    try:
        test(*args, **kwargs)
    except Stop as exc:
        entries, _ = failure_frames(exc.__traceback__, test.__code__)
    frames = list(reversed(entries))  # innermost first
    return LiveFrames(frames, test_frame=len(frames) - 1)


def hold(outer: dict[str, Any], inner: dict[str, Any]) -> LiveFrames:
    """A failure raised in `helper` (frame 0) called from `held_test` (frame 1)."""
    frames = held(held_test, **outer, inner=inner)
    assert [f.f_code.co_name for f, _ in frames.frames] == ["helper", "held_test"]
    return frames


# Values and typed expressions over them ------------------------------------------------------------

ints = st.integers(-50, 50)
keys = st.text("xyzw", min_size=1, max_size=3)  # never a secret-looking word: reprs are not redacted
frame_values = st.fixed_dictionaries(
    {
        "a": ints,
        "b": ints,
        "xs": st.lists(ints, max_size=6),
        "d": st.dictionaries(keys, ints, max_size=5),
        "s": keys,
        "flag": st.booleans(),
    }
)


def fmt(template: str, *parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(*parts).map(lambda p: template.format(*p))


@functools.cache
def int_expr(depth: int) -> st.SearchStrategy[str]:
    atoms = st.one_of(
        st.sampled_from(["a", "b", "len(xs)", "len(d)", "len(s)", "sum(xs)", "d.get(s, a)"]),
        ints.map(str),
    )
    if depth == 0:
        return atoms
    i, b, lst, dct = int_expr(depth - 1), bool_expr(depth - 1), list_expr(depth - 1), dict_expr(depth - 1)
    ops = st.sampled_from(["+", "-", "*", "//", "%"])
    return st.one_of(
        atoms,
        fmt("({} {} {})", i, ops, i),
        fmt("sum(x * {} for x in {})", i, lst),  # a generator expression reading the frame's locals
        fmt("len({})", lst),
        fmt("({} if {} else {})", i, b, i),
        fmt("max({}, default={})", lst, i),
        fmt("(lambda y: y + {})({})", i, i),
        fmt("{}[{}]", lst, i),  # IndexError sometimes
        fmt("{}[s]", dct),  # KeyError sometimes
        fmt("sum({}.values())", dct),
    )


@functools.cache
def bool_expr(depth: int) -> st.SearchStrategy[str]:
    atoms = st.sampled_from(["flag", "True", "(a < b)", "(s in d)", "(not xs)"])
    if depth == 0:
        return atoms
    i, b, lst, dct = int_expr(depth - 1), bool_expr(depth - 1), list_expr(depth - 1), dict_expr(depth - 1)
    return st.one_of(
        atoms,
        fmt("({} {} {})", i, st.sampled_from(["<", "<=", "==", "!=", ">", ">="]), i),
        fmt("(not {})", b),
        fmt("({} {} {})", b, st.sampled_from(["and", "or"]), b),
        fmt("({} in {})", i, lst),
        fmt("any(x > {} for x in {})", i, lst),
        fmt("all(v != {} for v in {}.values())", i, dct),
    )


@functools.cache
def list_expr(depth: int) -> st.SearchStrategy[str]:
    atoms = st.sampled_from(["xs", "[]", "sorted(xs)", "list(d.values())", "[a, b]"])
    if depth == 0:
        return atoms
    i, b, lst, dct = int_expr(depth - 1), bool_expr(depth - 1), list_expr(depth - 1), dict_expr(depth - 1)
    return st.one_of(
        atoms,
        fmt("[x + {} for x in {}]", i, lst),
        fmt("[x for x in {} if x > {}]", lst, i),
        fmt("({} + {})", lst, lst),
        fmt("{}[::-1]", lst),
        fmt("sorted({}, reverse={})", lst, b),
        fmt("[{}, {}]", i, i),
        fmt("[{}[k] for k in sorted({}) if k < s]", dct, dct),
        fmt("list(range({} % 5))", i),
        fmt("[y * {} for y in {} for _ in range(2)]", i, lst),
        fmt("list(x - a for x in {})", lst),
    )


@functools.cache
def dict_expr(depth: int) -> st.SearchStrategy[str]:
    atoms = st.sampled_from(["d", "{}", "dict(d)", "{s: a}"])
    if depth == 0:
        return atoms
    i, lst, dct = int_expr(depth - 1), list_expr(depth - 1), dict_expr(depth - 1)
    return st.one_of(
        atoms,
        fmt("{{k: v * {} for k, v in {}.items()}}", i, dct),
        fmt("{{**{}, s: {}}}", dct, i),
        fmt("{{k: v for k, v in {}.items() if v > {}}}", dct, i),
        fmt("dict(zip(sorted({}), {}))", dct, lst),
        fmt("{{s + k: {} for k in {}}}", i, dct),
    )


expressions = st.one_of(
    int_expr(3), bool_expr(3), list_expr(3), dict_expr(3), fmt("{{x % 3 for x in {}}}", list_expr(2))
)


def reference(source: str, values: dict[str, Any]) -> tuple[str, ...]:
    """What running ``source`` as code of a function with these locals gives: (ok, repr, type) or
    (error, exception type)."""
    scope: dict[str, Any] = {}
    exec(f"def reference({', '.join(PARAMS)}):\n    return ({source})\n", scope)
    try:
        value = scope["reference"](**copy.deepcopy(values))
    except Exception as exc:
        return ("error", type(exc).__name__)
    return ("ok", repr(value), type(value).__qualname__)


def live(frames: LiveFrames, source: str, frame_id: int | None = None) -> tuple[str, ...]:
    try:
        reply = frames.handle("evaluate", {"expression": source, "frame_id": frame_id})
    except InspectError as exc:
        return ("error", error_type(str(exc)))
    return ("ok", reply["result"], reply["type"])


def error_type(message: str) -> str:
    """The exception type named on the last line of an error reply's traceback."""
    assert message.startswith(("Error: Traceback", "Name not found: Traceback")), message
    assert "liveframes.py" not in message  # the traceback starts in the agent's code
    return message.strip().splitlines()[-1].split(":")[0]


@settings(max_examples=200, deadline=None)
@given(outer=frame_values, inner=frame_values, source=expressions, frame_id=st.sampled_from([None, 0, 1]))
def test_property_8_evaluating_an_expression_gives_what_running_it_there_would(
    outer: dict[str, Any], inner: dict[str, Any], source: str, frame_id: int | None
) -> None:
    """Property 8: Expression evaluation correctness. For any valid expression and paused process,
    evaluating it in the current context gives what executing it at that point would: the same value
    (repr and type) or the same exception type, in the frame asked for (default: the test's), with
    comprehensions, generator expressions and lambdas seeing that frame's locals."""
    values = inner if frame_id == HELPER_FRAME else outer
    expected = reference(source, values)
    frames = hold(outer, inner)
    got = live(frames, source, frame_id)
    if expected[0] == "ok" and len(expected[1]) > RESULT_CHARS:
        assert got[1].startswith(expected[1][:RESULT_CHARS]) and got[2] == expected[2]
    else:
        assert got == expected
    assert live(frames, source, frame_id) == got  # pure expressions change nothing


# Statements ----------------------------------------------------------------------------------------

statements = st.one_of(
    fmt("a = {}", int_expr(2)),
    fmt("b = {}", int_expr(2)),
    fmt("a += {}", int_expr(1)),
    fmt("xs = {}", list_expr(2)),
    fmt("xs.append({})", int_expr(1)),
    fmt("xs += {}", list_expr(1)),
    fmt("d = {}", dict_expr(2)),
    fmt("d[s] = {}", int_expr(1)),
    fmt("flag = {}", bool_expr(2)),
    fmt("fresh_n = {}", int_expr(2)),
    fmt("fresh_l = [v for v in {} if v != a]", list_expr(1)),
)


def reference_state(source: str, values: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The locals after running ``source`` in a function with these locals (as far as it got)."""
    scope: dict[str, Any] = {}
    body = "\n".join(f"        {line}" for line in source.splitlines())
    exec(
        f"def reference({', '.join(PARAMS)}):\n    try:\n{body}\n    except Exception as exc_:\n"
        "        return locals(), type(exc_).__name__\n    return locals(), None\n",
        scope,
    )
    state, error = scope["reference"](**copy.deepcopy(values))
    return {k: v for k, v in state.items() if k != "exc_"}, error


@settings(max_examples=150, deadline=None)
@given(
    outer=frame_values,
    inner=frame_values,
    lines=st.lists(statements, min_size=1, max_size=4),
    frame_id=st.sampled_from([0, 1]),
)
def test_property_8_assignments_are_written_back_to_the_frame(
    outer: dict[str, Any], inner: dict[str, Any], lines: list[str], frame_id: int
) -> None:
    """Property 8 (statements): for any statements run in a held frame, the frame's locals afterwards
    are those the same statements would leave there (also when one of them raises part-way): a later
    evaluate sees them, `frame.f_locals` sees them, a closure over a rebound local sees the new
    value, and the other frame is untouched."""
    source = "\n".join(lines)
    values, other = (inner, outer) if frame_id == HELPER_FRAME else (outer, inner)
    expected, error = reference_state(source, values)
    frames = hold(copy.deepcopy(outer), copy.deepcopy(inner))
    got = live(frames, source, frame_id)
    assert got == (("error", error) if error else ("ok", "None", "NoneType"))
    frame = frames.frames[frame_id][0]
    for name, value in expected.items():
        assert frame.f_locals[name] == value, name
        assert live(frames, name, frame_id) == ("ok", repr(value), type(value).__qualname__)
    if frame_id == TEST_FRAME:
        assert live(frames, "peek()", frame_id) == ("ok", repr(expected["b"]), "int")
    other_frame = frames.frames[1 - frame_id][0]
    assert {name: other_frame.f_locals[name] for name in PARAMS} == other


# Exceptions ----------------------------------------------------------------------------------------

failing = st.sampled_from(
    [
        ("1 // (a - a)", "ZeroDivisionError"),
        ("xs[len(xs) + 3]", "IndexError"),
        ("d[s + 'q']", "KeyError"),
        ("int(s + '!')", "ValueError"),
        ("a + s", "TypeError"),
        ("undefined_name_q", "NameError"),
        ("{}.popitem()", "KeyError"),
        ("next(iter(xs[len(xs):]))", "StopIteration"),
        ("getattr(xs, 'no_such_attr')", "AttributeError"),
    ]
)
contexts = st.sampled_from(
    ["{}", "[{} for _ in range(1)]", "(a + {})", "(lambda: {})()", "sum({} for _ in [0])", "{{s: {}}}"]
)


@settings(max_examples=150, deadline=None)
@given(
    values=frame_values,
    case=failing,
    context=contexts,
    before=st.lists(statements, max_size=2),
    as_statement=st.booleans(),
)
def test_property_8_exceptions_come_back_as_errors_naming_their_type(
    values: dict[str, Any], case: tuple[str, str], context: str, before: list[str], as_statement: bool
) -> None:
    """Property 8 (exceptions): for any code that raises, evaluate answers with an InspectError whose
    traceback names the exception's type (NameError as "Name not found"), starts in the agent's code,
    and the held frame still answers afterwards."""
    raising, kind = case
    expression = context.format(raising)
    code = "\n".join([*before, f"result_q = {expression}" if as_statement else expression])
    _, error = reference_state(code, values)
    frames = hold(copy.deepcopy(values), copy.deepcopy(values))
    with pytest.raises(InspectError) as info:
        frames.handle("evaluate", {"expression": code})
    message = str(info.value)
    assert error_type(message) == error
    if error == kind == "NameError":
        assert message.startswith("Name not found: ")
    assert frames.handle("evaluate", {"expression": "len(xs) >= 0"})["result"] == "True"


@pytest.mark.parametrize("source", ["a +", "(", "def", "x = = 1", "return 1"])
def test_syntax_errors_say_so(source: str) -> None:
    frames = hold(dict.fromkeys(PARAMS, 0), dict.fromkeys(PARAMS, 0))
    with pytest.raises(InspectError, match=r"^Syntax error: "):
        frames.handle("evaluate", {"expression": source})


# Variables -----------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=250), st.binary(max_size=20)
)
nested = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=6),
    ),
    max_leaves=30,
)


def held_box(box: Any) -> None:
    raise Stop("held with a box")


def expected_children(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [(render(k), v) for k, v in value.items()]
    return [(f"[{i}]", v) for i, v in enumerate(value)]


def check_expansion(frames: LiveFrames, value: Any, ref: int) -> None:
    if not isinstance(value, (list, tuple, dict)) or not value:
        assert ref == 0, value
        return
    assert ref > 0
    reply = frames.handle("variables", {"variables_reference": ref})
    children = expected_children(value)
    assert reply["count"] == len(children) and "notShown" not in reply
    shown = [(v["name"], v["value"], v["type"]) for v in reply["variables"]]
    assert shown == [
        (name, REDACTED if is_secret(name) else render(item), type(item).__qualname__)
        for name, item in children
    ]
    for (name, item), var in zip(children, reply["variables"], strict=True):
        if is_secret(name):
            assert var["variablesReference"] == 0
        else:
            check_expansion(frames, item, var["variablesReference"])


@settings(max_examples=150, deadline=None)
@given(box=nested)
def test_variables_expand_to_exactly_the_containers_items(box: Any) -> None:
    """Property: expanding a held local holding any nested lists, tuples and dicts gives exactly its
    items, in order ("[i]" for sequences, the rendered key for dicts), each value rendered as a
    snapshot renders it (secret-named keys redacted), and expanding each child gives its own items."""
    frames = held(held_box, box)
    local = frames.handle("locals", {})
    [var] = local["variables"]
    assert (var["name"], var["value"]) == ("box", render(box))
    check_expansion(frames, box, var["variablesReference"])
    scope = frames.handle("variables", {"variables_reference": LOCALS_BASE})  # the same through the scope
    assert [v["value"] for v in scope["variables"]] == [render(box)]


# Time limit and secrets ----------------------------------------------------------------------------


def busy(seconds: float) -> int:
    """Python bytecode for ``seconds``: a pending asynchronous exception would be raised in here."""
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def spin() -> None:
    while True:
        pass


def test_run_limited_interrupts_a_runaway_loop_and_the_thread_carries_on() -> None:
    for i in range(20):
        timeout = 0.02 + 0.005 * i
        started = time.monotonic()
        value, error = run_limited(spin, timeout)
        elapsed = time.monotonic() - started
        assert value is None and isinstance(error, EvaluationTimeout), error
        assert timeout <= elapsed < timeout + 10  # not before its time; a loaded machine may be late
        assert run_limited(lambda: sum(range(1000)), 5.0) == (499500, None)
        assert busy(0.02) > 0  # no stray interruption is left pending


@pytest.mark.parametrize("offset", [-0.002, 0.0, 0.002])
def test_run_limited_racing_its_own_deadline_never_leaks_an_interruption(offset: float) -> None:
    """A function ending right at the deadline gives its value or a timeout, and nothing leaks out."""
    timeout = 0.03
    for _ in range(20):
        value, error = run_limited(functools.partial(busy, timeout + offset), timeout)
        assert (isinstance(value, int) and error is None) or isinstance(error, EvaluationTimeout)
        assert busy(0.02) > 0


def test_run_limited_works_in_any_thread_and_evaluate_reports_the_timeout() -> None:
    results: list[Any] = []
    thread = threading.Thread(
        target=lambda: results.extend([run_limited(spin, 0.05), run_limited(lambda: 7, 1)])
    )
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert isinstance(results[0][1], EvaluationTimeout) and results[1] == (7, None)
    frames = hold(dict.fromkeys(PARAMS, 1), dict.fromkeys(PARAMS, 2))
    started = time.monotonic()
    with pytest.raises(InspectError, match=r"^Timed out: the expression did not finish within 0.2 s"):
        frames.handle("evaluate", {"expression": "while True: a += 1", "timeout": 0.2})
    assert time.monotonic() - started < 10  # stopped (how soon after 0.2 s is a loaded machine's)
    assert frames.handle("evaluate", {"expression": "b"})["result"] == "1"


SECRET_MODULE = """
def held_secret(api_token, user):
    settings_ = {"password": "hunter2", "host": "db"}
    raise Stop("held with a secret")
"""


def test_secrets_are_redacted_in_locals_and_by_bare_name() -> None:
    module: dict[str, Any] = {"Stop": Stop, "module_key": "not secret"}  # globals cheap to render
    exec(SECRET_MODULE, module)
    frames = held(module["held_secret"], "s3cr3t-value", "ada")
    local = {v["name"]: v for v in frames.handle("locals", {})["variables"]}
    assert local["api_token"] == {
        "name": "api_token",
        "value": REDACTED,
        "type": "str",
        "variablesReference": 0,
    }
    assert local["user"]["value"] == "'ada'"
    assert local["settings_"]["value"] == "{'password': <redacted>, 'host': 'db'}"
    scope = frames.handle("variables", {"variables_reference": LOCALS_BASE})
    assert [v["value"] for v in scope["variables"] if v["name"] == "api_token"] == [REDACTED]
    for source in ("api_token", "api_token \n"):
        reply = frames.handle("evaluate", {"expression": source})
        assert (reply["result"], reply["type"], reply["variablesReference"]) == (REDACTED, "str", 0)
    expanded = frames.handle("variables", {"variables_reference": local["settings_"]["variablesReference"]})
    assert [(v["name"], v["value"]) for v in expanded["variables"]] == [
        ("'password'", REDACTED),
        ("'host'", "'db'"),
    ]
    globals_ = frames.handle("variables", {"variables_reference": GLOBALS_BASE})["variables"]
    assert ("module_key", "'not secret'") in [(v["name"], v["value"]) for v in globals_]
    assert "s3cr3t-value" not in str(globals_)
    assert (
        frames.handle("evaluate", {"expression": "{'token': api_token}"})["result"] == "{'token': <redacted>}"
    )


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("import pytest; pytest.fail('boom')", "Failed"),
        ("__import__('pytest').skip('later')", "Skipped"),
        ("exit(3)", "SystemExit"),
    ],
)
def test_base_exceptions_in_an_expression_come_back_as_errors(source: str, kind: str) -> None:
    """Escaping the inspector, these would end the held run with an INTERNALERROR (exit status 3)."""
    frames = hold(dict.fromkeys(PARAMS, 0), dict.fromkeys(PARAMS, 0))
    try:
        frames.handle("evaluate", {"expression": source})
    except InspectError as exc:
        assert error_type(str(exc)) == kind
    except BaseException as exc:  # caught here: a KeyboardInterrupt would stop this session
        pytest.fail(f"{type(exc).__name__} escaped LiveFrames.handle")
    else:
        pytest.fail("no error")
    assert frames.handle("evaluate", {"expression": "a + 1"})["result"] == "1"


def test_what_an_expression_prints_comes_back_with_its_value() -> None:
    frames = held(held_box, [1, 2])
    reply = frames.handle("evaluate", {"expression": "print('items:', box); len(box)"})
    assert reply["result"] == "2"
    assert reply["output"] == "items: [1, 2]\n"
    assert "output" not in frames.handle("evaluate", {"expression": "len(box)"})
    with pytest.raises(InspectError, match=r"(?s)ZeroDivisionError.*Printed before it:\nhalf way"):
        frames.handle("evaluate", {"expression": "print('half way'); 1 / 0"})
