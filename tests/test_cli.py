"""`mcpdebug runs` and `mcpdebug show`, as a user runs them in a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
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


def in_terminal(cwd: Path, *args: str, columns: int = 80) -> str:
    """What `mcpdebug` prints to a terminal ``columns`` wide (a pseudo-terminal, as a user's)."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [MCPDEBUG, *args],
            cwd=cwd,
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": str(columns), "TERM": "dumb"},
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the follower side is closed and everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0, done.stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


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
    piped = subprocess.run(  # an agent's shell: a pipe, no COLUMNS; rich would fold cells at 80
        [MCPDEBUG, "runs"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    row = next(line for line in piped.splitlines() if run_id in line)
    assert "finished, exit status 1" in row and "2 failed, 2 error" in row, piped

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
    pytest_here = Path(MCPDEBUG).with_name("pytest")  # the venv is not on this PATH: its pytest, by path
    assert (
        f"Record a run with `{pytest_here} --mcp-debug` in the project first (or set it up once with "
        f"`{MCPDEBUG} init`), or pass --dir PROJECT" in nothing.stderr
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


LONG_IDS = """
import pytest

@pytest.mark.parametrize("case", [f"a-rather-long-parameter-id-number-{i:03d}" for i in range(60)])
def test_every_case_of_a_long_parametrized_name_passes(case):
    pass

def test_fails():
    assert 1 == 2
"""


def test_show_pages_and_never_breaks_a_node_id_at_80_columns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_long=LONG_IDS)
    run_inner(pytester, "--mcp-debug")
    ids = [
        f"test_long.py::test_every_case_of_a_long_parametrized_name_passes[a-rather-long-parameter-id-number-{i:03d}]"
        for i in range(60)
    ]
    shown = in_terminal(pytester.path, "show")
    lines = shown.splitlines()
    assert "- FAILED test_long.py::test_fails (call): assert 1 == 2" in lines
    listed = [n for n in ids if n in lines]  # each long id alone on its line, whole
    assert listed == ids[:50]
    assert all(
        len(line) <= 80 or line in ids for line in lines if "test_long.py" in line and "FAILED" not in line
    )
    more = " ".join(shown[shown.index("... 10 more: ") :].split())  # the hint may wrap at 80 columns
    assert "--offset 50`" in more and "`--all` for every one," in more
    # the hints of a terminal name commands, not MCP tools
    assert f"`{MCPDEBUG} failure " in shown and "get_failure(" not in shown  # mcpdebug is not on its PATH
    # into a pipe, lines stay whole: one test a line, for grep
    piped = cli(pytester.path, "show").stdout
    assert any(
        line.startswith(f"passed   {ids[0]}  ") and line.endswith("s main") for line in piped.splitlines()
    )

    rest = in_terminal(pytester.path, "show", "--offset", "50").splitlines()
    assert [n for n in ids if n in rest] == ids[50:]
    failed = cli(pytester.path, "show", "--outcome", "failed").stdout
    assert "Tests of run" in failed and "with outcome failed (1):" in failed
    assert re.search(r"FAILED   test_long.py::test_fails  \d+\.\d\ds main - assert 1 == 2", failed)
    everything = cli(pytester.path, "show", "--all").stdout
    assert all(n in everything for n in ids) and "more:" not in everything


def test_a_project_folder_is_read_through_its_store_and_never_written(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    project = pytester.path / "demo"
    project.mkdir()
    (project / "test_demo.py").write_text("def test_ok():\n    pass\n")
    result = run_inner(pytester, "--mcp-debug", "demo", "--rootdir", str(project))
    before = sorted(p.name for p in project.iterdir())
    # from the directory pytest was started in, the printed hint works as pasted
    hint = re.search(r"inspect it with `\S*mcpdebug (show [^`]*)`", result.stdout.str())
    assert hint and hint[1].endswith(" --dir demo"), result.stdout.str()
    shown = cli(pytester.path, *shlex.split(hint[1]))
    assert shown.returncode == 0 and "1 passed" in shown.stdout
    assert cli(project, "runs").returncode == 0  # from inside the project
    assert cli(tmp_path, "runs", "--dir", str(project / ".mcpdebug")).returncode == 0  # or its store
    empty = tmp_path / "empty-project"
    empty.mkdir()
    nothing = cli(tmp_path, "show", "--dir", str(empty))
    assert nothing.returncode == 2 and "Record a run with `" in nothing.stderr
    assert "pytest --mcp-debug`" in nothing.stderr and "mcpdebug init" in nothing.stderr
    assert sorted(p.name for p in project.iterdir()) == before and list(empty.iterdir()) == []
