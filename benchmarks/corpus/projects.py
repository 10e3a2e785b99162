"""The corpus: real projects' own test suites, each pinned by version and sdist hash, with the small recipe
it needs to run here (test dependencies, the part of the suite that runs in about a minute, the tests
deselected and why).

A recipe says what of the run matters for the plugin (``covers``): the kinds of concurrency and
test styles the suite exercises. Together the corpus covers multiprocessing with fork and spawn,
concurrent.futures, threads, subprocesses, signals, asyncio through pytest-asyncio, anyio's pytest
plugin, hypothesis, doctests, unittest-style suites; every suite also runs under xdist (``-n 2``).

Deselections are kept minimal: only tests that need the network or a service this machine lacks,
or that cannot pass here with or without the plugin, each with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Project:
    name: str
    """The distribution's name on PyPI."""
    version: str
    sha256: str
    """Of the sdist; the download is refused if it differs."""
    covers: tuple[str, ...]
    args: tuple[str, ...] = ()
    """What to run, relative to the unpacked sdist (paths, ``-k``, ``-p``): the suite, or the part of it
    named in ``notes``."""
    deps: tuple[str, ...] = ()
    """Test dependencies, installed into the project's venv beside the project and this plugin."""
    deselect: dict[str, str] = field(default_factory=dict)
    """Node id (or path given to ``--ignore`` when it ends in ``.py``) -> why it cannot run here."""
    forks: bool = False
    """A test forks: it gets three times the runs (30 for 10)."""
    plugins: tuple[str, ...] = ()
    """Modules of ``plugins/`` loaded with ``-p`` into every run, plain and recorded (what the suite needs
    to run here at all, said in ``notes``)."""
    editable: bool = True
    """Install the project with ``pip install -e`` (as its developers do); False: a plain install."""
    timeout: float = 300.0
    """Seconds after which a run counts as a hang (it is dumped with py-spy, then killed)."""
    notes: str = ""


