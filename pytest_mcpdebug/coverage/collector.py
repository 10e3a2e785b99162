"""One process's per-test line coverage, in a coverage.py data file with a context per test.

What measures: on Python 3.12+ this package's `sys.monitoring` recorder (`monitor`: each line once
per test, the lines coverage.py's C tracer records, at a fraction of its cost), else (and with
``MCPDEBUG_COVERAGE_CORE=ctrace``) coverage.py's C tracer with a dynamic context per test. Either way
what runs to show a failure is kept apart (`rendering`).

Why a data file rather than events: coverage.py writes each test's lines to its SQLite file when the
context switches, so the file is complete up to the last finished test even if the process is killed,
it costs nothing beyond coverage's own contexts, and it stays in ``.mcpdebug/`` for a server that
reads the run later (CI). A `CoverageRecorded` event tells the server where the file is.

Roles: a plain run's process writes ``<run id>.coverage``; each xdist worker writes
``<run id>/<process>.coverage``, and the controller combines them into ``<run id>.coverage`` at the
end. When pytest-cov measures the run (``--cov``), two tracers cannot run at once: its measurement
is reused (its scope, its data file) and a context per test is added unless ``--cov-context=test``
already adds them; the controller copies its combined file into ``.mcpdebug/coverage/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpdebug import forks, protocol
from pytest_mcpdebug.coverage.rendering import Rendering
from pytest_mcpdebug.folder import coverage_file, coverage_parts
from pytest_mcpdebug.recording.reporter import Reporter

ENV_CORE = "MCPDEBUG_COVERAGE_CORE"
"""``ctrace``: measure with coverage.py's C tracer on Python 3.12+ too (to compare the two)."""
CONTEXT_SUFFIXES = ("|setup", "|run", "|teardown")
"""pytest-cov's ``--cov-context=test`` names contexts ``<node id>|<phase>``."""


