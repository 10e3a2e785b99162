"""Seed 001's properties 11, 12 and 17 (hangs, loops, crashes), restated for Python, on real code.

Generated functions in real files run under a real `Watchdog` (11) or are sampled synthetically (12);
real inner pytest runs held by the real server pieces are killed (17). Waits poll with deadlines that
are generous for a loaded 2-core machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import keyword
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from mcp import Client

from helpers import FAST
from mcpdebug.app import build_server
from mcpdebug.ingest.websocket import IngestServer
from mcpdebug.live.sessions import Sessions
from mcpdebug.processes.test_runs import Runner
from mcpdebug.store import Store
from pytest_mcpdebug.hangs import classify as classifier
from pytest_mcpdebug.hangs.classify import BUSY_RATIO
from pytest_mcpdebug.hangs.target import HangTimeout, Target
from pytest_mcpdebug.hangs.watchdog import Watchdog
from pytest_mcpdebug.protocol import HangReport, decode_hang_report


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("generated")


def write_source(folder: Path, source: str) -> Path:
    """A real file per distinct source: linecache and `hangs`' parse cache are keyed by path."""
    path = folder / f"gen_{hashlib.sha1(source.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.write_text(source)
    return path


names = st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in ("time", "threading", "lock")  # the generated globals
)


# Property 11 ---------------------------------------------------------------------------------------

LATE = 10.0
"""How late after its deadline a hang may be reported here: a sanity bound. The watchdog wakes at the
deadline; under -n 2 with a CPU hog the latest seen was 0.35 s (building the report while a busy
thread holds the GIL). On 2026-11-27 this machine ran 1.7-2.3 times slower than before and reported a
busy thread's hang 0.24-1.12 s after its deadline, the first of a process up to ~1.3 s (the report's
modules imported then); two copies of the suite at a load average of 10 make it later still. How late
it is, is `benchmarks/hangs.py`'s to measure (detection latency)."""
SETTLE = 20.0
"""Deadline for things that happen promptly unless the machine is very loaded; a generated "hang"
ends by itself after its timeout plus this (more than `LATE`), so a missed interruption fails instead
of hanging. Waits end as soon as what they wait for happens: a passing run does not pay it."""
HANG_LINE = {
    "busy": ["while time.monotonic() < until:", "    n += 1"],
    "sleep": ["time.sleep(seconds)"],
    "lock": ["lock.acquire(True, seconds)"],
    "event": ["event.wait(seconds)"],
}
WAIT_KIND = {"sleep": "sleep", "lock": "lock", "event": "event"}


def hanging_source(kind: str, name: str, pad: int) -> tuple[str, int]:
    """A function ``name`` doing ``pad`` statements, then the kind's wait; and that wait's line."""
    body = ["n = 0", *[f"n += {i}" for i in range(pad)], *HANG_LINE[kind], "return n"]
    head = "import threading\nimport time\n\n\n"
    return head + f"def {name}(lock, event, seconds, until):\n" + "".join(f"    {b}\n" for b in body), 7 + pad


def wait_seconds(timeout: float, early: float | None) -> float:
    """How long the generated code waits: ``early`` of its timeout, or far past it (a hang)."""
    return early * timeout if early is not None else timeout + SETTLE


class Observed(Watchdog):
    """A watchdog that records its hangs, and when it has interrupted the target."""

    def __init__(self, **kwargs: Any) -> None:
        self.hangs: list[tuple[float, Target, HangReport]] = []
        self.stuck: list[Target] = []
        self.interrupted = threading.Event()
        hang = lambda target, report: self.hangs.append((time.monotonic(), target, report))  # noqa: E731
        super().__init__(on_hang=hang, on_stuck=self.stuck.append, **kwargs)

    def interrupt(self, thread: int, exc: type[BaseException]) -> None:
        super().interrupt(thread, exc)
        self.interrupted.set()


