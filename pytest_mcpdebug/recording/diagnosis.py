"""The opt-in diagnosis parts of a recording process: per-test coverage (``--mcp-debug-coverage``) and
value traces (``--mcp-debug-trace``). Each is imported and registered only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpdebug.plugin_object import register
from pytest_mcpdebug.settings import DiagnosisSettings

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.reporter import Reporter

COVERAGE = "mcpdebug-coverage"
TRACER = "mcpdebug-tracer"


def start(
    config: pytest.Config,
    settings: DiagnosisSettings,
    *,
    reporter: Reporter,
    directory: Path,
    warn: Callable[[str], None],
) -> list[tuple[Any, str]]:
    """Register the parts ``settings`` asks for; returns them with their plugin names."""
    parts: list[tuple[Any, str]] = []
    if settings.coverage:
        from pytest_mcpdebug.coverage.collector import CoverageCollector

        collector = CoverageCollector(
            config, reporter=reporter, directory=directory, include_tests=settings.coverage_tests
        )
        try:
            collector.start()
        except Exception as exc:  # e.g. another tracer in the way: the run goes on, measured or not
            warn(f"mcpdebug: warning: --mcp-debug-coverage: {type(exc).__name__}: {exc}")
        else:
            register(config, collector, COVERAGE)
            parts.append((collector, COVERAGE))
    if settings.trace and reporter.role != "controller":
        from pytest_mcpdebug.tracing.plugin import TracePlugin

        tracer = TracePlugin(config, reporter=reporter, watch=settings.trace_watch)
        register(config, tracer, TRACER)
        parts.append((tracer, TRACER))
    return parts


def stop(config: pytest.Config, parts: list[tuple[Any, str]]) -> None:
    for part, name in parts:
        close = getattr(part, "close", None)
        if close is not None:
            close()
        config.pluginmanager.unregister(name=name)
    parts.clear()


def shared(settings: dict[str, Any] | None) -> DiagnosisSettings:
    """The settings as an xdist worker receives them through ``workerinput``."""
    if not settings:
        return DiagnosisSettings()
    return DiagnosisSettings(**{**settings, "trace_watch": tuple(settings.get("trace_watch", ()))})