class CoverageCollector:
    def __init__(
        self, config: pytest.Config, *, reporter: Reporter, directory: Path, include_tests: bool
    ) -> None:
        self.config = config
        self.reporter = reporter
        self.dir = directory
        self.include_tests = include_tests
        self.cov: Any = None
        self.path: Path | None = None
        self.note = ""
        self.switches = True
        """Whether this collector names each test's context (pytest-cov's own contexts make it not)."""
        self.tests = 0
        self.core = ""
        """What measured: "sys.monitoring" (`monitor`, Python 3.12+) or coverage.py's "ctrace"."""
        self.rendering = Rendering(self._switch)
        """Keeps what runs to show a failure out of the test's lines (`rendering`)."""

    # Start ------------------------------------------------------------------------------------------

    def start(self) -> None:
        role = self.reporter.role
        reused = _pytest_cov(self.config)
        if reused is not None:  # its Coverage starts later in a worker: looked up at each test
            self.switches = getattr(reused.options, "cov_context", None) != "test"
            self.rendering.install()
            return
        if role == "controller":
            return  # it runs no tests; it combines its workers' files at the end
        run_id = self.reporter.run_id
        if role == "worker":
            self.path = coverage_parts(self.dir, run_id) / f"{self.reporter.process}.coverage"
        else:
            self.path = coverage_file(self.dir, run_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        cov = self._monitor(self.path) or self._coverage(self.path)
        self.cov = cov
        self.rendering.install()
        forks.in_child(self, cov.stop)  # a forked child is not traced, as without the plugin (`forks`)

    def _monitor(self, path: Path) -> Any:
        """On Python 3.12+, the ``sys.monitoring`` recorder (`monitor`); None where it cannot run."""
        if sys.version_info < (3, 12) or os.environ.get(ENV_CORE, "").strip() == "ctrace":
            return None
        from pytest_mcpdebug.coverage.monitor import LineMonitor, MonitorUnavailable

        monitor = LineMonitor(path, source=str(self.config.rootpath), omit=self._omit())
        try:
            monitor.start()
        except MonitorUnavailable as exc:
            self.note = f"coverage.py's C tracer measured this run ({exc})"
            return None
        self.core = "sys.monitoring"
        return monitor

    def _coverage(self, path: Path) -> Any:
        import coverage

        cov = coverage.Coverage(
            data_file=str(path),
            config_file=False,
            source=[str(self.config.rootpath)],
            omit=self._omit(),
            branch=False,
            messages=False,
        )
        cov.set_option("run:core", "ctrace")  # sys.monitoring drops contexts switched during a run
        # Recording adds no warning to the run: a suite whose code is all omitted (tests only) has no data.
        cov.set_option("run:disable_warnings", ["no-data-collected", "module-not-measured"])
        cov.start()
        self.core = "ctrace"
        return cov

    def _omit(self) -> list[str]:
        omit = ["*/site-packages/*", "*/dist-packages/*", f"{self.dir}/*"]
        if self.include_tests:
            return omit
        root = Path(self.config.rootpath)
        omit += [f"*/{pattern}" for pattern in self.config.getini("python_files")]
        omit.append("*/conftest.py")
        for testpath in self.config.getini("testpaths"):
            folder = root / testpath
            # a package named as a test path holds the code too (testpaths = ["toolz"]): keep it
            tests_only = folder.name in ("tests", "test", "testing") or not (folder / "__init__.py").exists()
            if folder.is_dir() and tests_only:
                omit.append(f"{folder.resolve()}/*")
        return omit

    # Hooks ------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        """Set-up, call and teardown of a test share one context: its node id."""
        self.tests += 1
        self.rendering.begin(item.nodeid)
        if self.switches:
            self._switch(item.nodeid)

    def _measuring(self) -> Any:
        cov = self.cov
        if cov is None:
            plugin = _pytest_cov(self.config)
            controller = getattr(plugin, "cov_controller", None)
            cov = getattr(controller, "cov", None)
        return cov

    def _switch(self, context: str) -> str | None:
        cov = self._measuring()
        if cov is None or not getattr(cov, "_started", True):
            return None
        previous = cov.switch_context(context)
        return previous if isinstance(previous, str) else None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """A failed phase's report (its traceback, the snapshot) is not the test's execution."""
        excinfo = call.excinfo
        # a unittest failure reaches call.excinfo in unittest's own makereport (from item._excinfo)
        if getattr(item, "_excinfo", None) or (
            excinfo is not None and not excinfo.errisinstance(pytest.skip.Exception)
        ):
            self.rendering.report_failure()
        report = yield
        if report.failed:
            self.rendering.report_failure()  # then the snapshot and the terminal's report
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self) -> Generator[None, Any, Any]:
        self.rendering.next_phase()  # before pytest-cov's wrapper names the phase's context
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self) -> Generator[None, Any, Any]:
        self.rendering.next_phase()  # before pytest-cov's wrapper names the phase's context
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self) -> Generator[None, Any, Any]:
        self.rendering.next_phase()  # before pytest-cov's wrapper names the phase's context
        return (yield)

    def pytest_runtest_logfinish(self) -> None:
        self.rendering.end()

    def pytest_sessionfinish(self) -> None:
        """Before the recorder's end (it runs last): the file must be complete when announced."""
        self.rendering.uninstall()
        try:
            self._finish()
        except Exception as exc:  # recording never changes a run: one warning line instead
            self.note = f"coverage could not be saved: {type(exc).__name__}: {exc}"
            self._warn(self.note)

    def _finish(self) -> None:
        role = self.reporter.role
        if _pytest_cov(self.config) is not None:
            if role != "worker":
                self._copy_pytest_cov()
            return
        if role == "controller":
            self._combine()
            return
        if self.cov is None or self.path is None:
            return
        forks.forget(self)
        self.cov.switch_context("")
        self.cov.stop()
        self.cov.save()
        self._announce(self.path, combined=role == "main")

    def _combine(self) -> None:
        """The controller: the workers' files into the run's one file (they are gone afterwards)."""
        from coverage import CoverageData

        parts = coverage_parts(self.dir, self.reporter.run_id)
        files = sorted(parts.glob("*.coverage")) if parts.is_dir() else []
        if not files:
            return
        target = coverage_file(self.dir, self.reporter.run_id)
        target.unlink(missing_ok=True)
        combined = CoverageData(basename=str(target))
        for part in files:
            data = CoverageData(basename=str(part))
            data.read()
            combined.update(data)
        combined.write()
        self._announce(target, combined=True)
        shutil.rmtree(parts, ignore_errors=True)

    def _copy_pytest_cov(self) -> None:
        """pytest-cov has combined and saved its data (its run loop ended): keep a copy for this run."""
        plugin = _pytest_cov(self.config)
        cov = getattr(getattr(plugin, "cov_controller", None), "cov", None)
        source = Path(cov.config.data_file) if cov is not None else None
        if source is None or not source.exists():
            self._warn("pytest-cov saved no data file this run (e.g. --cov-report with no data): no suspects")
            return
        target = coverage_file(self.dir, self.reporter.run_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        self.note = f"measured by pytest-cov (its --cov scope), copied from {source}"
        self._announce(target, combined=True)

    def _announce(self, path: Path, *, combined: bool) -> None:
        from coverage import CoverageData

        data = CoverageData(basename=str(path))
        data.read()
        tests = len([c for c in data.measured_contexts() if c])
        self.reporter.emit(
            protocol.CoverageRecorded,
            worker=self.reporter.worker,
            path=str(path.resolve()),
            tests=tests,
            files=len(data.measured_files()),
            combined=combined,
            note=self.note,
        )

    def _warn(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and self.reporter.role != "worker":
            terminal.write_line(f"mcpdebug: warning: {text}", yellow=True)

    def close(self) -> None:
        """The run ended early (an internal error): stop measuring so the process exits cleanly."""
        self.rendering.uninstall()
        if self.cov is not None and _pytest_cov(self.config) is None:
            with contextlib.suppress(Exception):
                self.cov.stop()


def _pytest_cov(config: pytest.Config) -> Any:
    """pytest-cov's plugin when it measures this run (``--cov`` without ``--no-cov``), else None."""
    plugin = config.pluginmanager.get_plugin("_cov")
    if plugin is None or getattr(plugin, "_disabled", True):
        return None
    return plugin
