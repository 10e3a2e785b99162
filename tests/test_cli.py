"""`mcpdebug runs` and `mcpdebug show`, as a user runs them in a terminal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import MCPDEBUG
from helpers import run_inner


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPDEBUG, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


@pytest.fixture
def project(pytester: pytest.Pytester, suite) -> Path:
    suite("failing")
    run_inner(pytester, "--mcp-debug", "--continue-on-collection-errors")
    (pytester.path / "sub").mkdir()
    return pytester.path


def test_runs_and_show(project: Path) -> None:
    runs = cli(project / "sub", "runs")  # finds the .mcpdebug/ of a parent folder
    assert runs.returncode == 0, runs.stderr
    assert "finished, exit status 1" in runs.stdout and "2 failed, 2 error" in runs.stdout
    run_id = json.loads(cli(project, "runs", "--json").stdout)[0]["run_id"]

    show = cli(project, "show")
    assert show.returncode == 0
    assert f"Run {run_id} (pytest): finished" in show.stdout
    assert (
        "ERROR test_fixture_error.py::test_query_users (setup): RuntimeError: database unavailable"
        in show.stdout
    )
    assert "test_mixed.py::test_pass" in show.stdout  # the table of every test

    detail = cli(project, "show", run_id[:12], "test_output_then_fail", "--tail", "2")
    assert detail.returncode == 0
    assert "--- captured output (stdout, stderr, log, warnings) ---\nLines 3-4 of 4 (" in detail.stdout
    assert "\n3: step 3: computing\n4: [stderr] warning: using fallback arithmetic\n" in detail.stdout
    assert "2: step 2: connecting" not in detail.stdout
    assert "[Output truncated: Showing last 2 of 4 lines]\n[2 lines omitted]" in detail.stdout

    data = json.loads(cli(project, "show", "latest", "test_mixed.py::test_output_then_fail", "--json").stdout)
    assert data["status"] == "failed" and [p["phase"] for p in data["phases"]] == [
        "setup",
        "call",
        "teardown",
    ]


def test_errors_are_one_line_with_what_to_do(project: Path, tmp_path: Path) -> None:
    unknown = cli(project, "show", "nope")
    assert unknown.returncode == 3 and "Unknown run 'nope'. Recorded runs, newest first:" in unknown.stderr
    nothing = cli(tmp_path, "runs")
    assert nothing.returncode == 2
    assert nothing.stderr.startswith(
        f"mcpdebug: no recorded runs: looked for {tmp_path.resolve() / '.mcpdebug'}"
    )
    assert (
        "Record a run with `pytest --mcp-debug` in the project first, or pass --dir PROJECT" in nothing.stderr
    )
    assert "Traceback" not in nothing.stderr + unknown.stderr


def test_failure_shows_frames_and_locals_of_a_failure(project: Path) -> None:
    first = cli(project, "failure")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("FAILED test_assertion.py::test_order_total (call) in run ")
    assert f"Raised at {project / 'test_assertion.py'}:27 in test_order_total()" in first.stdout
    assert "customer (str) = 'ada@example.com'" in first.stdout
    assert "Other failures in this run (3):" in first.stdout
    setup = cli(project, "failure", "latest", "test_query_users")
    assert setup.returncode == 0 and "RuntimeError: database unavailable" in setup.stdout
    unknown = cli(project, "failure", "latest", "nope")
    assert unknown.returncode == 3 and "No test matching 'nope'" in unknown.stderr
