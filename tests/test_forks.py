"""A child forked by a test is the test's: it runs as it would without the plugin.

Real inner runs, started with the console script and with ``python -m pytest``; the children are real
forks (a multiprocessing fork pool, ``os.fork``), compared with the same run without the plugin."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from helpers import FAST, LAUNCHERS, PYTEST_SCRIPT, recorded, run_inner, run_launched

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork is the default start method on Linux")

POOLS = """
import multiprocessing
import subprocess
import sys


def test_fork_pools_terminated_at_once():
    # Two processes spinning beside the pools: their workers often have not run yet when the pool
    # terminates them, the case a SIGTERM that lands on an inherited Python handler is lost in.
    spinner = "import time\\nend = time.monotonic() + 90\\nwhile time.monotonic() < end: pass"  # outlives no hang
    spin = [subprocess.Popen([sys.executable, "-c", spinner]) for _ in range(2)]
    try:
        ctx = multiprocessing.get_context("fork")
        for _ in range(40):
            pool = ctx.Pool(4)
            pool.terminate()
            pool.join()
    finally:
        for process in spin:
            process.kill()
            process.wait()


def test_a_fork_pool_left_through_with():
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(abs, range(-20, 0)) == list(range(20, 0, -1))


def test_spawn_and_forkserver_pools():
    for method in ("spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            assert pool.map(abs, [-1, -2]) == [1, 2]
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_pools_terminated_at_once_end_and_the_run_ends(pytester: pytest.Pytester, launcher: str) -> None:
    """Without the fix one worker in a few hundred outlives its SIGTERM and the pool joins it for ever:
    this run then never ends (the timeout below fails the test)."""
    pytester.makepyfile(test_pools=POOLS)
    result = run_launched(pytester, launcher, "--mcp-debug-timeout=90", timeout=300)
    result.assert_outcomes(passed=3)
    assert "killed by SIGTERM" not in result.stdout.str() + result.stderr.str()
    (run,) = recorded(pytester.path / ".mcpdebug").runs()
    assert run["counts"] == {"passed": 3}


CHILD = """
import faulthandler
import json
import subprocess
import logging
import os
import signal
import sys
import warnings

import pytest

REPORT = {report!r}


def kinds():
    found = []
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{{fd}}")
        except OSError:
            continue
        if ":[" in target:  # pipe:[123], socket:[456]
            target = target.split(":")[0]
        elif target.endswith(" (deleted)"):  # pytest's capture files
            target = "deleted file"
        found.append(target)
    return sorted(kind for kind in found if kind != "/proc/self/fd" and "/proc/" not in kind)


def describe():
    capman = pytest_config.pluginmanager.get_plugin("capturemanager")
    return {{
        "sigterm": repr(signal.getsignal(signal.SIGTERM)),
        "sigint": repr(signal.getsignal(signal.SIGINT)),
        "realtime": sorted(
            signum for signum in range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
            if signal.getsignal(signum) not in (signal.SIG_DFL, None)
        ),
        "faulthandler": faulthandler.is_enabled(),
        "trace": repr(sys.gettrace()),
        "log_handlers": sorted(type(h).__name__ for h in logging.getLogger().handlers),
        "showwarnmsg": warnings._showwarnmsg.__module__,
        "capture_patched": sorted(n for n in ("item_capture", "read_global_capture") if n in vars(capman)),
        "plugins": sorted(
            name for name, _ in pytest_config.pluginmanager.list_name_plugin()
            if name and name.startswith("mcpdebug-")
        ),
        "fds": kinds(),
    }}


@pytest.fixture(autouse=True)
def _config(request):
    global pytest_config
    pytest_config = request.config


def test_child():
    read, write = os.pipe()
    hold, held = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says what it has, then tries what would hang on a copied timer
        try:
            os.close(read)
            os.close(held)
            # A hook call, as a child going on through pytest makes: the recording's plugins leave.
            pytest_config.hook.pytest_assertrepr_compare(config=pytest_config, op="==", left=1, right=2)
            report = describe()
            faulthandler.dump_traceback_later(30)
            faulthandler.cancel_dump_traceback_later()
            logging.getLogger("child").warning("a record from the child")
            warnings.warn("a warning from the child")
            with open(REPORT, "w") as out:
                json.dump(report, out)
            os.write(write, b"ready")
            os.read(hold, 1)  # wait here until the parent's SIGTERM
        finally:
            os._exit(7)
    os.close(write)
    os.close(hold)
    assert os.read(read, 5) == b"ready"
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
"""


@pytest.mark.parametrize(
    "recording",
    [("--mcp-debug",), ("--mcp-debug-timeout=60",), ("--mcp-debug", "--mcp-debug-coverage")],
    ids=["recorded", "timed", "coverage"],
)
def test_a_forked_child_has_nothing_of_the_recorder(
    pytester: pytest.Pytester, recording: tuple[str, ...]
) -> None:
    """Signals, faulthandler (its redirection and its timer), a tracer, logging and warnings hooks,
    pytest's capture, the recording's plugins and descriptors: in the child all as without the
    plugin. The child blocks until a SIGTERM, which ends it at once (the test checks how it ended)."""
    reports = {}
    for name, args in (("plain", ()), ("recorded", recording)):
        report = pytester.path / f"child-{name}.json"
        pytester.makepyfile(test_child=CHILD.format(report=str(report)))
        result = run_inner(
            pytester, "-p", "no:randomly", *args, "-W", "error::pytest.PytestUnraisableExceptionWarning"
        )
        result.assert_outcomes(passed=1)
        assert "killed by SIGTERM" not in result.stdout.str() + result.stderr.str()
        reports[name] = json.loads(report.read_text())
    plain, recorded_child = reports["plain"], reports["recorded"]
    fds, plain_fds = recorded_child.pop("fds"), plain.pop("fds")
    assert recorded_child == plain
    # The recorder's descriptors are /dev/null in the child; nothing else of it is open there.
    assert [kind for kind in fds if kind != "/dev/null"] == [
        kind for kind in plain_fds if kind != "/dev/null"
    ]
    assert not any(".mcpdebug" in kind for kind in fds)


CONTINUING = """
import os

PARENT = os.getpid()


def test_forks_and_both_go_on():
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)


def test_after():
    assert os.getpid() == PARENT, "the child's pytest: it must not reach the parent's record"
"""


def test_a_child_that_goes_on_through_pytest_reaches_no_record(pytester: pytest.Pytester) -> None:
    """``os.fork`` in a test whose child returns into pytest: the child runs the rest of the session
    as plain pytest would (its own failure, on the shared terminal); the record is the parent's."""
    pytester.makepyfile(test_continuing=CONTINUING)
    result = run_inner(pytester, "--mcp-debug")
    result.assert_outcomes(passed=2)
    closing = [line for line in result.outlines if line.startswith("mcpdebug: run ")]
    assert len(closing) == 1, closing  # the child's pytest said nothing of a recording
    (spool,) = (pytester.path / ".mcpdebug" / "spool").glob("*.jsonl")
    events = int(re.search(r"\((\d+) events\)", closing[0]).group(1))  # type: ignore[union-attr]
    assert len(spool.read_bytes().splitlines()) == events  # and wrote nothing into the parent's spool
    store = recorded(pytester.path / ".mcpdebug")
    (run,) = store.runs()
    assert run["counts"] == {"passed": 2}
    tests = {test["nodeid"]: test["status"] for test in store.tests(run["run_id"])}
    assert tests == {
        "test_continuing.py::test_forks_and_both_go_on": "passed",
        "test_continuing.py::test_after": "passed",
    }


STARTS_A_CHILD = """
import subprocess
import sys

CODE = (
    "import os, signal; os.kill(os.getpid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGINT); "
    "print('survived')"
)


def test_a_child_ignores_what_the_run_ignores():
    child = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert (child.returncode, child.stdout.strip()) == (0, "survived")
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize(
    "recording", [(), ("--mcp-debug",), ("--mcp-debug", "-n", "2")], ids=["plain", "recorded", "xdist"]
)
def test_a_signal_the_run_ignores_stays_ignored_in_what_its_tests_start(
    pytester: pytest.Pytester, launcher: str, recording: tuple[str, ...]
) -> None:
    """A run started with SIGINT and SIGTERM ignored (``nohup``, ``pytest &`` in a CI script): the
    processes its tests start inherit them ignored, as without the plugin. A handler of the recorder in
    their place became the default in an exec'd child, which then died of the signal (found in anyio's
    suite run in the background: its KeyboardInterrupt tests passed recorded, failed plain)."""
    pytester.makepyfile(test_starts_a_child=STARTS_A_CHILD)
    command = [str(PYTEST_SCRIPT)] if launcher == "script" else [sys.executable, "-m", "pytest"]
    ignoring = ("sh", "-c", 'trap "" INT TERM; exec "$0" "$@"')
    result = pytester.run(*ignoring, *command, *FAST, *recording, timeout=120)
    result.assert_outcomes(passed=1)


RACE = """
import os, sys, threading, time
from pytest_mcpdebug import forks

path = sys.argv[1]
opened = threading.Event()
fds = []


def open_while_main_forks():
    with forks.owning():
        fds.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC))
        opened.set()
        main = threading.main_thread().ident
        deadline = time.monotonic() + 60  # only if `owning` does not hold the fork: the test fails
        while sys._current_frames()[main].f_code.co_name != "_before" and time.monotonic() < deadline:
            time.sleep(0.001)
        forks.own(fds[0])


opener = threading.Thread(target=open_while_main_forks)
opener.start()
opened.wait()
pid = os.fork()  # between the opener's open and its `own`
if pid == 0:
    os._exit(0 if os.readlink(f"/proc/self/fd/{fds[0]}") == os.devnull else 3)
opener.join()
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_fork_between_a_descriptors_open_and_its_own_waits_for_the_own(tmp_path) -> None:
    """The recorder's threads open files while the test runs (the spool, at its first batch): a test
    forking at that moment made a child holding the spool open (CI, once). `forks.owning` makes the
    open and the `own` one step as far as a fork is concerned."""
    spool = tmp_path / "spool.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", RACE, str(spool)], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "0", "")