PROJECTS: tuple[Project, ...] = (
    Project(
        "toolz",
        "1.2.0",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        covers=("fork", "doctests", "filterwarnings=error"),
        forks=True,
        notes="whole suite; `test_parallel.py::test_fold` opens a fork `multiprocessing.Pool()` (issue 43)",
    ),
    Project(
        "pebble",
        "5.2.3",
        "6fce8cc8cbf367588406f66e4b62ec36e22594a6c720bff1d08cc2e565a66af3",
        covers=("fork", "spawn", "forkserver", "concurrent.futures", "threads", "signals", "asyncio"),
        args=(
            "test/test_concurrent_process_fork.py",
            "test/test_pebble.py",
            "test/test_process_pool_spawn.py::TestProcessPoolDeadlockOnResult",
            "test/test_process_pool_spawn.py::TestProcessPoolDeadlockOnNewFutures",
            "test/test_process_pool_spawn.py::TestProcessPoolDeadlockOnCancelLargeData",
            "test/test_thread_pool.py::TestAsyncIOThreadPool",
        ),
        forks=True,
        notes="about a tenth of the suite's time (all of it: 110 s): @concurrent.process with fork "
        "(timeouts end "
        "workers with SIGTERM), spawn pools' deadlock tests, asyncio thread pool, signal handler decorators",
    ),
    Project(
        "sh",
        "2.4.0",
        "a250aef68509ed93419c9a1d90b0647cd5cbe26107ba94d3717ef5b6d595ffd9",
        covers=("subprocesses", "signals", "ptys", "threads", "unittest"),
        args=(
            "tests/sh_test.py",
            "-k",
            "(MiscTests or ExecutionContextTests or ArgTests or StreamBuffererTests or signal or "
            "kill or terminate"
            " or test_fg or test_bg or pipe or fork) and not (test_general_signal or test_eintr or "
            "test_piped_generator"
            " or test_bad_sig or test_ok_code_ignores_bad_sig or test_threaded_with_contexts or "
            "test_no_interfere1"
            " or test_set_in_parent_function or test_multiple_pipes or test_sigpipe or test_signal_group"
            " or test_stdout_callback_terminate or test_stdout_callback_kill or test_bg_exit_code)",
        ),
        plugins=("corpus_sorted",),
        forks=True,
        notes="unittest.TestCase suite; the tests about signals, pipes, fg/bg processes, contexts "
        "and arguments, "
        "without those over 1 s (the whole suite: 95 s); sh forks (os.fork, then exec) in the test's "
        "process, "
        "ptys; its loader orders tests at random on purpose, which xdist refuses: `corpus_sorted` sorts them",
    ),
    Project(
        "anyio",
        "4.16.0",
        "59bb03251907983d1603d27c3087ddb1e93299ea2163adcdba37899a4fb12ffb",
        covers=("anyio plugin", "asyncio", "trio", "threads", "subprocesses", "signals", "pytest-timeout"),
        args=("tests/test_subprocesses.py", "tests/test_signals.py", "tests/test_to_thread.py"),
        deps=(
            "trio>=0.32",
            "blockbuster>=1.5.29",
            "hypothesis>=4.18.2",
            "psutil>=5.9",
            "pytest-mock>=3.14",
            "pytest-timeout>=2.4.0",
            "trustme>=1.0.0",
            "truststore>=0.9.1",
            "uvloop>=0.22.1",
        ),
        notes="its subprocess, signal and worker-thread tests, each on asyncio, asyncio+uvloop and "
        "trio through "
        "anyio's pytest plugin (`anyio_mode = auto`), under pytest-timeout (the whole suite: 80-110 s)",
    ),
    Project(
        "asgiref",
        "3.13.0",
        "034cc8cbf72d00553b4be256703ac545120b4e50af13b49dec99da899aeeecb4",
        covers=("pytest-asyncio", "threads", "concurrent.futures"),
        deps=("pytest-asyncio>=1.0",),
        notes="whole suite; sync_to_async/async_to_sync run code in thread pools",
    ),
    Project(
        "janus",
        "2.0.0",
        "0970f38e0e725400496c834a368a67ee551dc3b5ad0a257e132f5b46f2e77770",
        covers=("pytest-asyncio", "threads", "filterwarnings=error"),
        deps=("pytest-asyncio>=1.0", "pytest-cov", "pytest-codspeed"),
        notes="whole suite; a queue between asyncio tasks and threads",
    ),
    Project(
        "attrs",
        "26.1.0",
        "d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32",
        covers=("hypothesis", "--import-mode=importlib"),
        deps=("hypothesis", "pympler", "cloudpickle"),
        editable=False,
        deselect={
            "tests/test_mypy.yml": "needs pytest-mypy-plugins and mypy runs (minutes)",
            "tests/test_pyright.py": "needs pyright (a Node program)",
            "tests/test_make.py": "time: 25 s of the suite's 55 under load (hypothesis; other files keep it)",
            "tests/test_funcs.py": "time: 20 s of the suite's 55 under load (hypothesis; other files "
            "keep it)",
        },
        notes="the suite but its two slowest files and the type checkers' (hypothesis in test_dunders, "
        "test_functional, test_3rd_party); installed as a wheel (its tests import the installed package); "
        "`test_converters.py::TestPipe::test_wrapped_annotation` fails here on Python 3.11, plain too",
    ),
    Project(
        "pyrsistent",
        "0.20.0",
        "4c48f78f62ab596c679086084d0dd13254ae4f3d6c72a83ffdf5ebdef8f265a4",
        covers=("doctests", "C extension"),
        args=("--doctest-modules", "pyrsistent", "tests"),
        deps=("hypothesis",),
        deselect={
            "tests/memory_profiling.py": "a script, not tests",
            "tests/hypothesis_vector_test.py": "time: a hypothesis state machine, 14 s of the suite's 18",
        },
        notes="tests and the package's doctests (`--doctest-modules`), built with its C extension",
    ),
    Project(
        "boltons",
        "26.2.0",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        covers=("doctests", "sockets"),
        args=("--doctest-modules", "boltons", "tests"),
        notes="tests and the package's doctests (as its tox.ini runs them)",
    ),
    Project(
        "more-itertools",
        "11.2.1",
        "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
        covers=("unittest", "subtests", "threads", "doctests"),
        args=(
            "--doctest-modules",
            "more_itertools",
            "tests/test_recipes.py",
            "tests/test_more.py::TestConcurrentTee",
            "tests/test_more.py::TestSerialize",
            "tests/test_more.py::ChunkedTests",
            "tests/test_more.py::WindowedTests",
        ),
        deselect={
            "tests/test_recipes.py::PrimeFunctionTests::test_primes": "time: 47 s",
            "tests/test_recipes.py::PrimeFunctionTests::test_nth_prime_approximate": "time: 4 s",
        },
        notes="unittest.TestCase classes with subtests: the recipes' tests, a few of test_more.py's "
        "(its thread-safety tests among them) and the package's doctests; without two slow tests "
        "(the whole suite: 89 s)",
    ),
    Project(
        "cachetools",
        "8.0.0",
        "5ed01bd676800d51f0025605e4fd8ad0891550513e7b0a4c3da478463764e5c3",
        covers=("unittest", "threads"),
        notes="whole suite; unittest.TestCase classes, a threading test",
    ),
    Project(
        "portalocker",
        "4.4.2",
        "7ac85bb2aa3c7873bf2ac72586fc6154afa4671ac786994a16617a6b7ccb3e5e",
        covers=("fork", "atexit", "spawn", "threads", "pytest-timeout", "pytest-rerunfailures"),
        args=(
            "-o",
            "addopts=--timeout=20 --strict-config --strict-markers -ra",
            "portalocker_tests/test_pidfilelock.py",
            "portalocker_tests/test_concurrent_state.py",
        ),
        deps=(
            "pytest-timeout>=2.1.0",
            "pytest-rerunfailures>=15.1",
            "fakeredis>=2.31.0",
            "redis>=5.0",
            "typing_extensions>=4.4",
        ),
        forks=True,
        notes="its PID-file lock tests (a lock taken in a forked child and released by its atexit, locks "
        "across spawned processes, its multiprocess tests carry `flaky(reruns=5)`) and its thread-state "
        "tests; "
        "without the `--cov ... --cov-fail-under=100` of its addopts (the whole suite: 30 s)",
    ),
)


def by_name(names: list[str]) -> list[Project]:
    known = {p.name: p for p in PROJECTS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown project(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]