@dataclass
class Timed:
    armed_at: float = 0.0
    disarmed_at: float | None = None
    caught: HangTimeout | None = None
    errors: list[BaseException] = field(default_factory=list)


def run_timed(watchdog: Observed, call: Callable[[], object], timeout: float, out: Timed) -> None:
    """The target thread's side: arm for itself, run the generated code as pytest runs a test's
    phase (the watchdog interrupts only a test's own code), and catch the interruption."""
    out.armed_at = time.monotonic()
    try:
        watchdog.arm("gen.py::test_generated", timeout, "fail")
        info = pytest.CallInfo.from_call(call, "call")
        watchdog.disarm()
        out.disarmed_at = time.monotonic()
        watchdog.stop()  # nothing can interrupt this thread after this returns
        if info.excinfo is not None:
            raise info.excinfo.value
    except HangTimeout as exc:
        out.caught = exc
    except BaseException as exc:  # reported by the test, not lost in a thread
        out.errors.append(exc)
    finally:
        watchdog.disarm()


def assert_hang_stack(report: HangReport, kind: str, path: Path, name: str, line: int) -> None:
    """The report shows the target's stack at the wait, and classifies the wait."""
    (stack,) = [t.frames for t in report.threads if t.test]
    innermost = next(f for f in stack if not f.library)
    lines = [line, line + 1] if kind == "busy" else [line]
    assert (innermost.file, innermost.function) == (str(path), name)
    assert innermost.line in lines
    assert innermost.code == HANG_LINE[kind][innermost.line - line].strip()
    assert (report.file, report.function) == (str(path), name)
    expected = ("busy", lines, "") if kind == "busy" else ("blocked", [line], WAIT_KIND[kind])
    if kind == "busy" and report.kind == "blocked" and starved(report):
        # A loop a loaded machine never ran while it was sampled made no progress: by the
        # classifier's own rule (busy burns at least BUSY_RATIO of the wall time) it is blocked there.
        expected = ("blocked", [report.line], "call")
        assert report.line in lines
    assert (report.kind, report.lines, report.wait_kind) == expected, report.summary


def starved(report: HangReport) -> bool:
    """The target thread had less than the classifier's busy share of a CPU over the whole timeout."""
    return report.cpu is not None and report.elapsed > 0 and report.cpu / report.elapsed < BUSY_RATIO


@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from(sorted(HANG_LINE)),
    name=names,
    pad=st.integers(0, 12),
    timeout=st.floats(0.05, 0.3),
    in_main=st.booleans(),
    early=st.none() | st.floats(0.0, 0.5),
)
def test_property_11_timeout_based_hang_detection(
    sources: Path, kind: str, name: str, pad: int, timeout: float, in_main: bool, early: float | None
) -> None:
    """Feature: mcp-debug-tool, Property 11: For any Target Process and specified timeout duration, if
    the process executes for longer than the timeout without completing, then the MCP Server should
    pause the process and report a hang condition with the current call stack.

    Restated for Python: a test's code (run as pytest runs a phase) in the main thread or another
    calls a generated function that busy-loops, sleeps or waits for a lock or Event, timed by a real
    watchdog armed from that thread. Still running at its timeout, it is reported no earlier than
    the timeout and at most `LATE` s after, with its current stack (innermost project frame: the
    generated function at the generated line), and interrupted with HangTimeout. One that finishes
    (``early``: at that fraction of its timeout) and disarms before its deadline is never reported.
    CPython cannot break another thread's C call: a blocked non-main target is released by the test
    once interrupted, and a sleep that must hang runs in the main thread (a signal breaks it).
    """
    source, line = hanging_source(kind, name, pad)
    path = write_source(sources, source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, name)
    hang = early is None
    in_main = in_main or (hang and kind == "sleep")
    lock, event = threading.Lock(), threading.Event()
    lock.acquire()
    seconds = wait_seconds(timeout, early)
    watchdog = Observed(interval=0.01, grace=SETTLE)
    watchdog.start()
    out = Timed()
    try:
        call = lambda: function(lock, event, seconds, time.monotonic() + seconds)  # noqa: E731
        if in_main:
            run_timed(watchdog, call, timeout, out)
        else:
            thread = threading.Thread(target=run_timed, args=(watchdog, call, timeout, out), daemon=True)
            thread.start()
            if hang and kind in ("lock", "event"):
                assert watchdog.interrupted.wait(timeout + SETTLE), "the blocked thread was not interrupted"
                lock.release() if kind == "lock" else event.set()
            thread.join(timeout + 2 * SETTLE)
            assert not thread.is_alive(), "the target thread did not end"
    finally:  # a target left blocked by a failed assertion ends with the test
        event.set()
        if lock.locked():
            lock.release()
        watchdog.stop()
    assert out.errors == []
    assert watchdog.stuck == []

    if not hang:
        if out.disarmed_at is not None and out.disarmed_at < out.armed_at + timeout:
            assert watchdog.hangs == [], "a target that finished before its deadline was reported"
            assert out.caught is None
        return
    assert len(watchdog.hangs) == 1, "a target running past its timeout was not reported exactly once"
    fired, target, report = watchdog.hangs[0]
    assert timeout <= fired - target.started <= timeout + LATE
    assert report.elapsed >= timeout
    assert out.caught is not None, "the hung target was not interrupted"
    assert out.caught.msg == f"{report.summary} (mcpdebug timeout of {timeout:g} s)"
    assert_hang_stack(report, kind, path, name, line)


