"""pytest entry point (``pytest11``): registers options, and the recorder only when enabled.

Kept thin on purpose: with the plugin installed but not enabled, a run pays for two hook
implementations that return at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.recorder import Recorder
    from pytest_mcpdebug.services import Services

from pytest_mcpdebug import quiet_import
from pytest_mcpdebug.quiet_import import own_modules

with own_modules():  # every pytest run with the plugin installed imports this: not through the rewriter
    from pytest_mcpdebug import options

MARKER_HELP = (
    "mcpdebug_timeout(seconds, func_only=False): with --mcp-debug, fail this test with a hang "
    "diagnosis if it runs longer (0: no timeout for this test)"
)

_RECORDER = "mcpdebug-recorder"
_DEBUG = "mcpdebug-debug"
_AST_GUARD = pytest.StashKey["Callable[[], None] | None"]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Called as pytest registers this module, before any test module is imported."""
    quiet_import.leave_unrewritten(pluginmanager, __name__.partition(".")[0])


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get("mcpdebug")
        if shared:
            Recorder = _import_recorder()
            _register(config, lambda: Recorder.for_worker(config, shared))
        return
    if not options.is_enabled(config):
        return
    Recorder = _import_recorder()

    from pytest_mcpdebug import settings

    resolved = settings.resolve(config)  # a bad setting is the user's to fix: a usage error
    _register(config, lambda: Recorder.for_controller(config, resolved))
    recorder = config.pluginmanager.get_plugin(_RECORDER)
    if resolved.html is not None and recorder is not None:
        from pytest_mcpdebug.recording.html_report import HtmlReport

        config.pluginmanager.register(HtmlReport(config, resolved.html, recorder), "mcpdebug-html")
    if os.environ.get("MCPDEBUG_DEBUG"):  # a debug run started by `mcpdebug serve` (run_tests(debug=True))
        from pytest_mcpdebug.debug import in_tests

        debug = in_tests.from_environment()
        if debug is not None:
            config.pluginmanager.register(in_tests.DebugRun(config, *debug), _DEBUG)


def _import_recorder() -> type[Recorder]:
    """The recording machinery, imported with the collector paused and past pytest's assertion
    rewriting (`quiet_import`)."""
    with own_modules():
        from pytest_mcpdebug.recording.recorder import Recorder
    return Recorder


def _register(config: pytest.Config, make: Callable[[], object]) -> None:
    """Recording never changes a run: if the recorder cannot even start, say so and run without it."""
    try:
        recorder = make()
    except Exception as exc:
        import sys

        print(
            f"mcpdebug: warning: this run is not recorded: the recorder could not start "
            f"({type(exc).__name__}: {exc}); please report it",
            file=sys.stderr,
        )
        return
    from pytest_mcpdebug.plugin_object import register  # loaded with the recorder

    register(config, recorder, _RECORDER)
    from pytest_mcpdebug import ast_guard

    config.stash[_AST_GUARD] = ast_guard.install()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.pluginmanager.get_plugin(_RECORDER)
    if recorder is not None:
        recorder.close()
        config.pluginmanager.unregister(name=_RECORDER)
        restore = config.stash.get(_AST_GUARD, None)
        if restore is not None:
            restore()
        recorder.exit_if_stuck()


@pytest.fixture
def mcpdebug_process(request: pytest.FixtureRequest) -> Iterator[Services]:
    """Start a service the test talks to, recorded as a process session (`mcpdebug run`).

    ``mcpdebug_process("python server.py --port 8000", label="api", ready="Listening")`` starts it
    and waits for a line matching ``ready``; the returned service has ``wait_for(pattern)``,
    ``signal(signum)``, ``stop()`` and ``lines``. Its lines are linked to this run: a failing test's
    `get_failure` shows what the service wrote while the test ran. Stopped after the test.
    """
    from pytest_mcpdebug.services import services_for

    services = services_for(request.config)
    yield services
    services.close()
