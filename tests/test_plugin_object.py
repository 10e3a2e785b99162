"""`plugin_object.register`: a registered plugin keeps its hooks and its state, whatever its layout.

The dict it is handed afterwards is for speed (see the module's docstring; counted in
benchmarks/RESULTS.md); here, what must not change: pytest calls the plugin's hooks, the plugin sees
the attributes it had and the ones it sets later, and a plugin without a ``__dict__`` registers too.
"""

from __future__ import annotations

import pytest

from helpers import FAST
from pytest_mcpdebug.plugin_object import PluginObject, register


class Counting(PluginObject):
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.label = "counting"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seen.append(report.when)


class Slotted:
    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seen.append(report.when)


def test_a_registered_plugin_keeps_its_state_and_its_hooks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    plugins = [Counting(), Slotted()]

    class Registers:
        def pytest_configure(self, config: pytest.Config) -> None:
            for number, plugin in enumerate(plugins):
                register(config, plugin, f"probe-{number}")

    pytester.inline_run(*FAST, plugins=[Registers()]).assertoutcome(passed=1)
    counting, slotted = plugins
    assert counting.seen == slotted.seen == ["setup", "call", "teardown"]
    assert isinstance(counting, Counting) and counting.label == "counting"
    assert vars(counting) == {"seen": ["setup", "call", "teardown"], "label": "counting"}
    counting.later = 1  # type: ignore[attr-defined]  # set after registering: kept as any attribute
    assert counting.later == 1  # type: ignore[attr-defined]
