"""What the machine gave a run, kept with it: a CI runner's one usable CPU, its ASCII locale, its user.

A pool sized by the CPUs the process may use gets one worker on a one-vCPU runner and a nested task
waits for ever; ``LC_ALL=C PYTHONUTF8=0`` makes Python's encodings ASCII. Neither is a variable the
recorded environment would show. Recorded "in CI" (``CI=true``) under ``taskset -c 0`` or that locale,
`mcpdebug failure` lists the machine facts that differ from the reader's, and `get_environment` /
``show --env`` open with a "Machine:" block. A store from before machines were kept upgrades in place.
"""

from __future__ import annotations

import json
import locale
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from test_code_environment import failure_text
from test_hangs import tool_text

from conftest import MCPDEBUG
from helpers import FAST, Events, recorded
from mcpdebug.app import build_server
from mcpdebug.store import Store
from mcpdebug.store.schema import SCHEMA_VERSION
from pytest_mcpdebug import protocol
from pytest_mcpdebug.protocol import codec
from pytest_mcpdebug.recording import machine

POOL = """
import os
from concurrent.futures import ThreadPoolExecutor


def test_nested_task():
    # sized as dask and loky size theirs: by the CPUs this process may use
    with ThreadPoolExecutor(len(os.sched_getaffinity(0))) as pool:
        outer = pool.submit(lambda: pool.submit(lambda: 1).result(timeout=1))
        assert outer.result() == 1
"""
NAMES = """
def test_writes_a_name(tmp_path):
    (tmp_path / "name.txt").write_text("Zo\\u00eb")  # the locale's encoding: ASCII with LC_ALL=C and no UTF-8 mode
"""


def usable() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


needs_two_cpus = pytest.mark.skipif(
    shutil.which("taskset") is None or usable() < 2, reason="needs taskset and two usable CPUs"
)


def record(folder: Path, suite: str, env: dict[str, str], *prefix: str, args: tuple[str, ...] = ()) -> Path:
    """The suite run in ``folder`` (``prefix``: a command it runs under, ``taskset -c 0``), recorded."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_suite.py").write_text(suite)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "LC_ALL", "PYTHONUTF8")}
    subprocess.run(
        [*prefix, sys.executable, "-m", "pytest", *FAST, "-q", "--mcp-debug", *args],
        cwd=folder,
        env={**clean, **env},
        capture_output=True,
        timeout=300,
        check=False,
    )
    return folder / ".mcpdebug"


def structured(directory: Path, tool: str, **args: object) -> dict[str, Any]:
    """A tool's structured reply, through an in-memory MCP client."""

    async def go() -> dict[str, Any]:
        async with Client(build_server(recorded(directory))) as client:
            result = await client.call_tool(tool, args)
        assert not result.is_error and result.structured_content is not None
        reply: dict[str, Any] = result.structured_content
        return reply

    return anyio.run(go)


