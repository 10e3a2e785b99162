"""`mcpdebug init` as a user runs it in a project folder: what it writes, what it shows first, what
it leaves alone, and that a second run changes nothing. The acceptance (issue 44): the `.mcp.json`
it writes starts a server that answers the MCP SDK's stdio client given only the environment that
client passes, and a plain `pytest` run afterwards is recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import get_default_environment, stdio_client

from conftest import MCPDEBUG

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

VENV_BIN = str(Path(sys.executable).parent)
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if p != VENV_BIN)
PYPROJECT = """\
[project]
name = "shop"   # the distribution
version = "0.1"

# linting
[tool.ruff]
line-length = 100

[build-system]
requires = ["hatchling"]
"""
SHOP = "def total(prices):\n    return sum(prices)\n"
TESTS = "from shop import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n"


def init(project: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`mcpdebug init` run without a terminal (as an agent or a script runs it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = BARE_PATH
    return subprocess.run(
        [MCPDEBUG, "init", *args],
        cwd=cwd or project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def src_project(root: Path) -> Path:
    (root / "src" / "shop").mkdir(parents=True)
    (root / "src" / "shop" / "__init__.py").write_text(SHOP)
    (root / "tests").mkdir()
    (root / "tests" / "test_shop.py").write_text(TESTS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def flat_project(root: Path) -> Path:
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text(SHOP)
    (root / "test_shop.py").write_text(TESTS)
    return root


def server_of(path: Path, key: str = "mcpServers") -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(path.read_text())[key]["mcpdebug"]
    return entry


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_src_layout_project_gets_its_config_clients_and_agents_md(tmp_path: Path) -> None:
    project = src_project(tmp_path / "shop")
    done = init(project)
    assert done.returncode == 0, done.stderr
    # each change shown before it is written, as a diff
    assert "+[tool.pytest.ini_options]" in done.stdout and "+mcpdebug = true" in done.stdout
    assert "--- /dev/null\n+++ b/.mcp.json" in done.stdout
    text = (project / "pyproject.toml").read_text()
    assert text.startswith(
        PYPROJECT.rstrip("\n").rsplit("\n[build-system]", 1)[0]
    )  # the user's lines as written
    assert '[build-system]\nrequires = ["hatchling"]\n' in text
    config = tomllib.loads(text)
    assert config["tool"]["pytest"]["ini_options"] == {"mcpdebug": True, "mcpdebug_timeout": 60}
    assert config["tool"]["ruff"] == {"line-length": 100} and config["project"]["name"] == "shop"

    claude = server_of(project / ".mcp.json")
    assert claude["type"] == "stdio" and claude["command"] == MCPDEBUG  # absolute: works whatever PATH is
    assert claude["args"] == ["serve", "--dir", str(project / ".mcpdebug")]
    assert claude["env"] == {"PYTHONPATH": str(project / "src")}  # shop is not installed here
    vscode = server_of(project / ".vscode" / "mcp.json", "servers")
    assert vscode == claude
    cursor = server_of(project / ".cursor" / "mcp.json")
    assert cursor == {k: v for k, v in claude.items() if k != "type"}
    agents = (project / "AGENTS.md").read_text()
    assert agents.startswith("<!-- mcpdebug:begin") and agents.rstrip().endswith("<!-- mcpdebug:end -->")
    assert f"`{MCPDEBUG} show`" in agents and "`get_failure`" in agents and "over 60 s" in agents
    # an agent reads it every session; measured without the install path, which varies by machine
    assert len(agents.replace(MCPDEBUG, "mcpdebug")) < 1500
    assert not (project / "CLAUDE.md").exists()  # only where it exists

    before = snapshot(project)
    again = init(project)
    assert again.returncode == 0 and "Nothing to change: the project is ready for agents." in again.stdout
    assert "---" not in again.stdout and "Up to date: pyproject.toml, .mcp.json" in again.stdout
    assert snapshot(project) == before


def test_a_flat_project_without_config_gets_a_pytest_ini_and_no_pythonpath(tmp_path: Path) -> None:
    project = flat_project(tmp_path / "flat")
    done = init(project, "--timeout", "20", "--clients", "claude")
    assert done.returncode == 0, done.stderr
    assert (project / "pytest.ini").read_text().splitlines()[-2:] == [
        "mcpdebug = true",
        "mcpdebug_timeout = 20",
    ]
    assert "env" not in server_of(project / ".mcp.json")  # `python -m pytest` in the project imports shop
    assert not (project / ".vscode").exists() and not (project / ".cursor").exists()
    assert "over 20 s" in (project / "AGENTS.md").read_text()


def test_the_pythonpath_the_tests_need_and_only_that(tmp_path: Path) -> None:
    project = src_project(tmp_path / "shop")
    (project / "pyproject.toml").write_text(PYPROJECT + '\n[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    assert init(project, "--clients", "claude").returncode == 0
    assert "env" not in server_of(project / ".mcp.json")  # pytest puts src/ on sys.path itself
    libs = tmp_path / "libs"
    libs.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PATH=BARE_PATH, PYTHONPATH=f"../libs{os.pathsep}{libs}")  # as the user's shell has it
    done = subprocess.run(
        [MCPDEBUG, "init", "--clients", "claude"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert server_of(project / ".mcp.json")["env"] == {"PYTHONPATH": str(libs)}  # absolute, once
    assert "PYTHONPATH is set here" in done.stdout


def test_an_inline_table_is_merged_into(tmp_path: Path) -> None:
    project = flat_project(tmp_path / "p")
    inline = '[tool.pytest]\nini_options = { addopts = "-q" }\n'
    (project / "pyproject.toml").write_text(inline)
    assert init(project, "--clients", "none", "--no-agents-md").returncode == 0
    assert tomllib.loads((project / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"] == {
        "addopts": "-q",
        "mcpdebug": True,
        "mcpdebug_timeout": 60,
    }


def test_dry_run_and_check_write_nothing(tmp_path: Path) -> None:
    project = src_project(tmp_path / "shop")
    before = snapshot(project)
    dry = init(project, "--dry-run")
    assert dry.returncode == 0 and "Dry run: nothing written (5 file(s) would change)." in dry.stdout
    assert "+mcpdebug_timeout = 60" in dry.stdout and snapshot(project) == before
    check = init(project, "--check")
    assert check.returncode == 1 and snapshot(project) == before
    assert init(project).returncode == 0
    assert init(project, "--check").returncode == 0


def test_existing_files_are_merged_into_and_the_users_content_kept(tmp_path: Path) -> None:
    project = src_project(tmp_path / "shop")
    pyproject = PYPROJECT + (
        "\n[tool.pytest.ini_options]\n"
        'addopts = "-q"  # quiet\n'
        'testpaths = [\n    "tests",\n]\n'
        "mcpdebug_timeout = 30\n"
        "\n# coverage comes next\n"
        "[tool.coverage.run]\nbranch = true\n"
    )
    (project / "pyproject.toml").write_text(pyproject)
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "db": {"command": "db-mcp", "args": ["--ro"]},
                    "mcpdebug": {
                        "command": "mcpdebug",
                        "args": ["serve", "--tools", "runs,failures"],
                        "env": {"FOO": "1"},
                        "disabled": False,
                    },
                }
            },
            indent=4,
        )
    )
    (project / ".vscode").mkdir()
    vscode = {
        "inputs": [{"id": "token", "type": "promptString"}],
        "servers": {"gh": {"type": "http", "url": "x"}},
    }
    (project / ".vscode" / "mcp.json").write_text(json.dumps(vscode))
    (project / "AGENTS.md").write_text("# Shop\n\nRun `make lint` before committing.\n")
    (project / "CLAUDE.md").write_text("# Claude\r\nBe brief.\r\n")

    done = init(project)
    assert done.returncode == 0, done.stderr
    text = (project / "pyproject.toml").read_text()
    assert text.replace("mcpdebug = true\n", "") == pyproject  # one line added, none changed
    assert text.index("mcpdebug = true") < text.index("# coverage comes next")  # in its table, not the next
    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert claude["db"] == {"command": "db-mcp", "args": ["--ro"]}
    ours = claude["mcpdebug"]
    assert ours["command"] == MCPDEBUG and ours["disabled"] is False
    assert ours["args"] == ["serve", "--dir", str(project / ".mcpdebug"), "--tools", "runs,failures"]
    assert ours["env"] == {"FOO": "1", "PYTHONPATH": str(project / "src")}
    assert (project / ".mcp.json").read_text().startswith('{\n    "mcpServers"')  # its indentation
    code = json.loads((project / ".vscode" / "mcp.json").read_text())
    assert code["inputs"] == vscode["inputs"] and code["servers"]["gh"] == vscode["servers"]["gh"]
    agents = (project / "AGENTS.md").read_text()
    assert agents.startswith("# Shop\n\nRun `make lint` before committing.\n\n<!-- mcpdebug:begin")
    claude_md = (project / "CLAUDE.md").read_bytes()
    assert claude_md.startswith(
        b"# Claude\r\nBe brief.\r\n\r\n<!-- mcpdebug:begin"
    ) and b"\n" not in claude_md.replace(b"\r\n", b"")

    # the timeout chosen later: only that line, and the section between the markers, change
    (project / "AGENTS.md").write_text(agents + "\n## Later\nA note written after init.\n")
    changed = init(project, "--timeout", "90")
    assert changed.returncode == 0, changed.stderr
    assert (project / "pyproject.toml").read_text() == text.replace(
        "mcpdebug_timeout = 30", "mcpdebug_timeout = 90"
    )
    agents_now = (project / "AGENTS.md").read_text()
    assert "over 90 s" in agents_now and "over 30 s" not in agents_now
    assert agents_now.count("<!-- mcpdebug:begin") == 1 and agents_now.endswith(
        "## Later\nA note written after init.\n"
    )
    assert init(project).returncode == 0 and "Nothing to change" in init(project).stdout


@pytest.mark.parametrize(
    ("name", "content", "section"),
    [
        (
            "tox.ini",
            "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -q\n\n[testenv]\ndeps = pytest\n",
            "[pytest]",
        ),
        ("setup.cfg", "[metadata]\nname = shop\n\n[tool:pytest]\ntestpaths=tests\n", "[tool:pytest]"),
        ("pytest.toml", '[pytest]\naddopts = ["-q"]\n', "[pytest]"),
    ],
)
def test_each_kind_of_pytest_config_is_merged_into_and_read_by_pytest(
    tmp_path: Path, name: str, content: str, section: str
) -> None:
    if name == "pytest.toml" and int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("pytest.toml is read by pytest 9 and later")
    project = flat_project(tmp_path / "p")
    (project / name).write_text(content)
    assert init(project, "--coverage", "--clients", "none", "--no-agents-md").returncode == 0
    text = (project / name).read_text()
    assert text.startswith(content.split(section)[0] + section)
    assert not (project / "pytest.ini").exists() and not (project / "AGENTS.md").exists()
    assert not (project / ".mcp.json").exists()
    # pytest reads what init wrote: the run is recorded, with per-test coverage
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("MCPDEBUG")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mcpdebug: run " in run.stdout and (project / ".mcpdebug" / "coverage").is_dir()


def test_a_file_with_crlf_line_endings_keeps_them(tmp_path: Path) -> None:
    project = src_project(tmp_path / "shop")
    crlf = PYPROJECT.replace("\n", "\r\n").encode()
    (project / "pyproject.toml").write_bytes(crlf)
    assert init(project, "--clients", "none", "--no-agents-md").returncode == 0
    written = (project / "pyproject.toml").read_bytes()
    assert written.startswith(crlf.split(b"[build-system]")[0]) and b"mcpdebug = true\r\n" in written
    assert b"\n" not in written.replace(b"\r\n", b"")


def test_bad_input_is_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    assert "is not a folder" in init(tmp_path, str(tmp_path / "missing")).stderr
    bad_clients = init(tmp_path, "--clients", "emacs")
    assert bad_clients.returncode == 2 and "--clients takes" in bad_clients.stderr
    assert init(tmp_path, "--timeout", "-1").returncode == 2
    project = flat_project(tmp_path / "p")
    (project / "pyproject.toml").write_text("[project\nname = 'x'\n")
    broken = init(project)
    assert (
        broken.returncode == 2 and "is not valid TOML" in broken.stderr and "Traceback" not in broken.stderr
    )
    (project / "pyproject.toml").unlink()
    (project / ".vscode").mkdir()
    commented = '{\n  // my servers\n  "servers": {}\n}\n'
    (project / ".vscode" / "mcp.json").write_text(commented)
    (project / "AGENTS.md").write_text("<!-- mcpdebug:begin -->\nhalf a section\n")
    partly = init(project)
    assert partly.returncode == 1  # the rest written, these two left as they are, each said once
    assert (project / ".vscode" / "mcp.json").read_text() == commented
    assert (
        "is not plain JSON (comments?)" in partly.stderr and '"mcpdebug": {"type": "stdio"' in partly.stderr
    )
    assert "one of the mcpdebug section's markers without the other" in partly.stderr
    assert (project / ".mcp.json").is_file() and (project / "pytest.ini").is_file()


def test_the_projects_own_virtualenv_runs_the_server(tmp_path: Path) -> None:
    """A project with its own `.venv` holding pytest-mcpdebug: its tests' dependencies are there, so
    the config names that environment's `mcpdebug`; and AGENTS.md names it by its relative path."""
    project = flat_project(tmp_path / "p")
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.base_prefix) / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "mcpdebug").symlink_to(MCPDEBUG)
    done = init(project, "--clients", "claude")
    assert done.returncode == 0, done.stderr
    assert server_of(project / ".mcp.json")["command"] == str(venv / "bin" / "mcpdebug")
    assert "`.venv/bin/mcpdebug show`" in (project / "AGENTS.md").read_text()
    (venv / "bin" / "mcpdebug").unlink()  # a venv without it: said, and this environment's used
    (project / ".mcp.json").unlink()
    warned = init(project, "--clients", "claude")
    assert (
        "has no pytest-mcpdebug" in warned.stdout and server_of(project / ".mcp.json")["command"] == MCPDEBUG
    )


