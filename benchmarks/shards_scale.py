"""CI shards at scale (issue 46, item 4): 100,000 tests recorded in 8 shards, merged into one run.

Generates 8 shard folders of 12,500 tests each (1% failing on an assertion with locals, every test
printing two lines), records each with ``pytest --mcp-debug --mcp-debug-run-id=scale
--mcp-debug-shard=sN`` (no server: spool files, as in CI), then times, each as its own process:

- ``mcpdebug merge`` of the 8 shard folders into a fresh store (their spool files), and of the 8 shards'
  stores (each shard's spool taken in first, as a CI job's ``mcpdebug report`` would) into another;
- ``mcpdebug show scale`` over the merged store (the whole command, start-up included);
- ``get_failure`` on one of the failures, through the MCP in-memory client (the tool call alone, median of 5);

and reports the merged store's size (database and output files). Budget: merge at most 30 s, show at most
2 s, get_failure at most 0.2 s.

Usage: python benchmarks/shards_scale.py [--tests 100000] [--shards 8] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overhead import bytecode_env, clean_env

MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))
PER_FILE = 250


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def generate(folder: Path, shard: int, count: int, first: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    for start in range(first, first + count, PER_FILE):
        body = []
        for i in range(start, min(start + PER_FILE, first + count)):
            head = f"def test_{i:06d}():\n    print('test {i} starts')\n"
            if i % 100 == 7:
                body.append(
                    f"{head}    print('shard {shard} checks it')\n"
                    f"    expected = {i}\n    got = {i} + len('{i}') % 3 + 1\n    assert got == expected\n"
                )
            else:
                body.append(f"{head}    print('shard {shard} passes it')\n")
        (folder / f"test_s{shard}_{start:06d}.py").write_text("\n\n".join(body))


def timed(
    command: list[str], cwd: Path, env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    took, _, done = timed_cpu(command, cwd, env)
    return took, done


def timed_cpu(
    command: list[str], cwd: Path, env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, CPU seconds of the command: user + system, its children's too, the result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, done


def file_creation(folder: Path, count: int = 5_000) -> float:
    """Microseconds of CPU to make a file of a line, as the merge makes one per test: ext4 without
    a journal (this machine's) steps over every inode freed in the last minutes for each new one,
    so the same merge costs several times more CPU after a mass deletion (yours or another
    suite's): said beside the figures."""
    folder.mkdir(parents=True)
    started = time.process_time()
    for n in range(count):
        fd = os.open(folder / f"{n}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, b"test 1 starts\nshard 0 passes it\n")
        os.close(fd)
    return (time.process_time() - started) / count * 1e6


def size_of(folder: Path) -> tuple[int, int, int]:
    """(database bytes, output bytes, output files)."""
    database = sum(p.stat().st_size for p in folder.glob("store.sqlite3*"))
    files = [p for p in (folder / "output").rglob("*") if p.is_file()]
    return database, sum(p.stat().st_size for p in files), len(files)


async def failure_times(store_dir: Path, run_id: str, test: str) -> list[float]:
    from mcp import Client

    from mcpdebug.app import build_server
    from mcpdebug.store import Store

    store = Store(store_dir)
    times = []
    async with Client(build_server(store)) as client:
        for _ in range(5):
            started = time.perf_counter()
            result = await client.call_tool("get_failure", {"run_id": run_id, "test": test})
            times.append(time.perf_counter() - started)
            assert not result.is_error, result.content
    store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mcpdebug-shards-"))
    base.mkdir(parents=True, exist_ok=True)
    env = bytecode_env(clean_env(), base / "pycache")
    per = args.tests // args.shards
    print(f"{args.tests:,} tests in {args.shards} shards under {base}; load average {load()}", flush=True)
    recorded = 0.0
    for shard in range(args.shards):
        folder = base / f"shard-{shard}"
        if not (folder / ".mcpdebug").is_dir():
            generate(folder, shard, per, shard * per)
            took, done = timed(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:randomly",
                    "--mcp-debug",
                    "--mcp-debug-run-id=scale",
                    f"--mcp-debug-shard=s{shard}",
                ],
                folder,
                env,
            )
            recorded += took
            print(f"  shard {shard}: {done.stdout.strip().splitlines()[-2][:100]} ({took:.1f} s)", flush=True)
    print(f"recorded in {recorded:.0f} s", flush=True)
    spools = [str(base / f"shard-{s}" / ".mcpdebug") for s in range(args.shards)]
    folders = [str(base / "stores" / f"shard-{s}") for s in range(args.shards)]
    # A --keep run's folders of the last run are deleted once this one is measured: 300,000 files
    # deleted just before would slow the files this one makes (ext4 without a journal looks through
    # the inodes freed in the last minute for each new one).
    old = base / f"old-{time.time_ns()}"
    old.mkdir()
    for name in ("merged", "merged-stores", "stores"):
        if (base / name).exists():
            (base / name).rename(old / name)

    print(f"making a file of a line here: {file_creation(old / 'files'):.0f} us of CPU", flush=True)
    before = load()
    command = [MCPDEBUG, "merge", *spools, "--dir", str(base / "merged")]
    merge_time, cpu, done = timed_cpu(command, base, clean_env())
    assert done.returncode == 0, done.stderr
    print(
        f"merge of {args.shards} spool folders: {merge_time:.1f} s, CPU {cpu:.1f} s (load average before "
        f"{before}, after {load()})"
    )
    print("  " + done.stdout.strip().splitlines()[-2], flush=True)

    ingest = 0.0
    for spool, folder in zip(
        spools, folders, strict=True
    ):  # each shard's spool into its own store, as a CI job's
        shutil.copytree(spool, folder)  # report step does (on a copy: the spool folders stay for --keep)
        took, _ = timed([MCPDEBUG, "runs", "--dir", folder], base, clean_env())
        ingest += took
    before = load()
    target = str(base / "merged-stores")
    stores_time, cpu, done = timed_cpu([MCPDEBUG, "merge", *folders, "--dir", target], base, clean_env())
    assert done.returncode == 0, done.stderr
    print(
        f"merge of {args.shards} stores: {stores_time:.1f} s, CPU {cpu:.1f} s (each shard's spool taken in "
        f"first: {ingest:.1f} s in all; load average before {before}, after {load()})",
        flush=True,
    )
    again, done = timed([MCPDEBUG, "merge", *folders, "--dir", str(base / "merged")], base, clean_env())
    print(f"merging the stores again into the first: {again:.1f} s; {done.stdout.strip().splitlines()[-2]}")

    shows = []
    for _ in range(5):
        took, done = timed([MCPDEBUG, "show", "scale", "--dir", str(base / "merged")], base, clean_env())
        assert done.returncode == 0, done.stderr
        shows.append(took)
    print(
        f"mcpdebug show scale: median {statistics.median(shows):.2f} s (min {min(shows):.2f}) over 5, "
        f"start-up included; load average {load()}"
    )
    failed = f"test_s0_{0:06d}.py::test_{7:06d}"
    times = asyncio.run(failure_times(base / "merged", "scale", failed))
    median, least = statistics.median(times) * 1000, min(times) * 1000
    print(f"get_failure: median {median:.0f} ms (min {least:.0f} ms) over 5")
    database, output, files = size_of(base / "merged")
    print(f"merged store: database {database / 1e6:.0f} MB, output {output / 1e6:.0f} MB in {files:,} files")
    spooled = sum(p.stat().st_size for f in spools for p in Path(f).rglob("*.jsonl"))
    stores = sum(size_of(Path(f))[0] + size_of(Path(f))[1] for f in folders)
    print(f"the shards' spool files: {spooled / 1e6:.0f} MB; their stores: {stores / 1e6:.0f} MB in all")
    for folder in base.glob("old-*"):
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
