"""Hints that work as pasted (issue 44): the README's flow installs into `.venv/` and never puts it on
PATH, so every printed command names the path that runs `mcpdebug` there, and carries `--dir`.

Each hint is pasted as printed into a real shell (`bash -c`) whose PATH has no virtualenv on it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MCPDEBUG
from helpers import run_inner
from pytest_mcpdebug.commands import program, shortest

VENV_BIN = str(Path(sys.executable).parent)
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if p != VENV_BIN)
DEMO = """
def test_ok():
    pass

def test_total():
    total = 3
    assert total == 4
"""


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user pastes it into a shell without the virtualenv on PATH."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": BARE_PATH, "HOME": os.environ.get("HOME", "/tmp"), "COLUMNS": "200"},
    )


@pytest.fixture
def demo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project `demo/` recorded by pytest started in its parent folder, with no venv on PATH."""
    monkeypatch.setenv("PATH", BARE_PATH)
    project = pytester.path / "demo"
    project.mkdir()
    (project / "test_demo.py").write_text(DEMO)
    result = run_inner(pytester, "--mcp-debug", "demo", "--rootdir", str(project))
    pytester.path.joinpath("closing-line.txt").write_text(result.stdout.str())
    return project


def test_the_inspect_hint_works_pasted_into_a_shell_without_the_venv(
    pytester: pytest.Pytester, demo: Path
) -> None:
    out = pytester.path.joinpath("closing-line.txt").read_text()
    inspect = re.search(r"inspect it with `([^`]*)`, or serve it to an agent with `([^`]*)`", out)
    assert inspect, out
    show, serve = inspect[1], inspect[2]
    assert show.split()[0] == MCPDEBUG  # `mcpdebug` is not on this PATH: its path (shorter than ../../..)
    assert show.endswith(" --dir demo") and serve == f"{MCPDEBUG} serve --dir demo"
    assert pasted("mcpdebug --version", pytester.path).returncode == 127  # as a user's shell would say
    shown = pasted(show, pytester.path)
    assert shown.returncode == 0, shown.stderr
    assert "FAILED test_demo.py::test_total (call): assert 3 == 4" in shown.stdout


def test_every_next_hint_of_the_cli_works_pasted_from_the_same_folder(
    pytester: pytest.Pytester, demo: Path
) -> None:
    shown = pasted(f"{MCPDEBUG} show --dir demo", pytester.path)
    assert shown.returncode == 0, shown.stderr
    next_line = next(line for line in shown.stdout.splitlines() if line.startswith("Next: "))
    hints = [h for h in re.findall(r"`([^`]*)`", next_line) if "..." not in h]
    assert len(hints) >= 2, next_line
    for hint in hints:
        assert hint.startswith(f"{MCPDEBUG} ") and hint.endswith(" --dir demo"), hint
        done = pasted(hint, pytester.path)
        assert done.returncode == 0, (hint, done.stderr)
    failure = pasted(hints[0], pytester.path)
    assert "total = 3" in failure.stdout  # the failing frame's locals: the hint named the failure
    # from inside the project the store is found without --dir, so the hints leave it out
    inside = pasted(f"{MCPDEBUG} show", demo)
    assert "--dir" not in inside.stdout and f"`{shortest(Path(MCPDEBUG), demo)} failure " in inside.stdout


def test_a_venv_on_path_is_named_bare_and_another_mcpdebug_on_path_is_not_trusted(tmp_path: Path) -> None:
    venv_first = os.pathsep.join([VENV_BIN, BARE_PATH])
    assert subprocess_program(tmp_path, venv_first) == "mcpdebug"
    other = tmp_path / "other-env"
    other.mkdir()
    impostor = other / "mcpdebug"
    impostor.write_text("#!/bin/sh\necho another version\n")
    impostor.chmod(0o755)
    assert subprocess_program(tmp_path, os.pathsep.join([str(other), BARE_PATH])) == MCPDEBUG
    # relative to where the command is typed when that is shorter; `./x`, never a bare name
    bin_dir = Path(VENV_BIN)
    assert shortest(bin_dir / "mcpdebug", bin_dir) == "./mcpdebug"
    assert shortest(bin_dir / "mcpdebug", bin_dir.parent) == "bin/mcpdebug"
    from_root = program("mcpdebug", Path("/"))
    assert from_root == "mcpdebug" or Path("/", from_root).resolve() == Path(MCPDEBUG).resolve()


def subprocess_program(cwd: Path, path: str) -> str:
    code = (
        "from pathlib import Path; from pytest_mcpdebug.commands import program; print(program('mcpdebug'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env={"PATH": path}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_hang_summary_names_the_command_that_runs_here(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("PATH", BARE_PATH)
    project = pytester.path / "slow"
    project.mkdir()
    (project / "test_slow.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(30)\n")
    result = run_inner(pytester, "--mcp-debug-timeout=0.5", "slow", "--rootdir", str(project))
    line = next(x for x in result.stdout.lines if x.startswith("  more: "))  # after the hang's headline
    command = re.search(r"`([^`]*)`", line)
    assert command and command[1].startswith(f"{MCPDEBUG} failure ") and command[1].endswith(" --dir slow")
    assert "test_slow.py::test_sleeps" in command[1]  # the one hang's test: it works as pasted
    shown = pasted(command[1], pytester.path)
    assert shown.returncode == 0, shown.stderr
    assert "blocked in `time.sleep(30)`" in shown.stdout
    assert "Threads (" in shown.stdout and "shows every thread" not in shown.stdout  # all of get_hang, here


def test_suspects_without_coverage_say_the_command_that_records_it(
    pytester: pytest.Pytester, suite, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", BARE_PATH)
    suite("suspects")
    run_inner(pytester, "--mcp-debug")
    answer = pasted(f"{MCPDEBUG} suspects", pytester.path)
    assert answer.returncode == 0, answer.stderr  # an answer, not an error
    assert "was recorded without per-test coverage, so there are no suspects to rank" in answer.stdout
    again = re.search(r"run its tests again with coverage: `([^`]*)`; then `([^`]*)`", answer.stdout)
    assert again, answer.stdout
    assert "--mcp-debug-coverage" in again[1] and again[2] == f"{MCPDEBUG} suspects latest"
    assert pasted(again[1], pytester.path).returncode == 1  # the suite has failing tests: pytest says 1
    ranked = pasted(again[2], pytester.path)
    assert ranked.returncode == 0 and "shop/pricing.py:16 in discount" in ranked.stdout, ranked.stdout