@pytest.mark.anyio
async def test_acceptance_the_written_server_answers_and_a_plain_pytest_run_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = src_project(tmp_path / "shop")
    assert init(project).returncode == 0
    entry = server_of(project / ".mcp.json")
    # what the SDK's stdio client passes (HOME, PATH, ...: no virtualenv on PATH, no PYTHONPATH),
    # plus the config's env, from a folder that is not the project
    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = {**get_default_environment(), **entry.get("env", {})}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd="/")
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("run_tests", {"args": ["-p", "no:randomly"]})
            text = result.content[0].text
            assert not result.is_error, text
            assert "1 passed" in text and f"Directory: {project};" in text, text
    # a plain `pytest` in the project (the user's shell: PYTHONPATH=src, no --mcp-debug) is recorded
    shell = {"PATH": os.pathsep.join([VENV_BIN, BARE_PATH]), "PYTHONPATH": "src", "HOME": os.environ["HOME"]}
    plain = subprocess.run(
        ["pytest", "-p", "no:randomly"], cwd=project, env=shell, capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "mcpdebug: run " in plain.stdout
    runs = subprocess.run(
        [MCPDEBUG, "runs", "--json"], cwd=project, capture_output=True, text=True, timeout=60
    )
    listed = json.loads(runs.stdout)
    assert [r["label"] for r in listed][:2] == ["pytest -p no:randomly", "pytest --mcp-debug -p no:randomly"]
    assert all(r["counts"] == {"passed": 1} for r in listed[:2])
    shown = subprocess.run([MCPDEBUG, "show"], cwd=project, capture_output=True, text=True, timeout=60)
    assert "Command: pytest -p no:randomly" in shown.stdout and "1 passed" in shown.stdout, shown.stdout


def on_a_terminal(project: Path, answer: bytes, *args: str) -> str:
    """`mcpdebug init` in a pseudo-terminal, answering its question with ``answer``."""
    import pty
    import select
    import time

    leader, follower = pty.openpty()
    env = {"PATH": BARE_PATH, "HOME": os.environ["HOME"], "TERM": "dumb", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [MCPDEBUG, "init", *args], cwd=project, stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the command ended and everything was read
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[Y/n] " in seen:
                os.write(leader, answer)
                answered = True
            if process.poll() is not None and not ready:
                break
    finally:
        os.close(leader)
        process.wait(timeout=30)
    return seen.decode().replace("\r\n", "\n")


def test_on_a_terminal_it_asks_before_writing(tmp_path: Path) -> None:
    project = flat_project(tmp_path / "p")
    before = snapshot(project)
    refused = on_a_terminal(project, b"n\n")
    assert "+mcpdebug = true" in refused and "Write these 5 changes? [Y/n] " in refused
    assert "Nothing written." in refused and snapshot(project) == before
    accepted = on_a_terminal(project, b"\n")
    assert "Wrote pytest.ini, .mcp.json, .vscode/mcp.json, .cursor/mcp.json, AGENTS.md." in accepted
    assert (project / "pytest.ini").is_file()
    assert "Nothing to change" in on_a_terminal(project, b"\n", "--yes")


COMMENTED_INI = """\
[pytest]
addopts =
  # Show 10 slowest invocations:
  --durations=10

  # Report all the things == -rxXs:
  -ra
  # --strict-config
  --strict-markers

filterwarnings =
  error

  # a warning we cannot fix
  ignore:Unclosed client session:ResourceWarning
"""


def test_a_pytest_ini_whose_values_hold_comments_and_blank_lines_is_merged_into(tmp_path: Path) -> None:
    """aiohttp's layout: each option of `addopts` under its own comment, blank lines between, and a
    multi-line `filterwarnings` last. pytest (iniconfig) reads a value across blank and comment lines;
    init must too, and add its keys after the last value line, with ` = ` (the first key's value
    starts on the next line and says nothing about spacing)."""
    import iniconfig

    project = flat_project(tmp_path / "p")
    (project / "pytest.ini").write_text(COMMENTED_INI)
    done = init(project, "--clients", "none", "--no-agents-md")
    assert done.returncode == 0, done.stdout + done.stderr
    text = (project / "pytest.ini").read_text()
    assert text.startswith(COMMENTED_INI) and text.endswith("mcpdebug = true\nmcpdebug_timeout = 60\n")
    section = iniconfig.IniConfig(project / "pytest.ini")["pytest"]
    assert section["addopts"].split() == ["--durations=10", "-ra", "--strict-markers"]
    assert section["filterwarnings"].splitlines() == [
        "error",
        "ignore:Unclosed client session:ResourceWarning",
    ]
    assert (section["mcpdebug"], section["mcpdebug_timeout"]) == ("true", "60")
    assert init(project, "--clients", "none", "--no-agents-md").returncode == 0
    assert (project / "pytest.ini").read_text() == text  # idempotent
