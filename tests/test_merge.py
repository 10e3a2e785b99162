"""CI shards made one run: real shard runs recorded apart, merged with `mcpdebug merge`, read back.

Each shard is an inner pytest run in a folder of its own (a CI runner's checkout) recorded with one
``--mcp-debug-run-id``; `mcpdebug merge` takes their `.mcpdebug/` folders (spool files, or stores once
something read them) and the merged store answers as one run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MCPDEBUG
from helpers import FAST

SHARD_ONE = """
import os

def test_tiers():
    tiers = os.environ.get("TIERS", "gold, silver").split(",")
    assert tiers == ["gold", "silver"]

def test_prints():
    print("a line from shard one")
"""
SHARD_TWO = """
def test_two_a():
    print("a line from shard two")

def test_two_b():
    pass
"""


def record_shard(
    base: Path, name: str, suite: str, *args: str, env: dict[str, str] | None = None, flag: bool = True
) -> Path:
    """One shard's run in its own folder (its own checkout, as on its own runner); ``flag``: with
    ``--mcp-debug`` (without, the run id or shard label given on the command line turns it on)."""
    folder = base / name
    folder.mkdir(exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / f"test_{name}.py").write_text(suite)
    subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, "-q", *(["--mcp-debug"] if flag else []), *args],
        cwd=folder,
        env={**os.environ, **(env or {})},
        capture_output=True,
        timeout=120,
        check=False,
    )
    return folder / ".mcpdebug"


def mcpdebug(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPDEBUG, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def shards(tmp_path: Path) -> tuple[Path, Path]:
    one = record_shard(
        tmp_path, "one", SHARD_ONE, "--mcp-debug-run-id=ci-42", "--mcp-debug-shard=one", flag=False
    )
    two = record_shard(
        tmp_path, "two", SHARD_TWO, "--mcp-debug-run-id=ci-42", "-n", "2", env={"MCPDEBUG_SHARD": "two"}
    )
    return one, two


def test_two_shards_merged_are_one_run(tmp_path: Path, shards: tuple[Path, Path]) -> None:
    """The issue's acceptance: show lists all four tests, failure shows a shard's failure with its
    locals, and --markdown prints a Markdown summary."""
    one, two = shards
    merged = mcpdebug("merge", str(one), str(two), "--dir", "merged", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    assert (
        "Run ci-42: finished, exit status 1 (tests failed); 4 tests: 1 failed, 3 passed; 2 shards: one, two"
        in (merged.stdout)
    )
    shown = mcpdebug("show", "ci-42", "--dir", "merged", cwd=tmp_path).stdout
    for test in (
        "test_one.py::test_tiers",
        "test_one.py::test_prints",
        "test_two.py::test_two_a",
        "test_two_b",
    ):
        assert test in shown
    assert "Shards (2), merged from one run id:" in shown
    assert "- one on " in shown and "- two on " in shown
    failure = mcpdebug("failure", "ci-42", "--dir", "merged", cwd=tmp_path).stdout
    assert "FAILED test_one.py::test_tiers" in failure
    assert "tiers (list) = ['gold', ' silver']" in failure
    logs = mcpdebug("logs", "ci-42", "test_two_a", "--dir", "merged", cwd=tmp_path).stdout
    assert "a line from shard two" in logs
    markdown = mcpdebug("show", "ci-42", "--markdown", "--dir", "merged", cwd=tmp_path).stdout
    assert markdown.startswith("### ❌ pytest: 1 failed, 3 passed (run `ci-42`)")
    assert "| one | " in markdown and "| two | " in markdown
    assert "- **FAILED** `test_one.py::test_tiers`, shard one:" in markdown
    assert "`test_tiers() at line 6: tiers = ['gold', ' silver']`" in markdown
    assert "mcpdebug failure ci-42 test_one.py::test_tiers --dir merged" in markdown


def _snapshot(store: Path) -> dict[str, object]:
    """What a store holds, to compare before and after a second merge."""
    import sqlite3

    db = sqlite3.connect(store / "store.sqlite3")
    try:
        counted = {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("runs", "events", "tests", "phases", "failures", "outputs", "segments", "shards")
        }
        counted["lines"] = db.execute("SELECT sum(lines) FROM outputs").fetchone()[0]
        files = sorted(
            (p.relative_to(store).as_posix(), p.stat().st_size) for p in (store / "output").rglob("*")
        )
        return {**counted, "files": files}
    finally:
        db.close()


def test_merging_again_changes_nothing_whether_from_spools_or_stores(
    tmp_path: Path, shards: tuple[Path, Path]
) -> None:
    one, two = shards
    assert mcpdebug("merge", str(one), str(two), "--dir", "merged", cwd=tmp_path).returncode == 0
    first = _snapshot(tmp_path / "merged")
    # the same shards again, as spool folders; then as stores (a read took their spools in)
    again = mcpdebug("merge", str(tmp_path / "one"), str(tmp_path / "two"), "--dir", "merged", cwd=tmp_path)
    assert "ci-42: 0 new test(s), 2 already here" in again.stdout
    assert _snapshot(tmp_path / "merged") == first
    for shard in (one, two):
        assert mcpdebug("runs", "--dir", str(shard), cwd=tmp_path).returncode == 0
        assert (shard / "store.sqlite3").is_file() and not list((shard / "spool").glob("*.jsonl"))
    stores = mcpdebug("merge", str(one), str(two), "--dir", "merged", cwd=tmp_path)
    assert stores.stdout.count("store ") == 2 and "0 new test(s), 2 already here" in stores.stdout
    assert _snapshot(tmp_path / "merged") == first
    # and stores into a fresh one make the same run
    fresh = mcpdebug("merge", str(tmp_path), "--dir", "fresh", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    shown = mcpdebug("show", "ci-42", "--dir", "fresh", cwd=tmp_path).stdout
    assert "Tests: 4 collected; 1 failed, 3 passed" in shown
    logs = mcpdebug("logs", "ci-42", "test_prints", "--dir", "fresh", cwd=tmp_path).stdout
    assert "a line from shard one" in logs


def test_conflicting_records_are_reported_and_left_out(tmp_path: Path, shards: tuple[Path, Path]) -> None:
    """Shard one run again (another process under the same label; its test now passes): the merged
    store keeps the first run's records and lists what it left out."""
    one, two = shards
    assert mcpdebug("merge", str(one), str(two), "--dir", "merged", cwd=tmp_path).returncode == 0
    (tmp_path / "rerun").mkdir()
    rerun = record_shard(
        tmp_path / "rerun",
        "one",
        SHARD_ONE,
        "--mcp-debug-run-id=ci-42",
        "--mcp-debug-shard=one",
        env={"TIERS": "gold,silver"},
    )
    merged = mcpdebug("merge", str(rerun), "--dir", "merged", cwd=tmp_path)
    assert merged.returncode == 0
    assert "conflict: ci-42 test_one.py::test_tiers: kept failed on one:main" in merged.stderr
    assert "left out passed on one:main" in merged.stderr
    assert "conflict: ci-42 shard 'one': kept the one run by main-" in merged.stderr
    assert "give each shard its own --mcp-debug-shard" in merged.stderr
    assert "conflict(s): the merged store kept what it held first" in merged.stdout
    shown = mcpdebug("show", "ci-42", "--dir", "merged", cwd=tmp_path).stdout
    assert "Tests: 4 collected; 1 failed, 3 passed" in shown
    # the three in one command: each source is compared with what the ones before it stored
    together = mcpdebug("merge", str(one), str(two), str(rerun), "--dir", "together", cwd=tmp_path)
    assert together.returncode == 0, together.stderr
    assert "conflict: ci-42 test_one.py::test_tiers: kept failed on one:main" in together.stderr
    assert (
        "conflict: ci-42 test_one.py::test_prints: kept passed on one:main" in together.stderr
    )  # ended later
    assert "conflict: ci-42 shard 'one': kept the one run by main-" in together.stderr
    assert together.stderr.count("conflict: ") == 3
    shown = mcpdebug("show", "ci-42", "--dir", "together", cwd=tmp_path).stdout
    assert "Tests: 4 collected; 1 failed, 3 passed" in shown


