"""pytest entry point (``pytest11``): registers options, and the recorder only when enabled.

Kept thin on purpose: with the plugin installed but not enabled, a run pays for two hook
implementations that return at once.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mcpdebug import settings

MARKER_HELP = (
    "mcpdebug_timeout(seconds, func_only=False): with --mcp-debug, fail this test with a hang "
    "diagnosis if it runs longer (0: no timeout for this test)"
)

_RECORDER = "mcpdebug-recorder"


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.addoption(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get("mcpdebug")
        if shared:
            from pytest_mcpdebug.recording.recorder import Recorder

            config.pluginmanager.register(Recorder.for_worker(config, shared), _RECORDER)
        return
    if not settings.is_enabled(config):
        return
    from pytest_mcpdebug.recording.recorder import Recorder

    config.pluginmanager.register(Recorder.for_controller(config, settings.resolve(config)), _RECORDER)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.pluginmanager.get_plugin(_RECORDER)
    if recorder is not None:
        recorder.close()
        config.pluginmanager.unregister(recorder, _RECORDER)
        recorder.exit_if_stuck()