# Each example is a Python process (~0.3 s to start); shrinking one would replay it dozens of times.
@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    kind=st.sampled_from(sorted(HANG_LINE)),
    name=names,
    pad=st.integers(0, 12),
    timeout=st.floats(0.2, 0.6),
    early=st.none() | st.floats(0.0, 0.3),
)
def test_property_11_detect_reports_a_hung_program_at_its_timeout(
    sources: Path, kind: str, name: str, pad: int, timeout: float, early: float | None
) -> None:
    """Feature: mcp-debug-tool, Property 11: For any Target Process and specified timeout duration, if
    the process executes for longer than the timeout without completing, then the MCP Server should
    pause the process and report a hang condition with the current call stack.

    Restated for `python -m pytest_mcpdebug.hangs.detect` with detect_hang(command=...)'s flags: a program
    hanging as above is reported between its timeout and `LATE` s after, at the generated line, and
    ends with status 124; one that ends first (``early``) is not reported unless it overran.
    """
    source, line = hanging_source(kind, name, pad)
    seconds = wait_seconds(timeout, early)
    source += f"\n\nlock = threading.Lock()\nlock.acquire()\n{name}(lock, threading.Event(), {seconds!r}, "
    source += f"time.monotonic() + {seconds!r})\n"
    path = write_source(sources, source)
    report_path = path.with_suffix(f".{time.monotonic_ns()}.json")
    command = [
        sys.executable,
        "-m",
        "pytest_mcpdebug.hangs.detect",
        f"--timeout={timeout}",
        "--interval=0.05",
    ]
    done = subprocess.run(
        [*command, "--grace=2", "--report", str(report_path), "--", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout + 3 * SETTLE,
    )
    if early is not None and done.returncode == 0:
        assert not report_path.exists()
        return
    assert done.returncode == 124, done.stderr
    report = decode_hang_report(report_path.read_bytes())
    assert timeout <= report.elapsed <= timeout + LATE, report.summary
    if early is None:
        assert_hang_stack(report, kind, path, name, line)


# Property 12 ---------------------------------------------------------------------------------------

CALLER = ("/project/tests/test_generated.py", 12, "test_generated")
LIBRARY = "/usr/lib/python3.11/"
LIBRARY_FRAMES = [(LIBRARY + "threading.py", 324, "wait"), (LIBRARY + "json/decoder.py", 353, "raw_decode")]


def in_library(path: str) -> bool:
    return path.startswith(LIBRARY)


def looping_function(name: str, pad: int, body: int) -> tuple[str, tuple[int, int], list[int]]:
    """A function with ``pad`` statements then a while loop of ``body`` lines: its source, the
    loop's first and last line, and the lines of the function's body."""
    source = [f"def {name}(items):", "    total = 0", *[f"    total += {i}" for i in range(pad)]]
    source += ["    while total < len(items) * 1000:", *[f"        total += {i}" for i in range(body)]]
    source += ["    return total"]
    start = 3 + pad
    return "\n".join(source) + "\n", (start, start + body), list(range(2, start + body + 2))


@settings(max_examples=200, deadline=None)
@given(name=names, pad=st.integers(0, 6), body=st.integers(1, 5), busy=st.booleans(), data=st.data())
def test_property_12_infinite_loop_detection_via_sampling(
    sources: Path, name: str, pad: int, body: int, busy: bool, data: st.DataObject
) -> None:
    """Feature: mcp-debug-tool, Property 12: For any Target Process being monitored with a sample
    interval, if the execution location remains unchanged across consecutive samples for the
    specified duration, then the MCP Server should report an infinite loop condition with the loop
    location.

    Restated on `classifier.classify`: samples of a generated function (a real file) whose stack changes,
    then stays the same for at least half of them (and two). With CPU time rising 0.6-1.0 s per
    second there (any rate, for a loop line waiting in nothing: a loop starved of CPU) it is busy,
    its `lines` the enclosing loop's whole range (the line, outside a loop); with CPU time flat or
    unknown, blocked at that line. The result depends only on the samples: the same again, and the
    same whatever the changing prefix was.
    """
    source, (start, end), body_lines = looping_function(name, pad, body)
    path = str(write_source(sources, source))
    const = data.draw(st.sampled_from(body_lines), label="unchanged line")
    library = data.draw(st.sampled_from([(), *[(f,) for f in LIBRARY_FRAMES]]), label="library frames")
    stack = (*library, (path, const, name), CALLER)
    prefix = data.draw(st.lists(st.sampled_from([n for n in body_lines if n != const]), max_size=12))
    suffix = data.draw(st.integers(max(2, len(prefix)), len(prefix) + 10), label="unchanged samples")
    steps = data.draw(
        st.lists(st.floats(0.01, 0.2), min_size=len(prefix) + suffix, max_size=len(prefix) + suffix)
    )
    # Starved of CPU on a loaded machine, a loop with no wait in it is still busy, at any share.
    starved = start <= const <= end and library[:1] != (LIBRARY_FRAMES[0],)
    rate = data.draw(st.floats(0.01 if starved else 0.6, 1.0), label="CPU share") if busy else 0.0
    known = busy or data.draw(st.booleans(), label="CPU time known")
    at, cpu, samples = 1000.0, 3.0, []
    for i, step in enumerate(steps):
        at += step
        if i < len(prefix):
            cpu += step * data.draw(st.floats(0.0, 1.0))
            frames: tuple[classifier.Frame, ...] = ((path, prefix[i], name), CALLER)
        else:
            cpu += step * rate
            frames = stack
        samples.append(classifier.Sample(at, cpu if known else None, frames))

    found = classifier.classify(samples, is_library=in_library)
    assert (found.file, found.function, found.line) == (path, name, const), found.summary
    if busy:
        assert found.kind == "busy", found.summary
        assert found.lines == (list(range(start, end + 1)) if start <= const <= end else [const])
        assert f"busy loop in line{'s' if len(found.lines) > 1 else ''} {found.lines[0]}" in found.summary
    else:
        assert (found.kind, found.lines) == ("blocked", [const]), found.summary
        assert found.since == pytest.approx(samples[-1].at - samples[-suffix].at)
    assert classifier.classify([replace(s) for s in samples], is_library=in_library) == found
    head = samples[: len(prefix)]
    swapped = [replace(s, stack=o.stack) for s, o in zip(head, reversed(head), strict=True)]
    assert classifier.classify(swapped + samples[len(prefix) :], is_library=in_library) == found


def loop_tree() -> st.SearchStrategy[Any]:
    """Blocks of statements, blank lines, comments and nested ``for``/``while`` loops."""
    leaf = st.sampled_from(["stmt", "blank", "comment"])
    return st.lists(
        st.recursive(
            leaf, lambda inner: st.tuples(st.sampled_from(["for", "while"]), st.lists(inner, max_size=4))
        ),
        min_size=1,
        max_size=5,
    )


def render(block: list[Any], depth: int, out: list[str], loops: list[tuple[int, int, int]]) -> int:
    """Appends the block's lines; records each loop as (first line, last line, nesting depth);
    returns the block's last line of code (0 if none)."""
    indent, last = "    " * depth, 0
    for item in block:
        if item == "blank":
            out.append("")
        elif item == "comment":
            out.append(f"{indent}# note {len(out)}")
        elif item == "stmt":
            out.append(f"{indent}x{len(out)} = {len(out)}")
            last = len(out)
        else:
            kind, body = item
            out.append(f"{indent}{'for i in range(3):' if kind == 'for' else 'while x < 3:'}")
            first = len(out)
            out.append(f"{indent}    x = {first}")  # a loop's body has a statement
            last = max(render(body, depth + 1, out, loops), first + 1)
            loops.append((first, last, depth))
    return last


@settings(max_examples=200, deadline=None)
@given(tree=loop_tree())
def test_property_12_loop_extent_is_the_innermost_enclosing_loop(sources: Path, tree: list[Any]) -> None:
    """Feature: mcp-debug-tool, Property 12 (the loop location): `loop_extent(file, line)` of any line
    of a generated module of nested loops is the first and last line of the deepest loop holding it
    (trailing blank and comment lines are outside), and None outside every loop."""
    out: list[str] = []
    loops: list[tuple[int, int, int]] = []
    render(tree, 0, out, loops)
    path = str(write_source(sources, "x = 0\n" + "".join(f"{line}\n" for line in out)))
    for number in range(1, len(out) + 2):
        around = [loop for loop in loops if loop[0] + 1 <= number <= loop[1] + 1]
        deepest = max(around, key=lambda loop: loop[2], default=None)
        expected = None if deepest is None else (deepest[0] + 1, deepest[1] + 1)
        assert classifier.loop_extent(path, number) == expected, (number, out)


# Property 17 ---------------------------------------------------------------------------------------

ARGS = [*FAST, "-p", "no:randomly", "--mcp-debug-break-timeout", "60"]
DEADLINE = 60.0
HELD = """
def test_fails():
    value = 41
    assert value == 42

def test_after():
    open("after-ran", "w").close()
"""


@dataclass
class Managed:
    runner: Runner
    client: Client

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        """(is the reply an error, its text)."""
        with anyio.fail_after(DEADLINE):
            result = await self.client.call_tool(tool, arguments)
        return bool(result.is_error), str(result.content[0].text)

    async def held(self) -> str:
        """The "Held now" part of list_sessions ("" when nothing is held)."""
        error, listed = await self.call("list_sessions")
        assert not error, listed
        return listed.split("\n\n")[0] if listed.startswith("Held now") else ""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def managed(pytester: pytest.Pytester) -> AsyncIterator[Managed]:
    """The server's pieces as `mcpdebug serve` wires them, in this event loop."""
    store = Store(pytester.path / ".mcpdebug")
    sessions = Sessions(store)
    ingest = IngestServer(store, sessions=sessions)
    url = await ingest.start()
    runner = Runner(store, sessions, url=url, token=ingest.token)
    try:
        async with Client(build_server(store, sessions, runner)) as client:
            yield Managed(runner, client)
    finally:
        with anyio.fail_after(30):
            await runner.close()
            await ingest.close()
        store.close()


async def gone(group: int) -> bool:
    """No process of the group is left running (a zombie has ended: only its parent's wait is left)."""
    for entry in Path("/proc").iterdir():
        try:
            state, _, pgrp = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError, IndexError):
            continue
        if int(pgrp) == group and state not in ("Z", "X"):
            return False
    return True