def test_unlabelled_shards_in_one_folder_are_a_conflict(tmp_path: Path) -> None:
    """download-artifact's merge-multiple puts every shard's spool files in one folder: without labels
    two processes claim the run's one shard, and the merge says so rather than mixing them."""
    one = record_shard(tmp_path, "one", SHARD_ONE, "--mcp-debug-run-id=ci-7")
    two = record_shard(tmp_path, "two", SHARD_TWO, "--mcp-debug-run-id=ci-7")
    together = tmp_path / "all"
    together.mkdir()
    for spool in [*(one / "spool").glob("*.jsonl"), *(two / "spool").glob("*.jsonl")]:
        shutil.copy(spool, together)
    merged = mcpdebug("merge", str(together), "--dir", "merged", cwd=tmp_path)
    assert merged.returncode == 0
    assert "ci-7 its shard without a label" in merged.stderr
    shown = mcpdebug("show", "ci-7", "--dir", "merged", "--all", cwd=tmp_path).stdout
    assert "test_two.py::test_two_a" in shown and "test_one.py::test_prints" in shown  # tests all kept


def test_merge_says_what_is_wrong_with_its_sources(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("not a store")
    for args, message in (
        (["missing"], "does not exist"),
        (["empty"], "holds no recorded runs"),
        (["notes.txt"], "is a file, not a store or a spool file"),
    ):
        result = mcpdebug("merge", *args, "--dir", "merged", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.startswith("mcpdebug merge: ") and message in result.stderr
        assert "Traceback" not in result.stderr


def test_the_environment_and_ci_job_are_recorded_with_secrets_hidden(tmp_path: Path) -> None:
    """What the run ran in: a GitHub Actions job (its variables), the tier list with its spaces, a
    token under a secret's name and a password inside a URL."""
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKFLOW": "CI",
        "GITHUB_JOB": "tests",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_SHA": "4f2a9c1e" * 5,
        "GITHUB_REF_NAME": "main",
        "GITHUB_REPOSITORY": "acme/shop",
        "TIERS": "gold, silver",
        "DEPLOY_TOKEN": "hunter2hunter2",
        "DATABASE_URL": "postgres://admin:s3cret@db:5432/shop",
    }
    store = record_shard(
        tmp_path, "one", SHARD_ONE, "--mcp-debug-run-id=ci-9", "--mcp-debug-shard=one", env=env
    )
    shown = mcpdebug("show", "ci-9", "--dir", str(store), cwd=tmp_path).stdout
    assert "CI: github: workflow CI, job tests, run 4242, commit 4f2a9c1e4f2a, branch main" in shown
    assert "(https://github.com/acme/shop/actions/runs/4242)" in shown
    listed = mcpdebug("show", "ci-9", "--env", "--dir", str(store), cwd=tmp_path).stdout
    assert "  TIERS=gold, silver" in listed
    assert "  DEPLOY_TOKEN=<redacted>" in listed and "hunter2" not in listed
    assert "  DATABASE_URL=postgres://admin:<redacted>@db:5432/shop" in listed
    only = mcpdebug("show", "ci-9", "--env=tier", "--dir", str(store), cwd=tmp_path).stdout
    assert "TIERS=gold, silver" in only and "DATABASE_URL" not in only
    raw = (
        b"".join(p.read_bytes() for p in (store / "spool").glob("*.jsonl"))
        if (store / "spool").is_dir()
        else b""
    )
    assert b"hunter2" not in raw and b"s3cret" not in raw  # hidden before it left the test process
    assert (
        json.loads(mcpdebug("runs", "--json", "--dir", str(store), cwd=tmp_path).stdout)[0]["run_id"]
        == "ci-9"
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--mcp-debug-shard=a b"], {}, "--mcp-debug-shard='a b' is not a shard label"),
        ([], {"MCPDEBUG_SHARD": "../x"}, "environment variable MCPDEBUG_SHARD='../x' is not a shard label"),
        (["--mcp-debug-run-id=../etc"], {}, "--mcp-debug-run-id='../etc' is not a run id"),
    ],
)
def test_bad_run_ids_and_shard_labels_say_where_they_came_from(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest_subprocess(*FAST, "--mcp-debug", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
