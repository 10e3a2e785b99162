"""Remote xdist workers (issue 46): what the channel costs, how soon a line arrives, and a flood.

Workers are made remote as `tests/test_remote_workers.py` makes them: each runs under ``unshare
--net --mount --fork`` with a tmpfs over the project's `.mcpdebug/` (root needed), so it reaches
neither the store nor a loopback server and its events travel on its execnet channel.

- ``cost``: a local ``-n 2 --mcp-debug`` run of N trivial tests with this checkout against the same
  run with ``main``'s plugin (``git archive main`` put first on PYTHONPATH), in alternating pairs:
  whatever the channel adds to workers that never use it. Wall and CPU (the controller and its
  workers: `os.wait4`) per pair; medians of the ratios.
- ``latency``: one isolated worker prints a line every 0.25 s for 10 s, each stamped with the time it
  was printed; a reader polls the controller's spool file (no server) or the server's store (with
  ``--server``) every 5 ms and notes when each line is there. Also a local worker, for comparison.
- ``flood``: W isolated workers each print L lines a second for S seconds (10,000 x 30 s by default):
  every line is counted in the store afterwards, and the controller's own CPU (``RUSAGE_SELF`` at its
  unconfigure, written by a conftest) is reported beside the run's wall time; ``--local``: the same
  with local workers (``-n``), which write the store themselves, for comparison.

Usage: python benchmarks/remote_workers.py cost [--tests 2000] [--pairs 9] [--isolated] [--prints]
       python benchmarks/remote_workers.py latency [--server] [--count 40] [--every 0.25] [--probe]
       python benchmarks/remote_workers.py flood [--workers 8] [--rate 10000] [--seconds 30] [--local]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gen_suite import generate
from overhead import bytecode_env, clean_env, running_server, time_run

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
PYTEST += ["-p", "no:rerunfailures", "-p", "no:hypothesispytest", "-p", "no:asyncio"]


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def isolated_python(project: Path) -> str:
    """The issue's WRAPPER: a python in its own network and mount namespaces, `.mcpdebug/` a tmpfs."""
    store = project / ".mcpdebug"
    store.mkdir(parents=True, exist_ok=True)
    wrapper = project / "isolated-python"
    wrapper.write_text(
        "#!/bin/bash\n"
        f"exec unshare --net --mount --fork bash -c 'mount -t tmpfs none {store} && "
        f'exec {sys.executable} "$@"\' python "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


# cost ----------------------------------------------------------------------------------------------


def main_checkout(into: Path) -> Path:
    """``main``'s sources (plugin and server) in a folder of their own, for PYTHONPATH."""
    archive = into / "main.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", "main"], stdout=out, check=True)
    target = into / "main-src"
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def cost(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpdebug-remote-cost-") as tmp:
        base = Path(tmp)
        suite = base / "suite"
        generate(args.tests, suite)
        if args.prints:  # each test prints a line: what a remote worker's watch of its output sees
            for path in suite.glob("test_gen_*.py"):
                path.write_text(path.read_text().replace("    assert True", '    print("a line")'))
        main_src = main_checkout(base)
        env = bytecode_env(clean_env(), base / "pycache")
        envs = {
            "main": {**env, "PYTHONPATH": f"{main_src}:{main_src / 'server'}"},
            "this": env,
        }
        workers = ["-n", "2"]
        if args.isolated:
            workers = ["--tx", f"2*popen//python={isolated_python(suite)}", "--dist", "load"]
        cmd = [*PYTEST, *workers, "--mcp-debug", str(suite)]
        results: dict[str, list[tuple[float, float]]] = {"main": [], "this": []}
        for round_no in range(args.pairs + 1):  # the first round warms the caches, untimed
            order = ("main", "this") if round_no % 2 else ("this", "main")
            for name in order:
                shutil.rmtree(suite / ".mcpdebug", ignore_errors=True)
                (suite / ".mcpdebug").mkdir()  # the isolated workers' tmpfs goes over it
                timing, output, code = time_run(cmd, suite, envs[name])
                if code != 0 or f"{args.tests} passed" not in output:
                    raise SystemExit(f"{name}: exit {code}\n{output[-2000:]}")
                if round_no:
                    results[name].append((timing.wall, timing.cpu))
        walls = [t[0] / m[0] for t, m in zip(results["this"], results["main"], strict=True)]
        cpus = [t[1] / m[1] for t, m in zip(results["this"], results["main"], strict=True)]
        kind = "2 isolated workers" if args.isolated else "-n 2"
        prints = ", each printing a line" if args.prints else ""
        print(f"load average {load()}; {args.tests} tests{prints}, {kind}, {args.pairs} pairs")
        print(f"main: median wall {statistics.median(w for w, _ in results['main']):.2f} s")
        print(f"this: median wall {statistics.median(w for w, _ in results['this']):.2f} s")
        for what, ratios in (("wall", walls), ("CPU", cpus)):
            spread = f"min {min(ratios):.3f}, max {max(ratios):.3f}"
            print(f"this/main {what} ratio: median {statistics.median(ratios):.3f} ({spread})")


# latency --------------------------------------------------------------------------------------------

LINES_SUITE = """
import time

def test_lines():
    for i in range({count}):
        print(f"mark {{i}} {{time.time():.6f}}", flush=True)
        time.sleep({every})
"""
MARK = re.compile(rb"mark (\d+) (\d+\.\d+)")
PROBE_CONFTEST = """
import os, re, time
from pytest_mcpdebug.recording import recorder, relay, sender, spool, via_controller

MARK = re.compile(rb"mark (\\d+) ")
LOG = os.open(os.environ["MCPDEBUG_PROBE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def stamp(hop, data):
    now = time.time()
    marks = MARK.findall(data)
    if marks:
        os.write(LOG, b"".join(b"%s %s %.6f\\n" % (hop.encode(), m, now) for m in marks))


def blob(items):
    return b"".join(i if isinstance(i, bytes) else bytes(i) if isinstance(i, (bytearray, memoryview))
                    else repr(i).encode() for i in items)


def wrap(cls, name, hop, what, before=True):
    original = getattr(cls, name)

    def probe(self, *args, **kwargs):
        if before:
            stamp(hop, what(args))
        result = original(self, *args, **kwargs)
        if not before:
            stamp(hop, what(args))
        return result

    setattr(cls, name, probe)


original_tick = recorder.Recorder._tick


def tick(self):  # the worker's sender wakes: any mark the tail reads now was waiting for this
    os.write(LOG, b"wake - %.6f\\n" % time.time())
    return original_tick(self)


recorder.Recorder._tick = tick
wrap(via_controller.ChannelSpool, "write", "channel_send", lambda a: blob(a[0]))
wrap(relay.Relay, "receive", "relay_receive", lambda a: blob(a[0][1:2]) if isinstance(a[0], tuple) else b"")
wrap(spool.SpoolFile, "write", "delivered", lambda a: blob(a[0]), before=False)
wrap(sender.Sender, "_ws_send", "delivered", lambda a: blob(a[0]), before=False)
"""


def latency(args: argparse.Namespace) -> None:
    count, every = args.count, args.every
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory(prefix="mcpdebug-remote-latency-") as tmp:
            project = Path(tmp)
            (project / "pytest.ini").write_text("[pytest]\n")
            (project / "test_lines.py").write_text(LINES_SUITE.format(count=count, every=every))
            probe_log = project / "probe.log"
            if args.probe:
                (project / "conftest.py").write_text(PROBE_CONFTEST)
            tx = (
                ["--tx", f"1*popen//python={isolated_python(project)}", "--dist", "load"]
                if kind == "isolated"
                else ["-n", "1"]
            )
            env = bytecode_env(clean_env(), project / "pycache")
            env["MCPDEBUG_PROBE_LOG"] = str(probe_log)
            store_dir = project / ".mcpdebug"
            marks = functools.partial(_store_marks if args.server else _spool_marks, store_dir)
            if args.server:
                with running_server(store_dir, project / "serve.log"):
                    seen = _watch(project, env, tx, count, marks)
            else:
                seen = _watch(project, env, tx, count, marks)
            delays = sorted(seen.values())
            where = "the server's store" if args.server else "the controller's spool"
            ninetieth = delays[int(len(delays) * 0.9)]
            print(
                f"{kind} worker -> {where}: {len(delays)}/{count} lines seen; delay median "
                f"{statistics.median(delays) * 1000:.0f} ms, 90th {ninetieth * 1000:.0f} ms, "
                f"max {delays[-1] * 1000:.0f} ms (load average {load()})"
            )
            if args.probe:
                _hops(probe_log, seen)


def _hops(probe_log: Path, seen: dict[int, float]) -> None:
    """Each line's time between hops (``--probe``): printed, the worker's sender woke (the wake-up
    that read it: the last before it was sent), handed to the channel, received by the controller's
    relay, delivered (the controller's spool written, or sent to the server), readable."""
    stamps: dict[str, dict[int, float]] = {}
    wakes: list[float] = []
    for row in probe_log.read_text().splitlines():
        hop, mark, at = row.split()
        if hop == "wake":
            wakes.append(float(at))
        else:
            stamps.setdefault(hop, {}).setdefault(int(mark), float(at))
    printed = {n: t for n, t in _printed(probe_log.parent).items() if n in seen}
    wakes.sort()
    hops: dict[str, list[float]] = {}
    slowest: list[tuple[float, int, list[float]]] = []
    for n, at in printed.items():
        sent = stamps.get("channel_send", {}).get(n)
        received = stamps.get("relay_receive", {}).get(n)
        delivered = stamps.get("delivered", {}).get(n)
        if None in (sent, received, delivered):
            continue
        assert sent is not None and received is not None and delivered is not None
        woke = max((w for w in wakes if at <= w <= sent), default=sent)
        readable = at + seen[n]
        for name, span in (
            ("printed -> worker's sender wakes", woke - at),
            ("wake -> handed to the channel", sent - woke),
            ("channel -> controller's relay", received - sent),
            ("relay -> delivered (spool/server)", delivered - received),
            ("delivered -> readable (reader polls 5 ms)", readable - delivered),
            ("printed -> delivered (all but the reader)", delivered - at),
            ("total", readable - at),
        ):
            hops.setdefault(name, []).append(span)
        slowest.append((readable - at, n, [woke - at, sent - woke, received - sent, delivered - received]))
    for name, spans in hops.items():
        spans.sort()
        print(
            f"  {name:45} median {statistics.median(spans) * 1000:6.1f} ms, 90th "
            f"{spans[int(len(spans) * 0.9)] * 1000:6.1f}, max {spans[-1] * 1000:6.1f} ({len(spans)} lines)"
        )
    for total, n, spans in sorted(slowest, reverse=True)[:3]:
        split = " + ".join(f"{span * 1000:.1f}" for span in spans)
        print(f"  slow: line {n}, {total * 1000:.1f} ms = {split} + the reader's")


def _printed(project: Path) -> dict[int, float]:
    found: dict[int, float] = {}
    for path in project.rglob("*"):
        if path.suffix in (".jsonl", ".log") and path.is_file():
            with contextlib.suppress(OSError):
                for m in MARK.finditer(path.read_bytes()):
                    found[int(m.group(1))] = float(m.group(2))
    return found


def _watch(
    project: Path,
    env: dict[str, str],
    tx: list[str],
    count: int,
    marks: Callable[[], list[tuple[int, float]]],
) -> dict[int, float]:
    proc = subprocess.Popen(
        [*PYTEST, "--mcp-debug", *tx, "test_lines.py"], cwd=project, env=env, stdout=subprocess.DEVNULL
    )
    seen: dict[int, float] = {}
    try:
        while proc.poll() is None or len(seen) < count:
            now = time.time()
            for number, printed in marks():
                seen.setdefault(number, now - printed)
            if proc.poll() is not None and len(seen) < count:
                break
            time.sleep(0.005)
    finally:
        proc.wait(120)
    return seen


def _spool_marks(store_dir: Path) -> list[tuple[int, float]]:
    found = []
    for path in (store_dir / "spool").glob("*.gw0-*.jsonl"):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        found += [(int(m.group(1)), float(m.group(2))) for m in MARK.finditer(data)]
    return found


def _store_marks(store_dir: Path) -> list[tuple[int, float]]:
    found = []
    for path in (store_dir / "output").glob("*/*.log"):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        found += [(int(m.group(1)), float(m.group(2))) for m in MARK.finditer(data)]
    return found


# flood ----------------------------------------------------------------------------------------------

FLOOD_SUITE = """
import sys, time
import pytest

@pytest.mark.parametrize("worker", range({workers}))
def test_flood(worker):
    line = "x" * 60
    start = time.monotonic()
    for second in range({seconds}):
        for chunk in range(10):
            for i in range({rate} // 10):
                print(f"{{worker}} {{second}} {{chunk}} {{i}} {{line}}")
            wait = start + second + (chunk + 1) / 10 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
"""
CPU_CONFTEST = """
import json, os, resource, time

def pytest_configure(config):
    config._started = time.monotonic()

def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["FLOOD_CPU_FILE"], "w") as out:
        json.dump({"user": usage.ru_utime, "system": usage.ru_stime,
                   "wall": time.monotonic() - config._started}, out)
"""


def flood(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpdebug-remote-flood-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text("[pytest]\n")
        (project / "conftest.py").write_text(CPU_CONFTEST)
        suite = FLOOD_SUITE.format(workers=args.workers, seconds=args.seconds, rate=args.rate)
        (project / "test_flood.py").write_text(suite)
        env = {**bytecode_env(clean_env(), project / "pycache"), "FLOOD_CPU_FILE": str(project / "cpu.json")}
        tx = ["-n", str(args.workers)]
        if not args.local:  # isolated: through their channels
            tx = ["--tx", f"{args.workers}*popen//python={isolated_python(project)}", "--dist", "load"]
        before = load()
        started = time.monotonic()
        command = [*PYTEST, "--mcp-debug", *tx, "test_flood.py"]
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, check=False)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(done.stdout.decode()[-3000:])
        cpu = json.loads((project / "cpu.json").read_text())
        spool = sum(p.stat().st_size for p in (project / ".mcpdebug" / "spool").glob("*.jsonl"))
        counted = subprocess.run(
            [str(Path(sys.executable).with_name("mcpdebug")), "runs", "--json", "--dir", str(project)],
            capture_output=True,
            check=True,
            env=clean_env(),
        )
        run = json.loads(counted.stdout)[0]
        lines = _stored_lines(project / ".mcpdebug", run["run_id"])
        expected = args.workers * args.seconds * args.rate
        kind = "local" if args.local else "isolated"
        print(
            f"{args.workers} {kind} workers x {args.rate:,} lines/s x {args.seconds} s: {lines:,} of "
            f"{expected:,} lines stored ({'nothing lost' if lines == expected else 'LOST SOME'}); "
            f"run {wall:.1f} s wall; controller CPU {cpu['user'] + cpu['system']:.1f} s "
            f"(user {cpu['user']:.1f}, system {cpu['system']:.1f}) over its {cpu['wall']:.1f} s; "
            f"spool {spool / 1e6:.0f} MB; load average before {before}, after {load()}"
        )


def _stored_lines(store_dir: Path, run_id: str) -> int:
    import sqlite3

    db = sqlite3.connect(store_dir / "store.sqlite3")
    try:
        row = db.execute(
            "SELECT coalesce(sum(lines), 0) FROM outputs WHERE run_id=? AND unit LIKE 'test_flood.py::%'",
            (run_id,),
        ).fetchone()
        return int(row[0])
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--tests", type=int, default=2000)
    c.add_argument("--pairs", type=int, default=9)
    c.add_argument("--isolated", action="store_true", help="workers in their own namespaces (the channel)")
    c.add_argument("--prints", action="store_true", help="each test prints a line")
    lat = sub.add_parser("latency")
    lat.add_argument("--server", action="store_true")
    lat.add_argument("--count", type=int, default=40, help="lines printed (default 40)")
    lat.add_argument("--every", type=float, default=0.25, help="seconds between them (default 0.25)")
    lat.add_argument("--kinds", default="isolated,local", help="isolated,local (default both)")
    lat.add_argument("--probe", action="store_true", help="time each hop (a conftest wraps the plugin)")
    f = sub.add_parser("flood")
    f.add_argument("--workers", type=int, default=8)
    f.add_argument("--rate", type=int, default=10_000)
    f.add_argument("--seconds", type=int, default=30)
    f.add_argument("--local", action="store_true", help="local workers writing the store (to compare)")
    args = parser.parse_args()
    {"cost": cost, "latency": latency, "flood": flood}[args.what](args)


if __name__ == "__main__":
    main()