async def until(predicate: Callable[[], Any], what: str) -> None:
    try:
        with anyio.fail_after(DEADLINE):
            while not await predicate():
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not within {DEADLINE:g} s: {what}") from None


@pytest.mark.anyio
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("death", ["SIGKILL", "os._exit(0)", "os._exit(3)", "conftest raises at import"])
async def test_property_17_crash_detection_and_cleanup(
    pytester: pytest.Pytester, managed: Managed, death: str
) -> None:
    """Feature: mcp-debug-tool, Property 17: For any Debug Session, if the Target Process crashes or
    terminates unexpectedly, then the MCP Server should detect the termination, clean up all
    debugging resources, and report the error without leaving orphaned resources.

    Restated for managed runs: a `run_tests(break_on_failure=True)` whose pytest dies - SIGKILLed or
    calling os._exit(n) (from an evaluated expression, which then fails rather than hangs) while its
    failed test is held, or raising at import before any test - is noticed: the session leaves
    list_sessions' "Held now", evaluating in it is an error saying it is not held, wait_for_stop
    returns the crash promptly, and no process of the run (its pytest, the plugin's reaper) is left.
    Parametrized, not generated: these are the distinct ways to die, each a real 1-3 s pytest run.
    """
    pytester.makepyfile(test_held=HELD)
    if death == "conftest raises at import":
        pytester.makeconftest("raise RuntimeError('conftest exploded at import')")
    error, reply = await managed.call("run_tests", args=ARGS, cwd=str(pytester.path), break_on_failure=True)
    (run,) = managed.runner.runs.values()
    if death == "conftest raises at import":
        assert error, reply
        assert f"pytest exited with status 4 before recording anything (run {run.run_id}" in reply
        assert "RuntimeError: conftest exploded at import" in reply
        assert await managed.held() == ""
        await until(lambda: gone(run.process.pid), "the run's processes end")
        return

    assert not error and reply.startswith("STOPPED: test_held.py::test_fails failed in call"), reply
    session = reply.split(" held alive as session ")[1].split()[0]
    assert f"- session {session}:" in await managed.held()
    if death == "SIGKILL":
        os.kill(run.process.pid, signal.SIGKILL)
        status = -signal.SIGKILL
    else:
        status = int(death[len("os._exit(") : -1])
        error, text = await managed.call(
            "evaluate_expression", session_id=session, expression=f"__import__('os')._exit({status})"
        )
        assert error and "the held process closed its connection before answering" in text, text

    async def released() -> bool:
        return f"- session {session}:" not in await managed.held()

    await until(released, "the dead session leaves list_sessions")
    error, text = await managed.call("evaluate_expression", session_id=session, expression="value")
    assert error and f"Session {session} is not held any more (its process disconnected or ended)" in text

    started = time.monotonic()
    error, text = await managed.call("wait_for_stop", id=run.run_id, timeout=DEADLINE - 10)
    assert time.monotonic() - started < 2 * SETTLE
    assert not error and text.startswith(f"FINISHED: run {run.run_id}."), text
    assert "crashed (its process died without finishing the run)" in text
    assert f"The pytest process exited with status {status} without finishing its run." in text
    assert "- FAILED test_held.py::test_fails (call): assert 41 == 42" in text
    assert run.returncode == status
    assert not (pytester.path / "after-ran").exists()
    await until(lambda: gone(run.process.pid), "the run's processes end")
    with pytest.raises(ProcessLookupError):
        os.kill(run.process.pid, 0)
