"""Traces each test of the run (set-up, call and teardown) and sends its trace when it ends."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_mcpdebug import forks, protocol
from pytest_mcpdebug.recording.reporter import Reporter, final_outcome
from pytest_mcpdebug.tracing.backends import backend


class TracePlugin:
    def __init__(self, config: pytest.Config, *, reporter: Reporter, watch: tuple[str, ...]) -> None:
        self.config = config
        self.reporter = reporter
        self.watch = watch
        self._phases: list[tuple[str, str, bool]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        self._phases = []
        tracer = backend(self.watch)
        try:
            tracer.start()
        except Exception as exc:  # tracing never changes a run
            tracer.recorder.error = f"tracing could not start: {type(exc).__name__}: {exc}"
        forks.in_child(self, tracer.stop)  # a child the test forks is not traced (`forks`)
        try:
            return (yield)
        finally:
            forks.forget(self)
            try:
                tracer.stop()
            finally:
                outcome = final_outcome(self._phases) if self._phases else "unknown"
                trace = tracer.recorder.result()
                self.reporter.emit(
                    protocol.ValueTrace,
                    nodeid=item.nodeid,
                    worker=self.reporter.worker,
                    outcome=outcome,
                    trace=trace,
                )
                brief = self.reporter.brief
                if brief is not None and outcome in ("failed", "error"):
                    brief.from_trace(item.nodeid, trace)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._phases.append(
            (report.when or "call", report.outcome, getattr(report, "wasxfail", None) is not None)
        )