def show_env(store: Path, *run: str) -> str:
    shown = subprocess.run(
        [MCPDEBUG, "show", *run, "--env", "--dir", str(store)], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


@needs_two_cpus
def test_a_ci_run_on_one_cpu_says_so_in_its_failure_and_its_environment(tmp_path: Path) -> None:
    store = record(tmp_path, POOL, {"CI": "true"}, "taskset", "-c", "0")
    text = failure_text(tmp_path)
    assert "FAILED test_suite.py::test_nested_task" in text
    section = text.split("differs from here (machine, time zone, locale, ...):\n", 1)[1].split("\n\n", 1)[0]
    assert f"  CPUs usable: 1 (here: {usable()})\n" in section, text
    cpus = os.cpu_count()
    block = f"Machine:\n  CPUs: 1 usable of {cpus} (affinity)\n"
    listed = show_env(store)
    assert block in listed and listed.index("Machine:") < listed.index("Variables ("), listed
    assert "  user: " in listed and f"(uid {os.getuid()}), umask " in listed
    assert f"  {sys.platform} {os.uname().machine}\n" in listed
    assert block in tool_text(store, "get_environment")
    summary = subprocess.run(
        [MCPDEBUG, "show", "--dir", str(store)], capture_output=True, text=True, timeout=120
    )
    assert f"\nMachine: 1 CPU usable of {cpus} (affinity)\n" in summary.stdout, (
        summary.stdout
    )  # in the run's summary
    assert "--env --dir" in summary.stdout and "lists its machine and variables." in summary.stdout


def test_an_ascii_locale_shows_as_python_made_it(tmp_path: Path) -> None:
    """``LC_ALL=C PYTHONUTF8=0``: the preferred encoding is ASCII (a failure says so where the reader's
    is not); ``LC_ALL=C`` alone turns UTF-8 mode on (PEP 540), its locale's encoding still ASCII."""
    ascii_run = record(tmp_path / "ascii", NAMES, {"CI": "true", "LC_ALL": "C", "PYTHONUTF8": "0"})
    listed = show_env(ascii_run)
    assert "  encodings: preferred ANSI_X3.4-1968, UTF-8 mode off, stdout ascii\n" in listed
    text = failure_text(tmp_path / "ascii")
    assert "UnicodeEncodeError" in text
    here = locale.getpreferredencoding(False)
    if here.lower() not in ("ansi_x3.4-1968", "ascii"):
        assert f"  preferred encoding: 'ANSI_X3.4-1968' (here: {here!r})\n" in text, text
    if not sys.flags.utf8_mode:
        assert "  UTF-8 mode: " not in text  # off there, off here
    utf8_run = record(tmp_path / "utf8", NAMES, {"LC_ALL": "C"})
    listed = show_env(utf8_run)
    if sys.version_info >= (3, 11):
        expected = "preferred utf-8, UTF-8 mode on, locale ANSI_X3.4-1968, stdout utf-8"
    else:  # no locale.getencoding(); UTF-8 mode's preferred encoding is spelled in capitals
        expected = "preferred UTF-8, UTF-8 mode on, stdout utf-8"
    assert f"  encodings: {expected}\n" in listed, listed


@needs_two_cpus
def test_merged_shards_keep_each_machine(tmp_path: Path) -> None:
    suite = "def test_one():\n    pass\n"
    run = ("--mcp-debug-run-id=ci-7",)
    one = record(tmp_path / "one", suite, {}, "taskset", "-c", "0", args=(*run, "--mcp-debug-shard=one"))
    two = record(tmp_path / "two", suite, {}, args=(*run, "--mcp-debug-shard=two"))
    merged = subprocess.run(
        [MCPDEBUG, "merge", str(one), str(two), "--dir", "merged"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert merged.returncode == 0, merged.stderr
    listed = show_env(tmp_path / "merged", "ci-7")
    block = listed.split("Machine:\n", 1)[1].split("\n\n", 1)[0]
    assert f"  [one] CPUs: 1 usable of {os.cpu_count()} (affinity)\n" in block, listed
    assert f"  [two] CPUs: {usable() if usable() != os.cpu_count() else os.cpu_count()}" in block
    assert block.count(f"  {sys.platform} {os.uname().machine}\n") == 1  # the same in both: once
    environment = structured(tmp_path / "merged", "get_environment", run_id="ci-7")
    machines = {s["label"]: s["machine"] for s in environment["shards"]}
    assert machines["one"]["cpus_usable"] == "1" and machines["two"]["cpus_usable"] == str(usable())


def test_a_store_from_before_machines_opens_and_upgrades(tmp_path: Path) -> None:
    """A schema-3 store (no ``machine`` column) opens: `show --env` reads it, the column is added, and
    a run recorded next keeps its machine."""
    store = record(tmp_path, "def test_one():\n    pass\n", {})
    assert "Machine:" in show_env(store)  # its spool, stored
    db = sqlite3.connect(store / "store.sqlite3")
    db.execute("ALTER TABLE shards DROP COLUMN machine")
    db.execute("UPDATE meta SET value='3' WHERE key='schema'")
    db.commit()
    db.close()
    listed = show_env(store)
    assert "Machine:" not in listed and "Variables (" in listed  # recorded before: nothing to say
    upgraded = Store(store, create=False)
    try:
        assert upgraded.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
        columns = [r[1] for r in upgraded.db.execute("PRAGMA table_info(shards)")]
        assert "machine" in columns
    finally:
        upgraded.close()
    record(tmp_path, "def test_one():\n    pass\n", {})
    assert "Machine:\n  CPUs: " in show_env(store)


def test_a_code_version_without_machine_still_stores(tmp_path: Path) -> None:
    """An older plugin's event (no ``machine`` field on the wire) decodes and stores; its shard's
    machine is empty and get_environment says nothing of one."""
    ev = Events("old-1")
    line = codec.encode(ev(protocol.CodeVersion, commit="abc", environment={"TZ": "UTC"}, ci={}))
    wire = json.loads(line)
    wire.pop("machine", None)
    decoded = codec.decode_spooled_line(json.dumps(wire).encode())  # as the store reads a spool
    assert isinstance(decoded, protocol.CodeVersion) and decoded.machine == {}
    store = Store(tmp_path / ".mcpdebug")
    try:
        store.apply([ev.start(), ev.run_started(), decoded, *ev.run_finished()])
        (shard,) = store.shards("old-1")
        assert shard["machine"] == {} and shard["environment"] == {"TZ": "UTC"}
    finally:
        store.close()
    listed = show_env(tmp_path / ".mcpdebug", "old-1")
    assert "Machine:" not in listed and "  TZ=UTC" in listed


def test_cgroup_limits_and_the_umask_are_read_from_their_files(tmp_path: Path) -> None:
    """cgroup v2 (``cpu.max``, ``memory.max``), v1 (``cfs_quota_us``/``cfs_period_us``,
    ``memory.limit_in_bytes``), an unlimited one (left out), and the umask of a status file."""
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    (v2 / "memory.max").write_text("2147483648\n")
    assert machine.cpu_quota(str(v2)) == "1.5" and machine.memory_limit(str(v2)) == "2147483648"
    (v2 / "cpu.max").write_text("max 100000\n")
    (v2 / "memory.max").write_text("max\n")
    assert machine.cpu_quota(str(v2)) is None and machine.memory_limit(str(v2)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "memory").mkdir()
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert machine.cpu_quota(str(v1)) == "2" and machine.memory_limit(str(v1)) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert machine.cpu_quota(str(v1)) is None
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nUmask:\t0077\nState:\tR (running)\n")
    assert machine.umask(str(status)) == "0077"


def test_the_facts_are_strings_and_reading_them_changes_nothing() -> None:
    before = os.umask(0o022)
    os.umask(before)
    found = machine.facts()
    assert set(found) <= set(machine.NAMES) and all(isinstance(v, str) and v for v in found.values())
    assert found["cpus"] == str(os.cpu_count()) and found["platform"] == sys.platform
    assert found["preferred_encoding"] == locale.getpreferredencoding(False)
    if sys.platform == "linux":
        assert found["umask"] == f"{before:04o}" and found["uid"] == str(os.getuid())
        assert found["cpus_usable"] == str(usable())
    assert os.umask(before) == before  # not changed by reading it
