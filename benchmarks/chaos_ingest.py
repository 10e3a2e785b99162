"""Hostile peers on the ingest WebSocket, the long run: does a real `mcpdebug serve` stay up, keep its
memory bounded, and store a real run complete while tens of thousands of bad frames arrive?

While a real `pytest --mcp-debug -n 2` run of a generated suite (`chaos.py`: every output line
known) streams into the server:

1. fuzz: THREADS threads send hypothesis-generated hostile peers (`tests/hostile_peers.py`: broken
   hellos, truncated lines, wrong-typed fields, unknown tags, events out of order and duplicated,
   events of another process, garbage, deep JSON, forged replies, messages over the 16 MB limit, and
   raw TCP junk, wrong tokens, browser origins) until FRAMES frames have been sent;
2. storm: STORM connections opened and dropped (TCP only, after the upgrade, after the hello,
   mid-frame, mid-HTTP-request) while IDLE more sit open without a word.

Then the run is released and checked: every test with its outcome, every output line, every event
(seq 1..N of each process). Reported: frames and connections, what the server refused, crashes
(the process ending, or a traceback or internal error in its log), its RSS (start, after each
quarter of the fuzz, after the storm, peak, end), and what the store holds of the real run.

Usage: python benchmarks/chaos_ingest.py [--frames 20000] [--storm 3000] [--idle 300] [--threads 4]
                                         [--tests 300] [--lines 20] [--sleep 0.05] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from chaos import (
    BenchmarkError,
    RssWatch,
    Server,
    check_store,
    clean_env,
    environment,
    expected,
    generate,
    pytest_command,
)
from hostile_peers import _QUIET, Outcome, peers, play
from hypothesis import HealthCheck, Phase, given, settings
from websockets.sync.client import connect


def fuzz(server: Server, target: int, threads: int, watch: RssWatch) -> tuple[Outcome, int]:
    """Hostile peers from THREADS threads until ``target`` frames were sent; returns them and the peers."""
    outcome, lock = Outcome(), threading.Lock()
    peers_played = [0]
    quarters = [target * q // 4 for q in (1, 2, 3)]

    @settings(
        max_examples=100,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(peer=peers(max_size=16 * 1024 * 1024, oversized_rate=0.002))
    def one(peer: Any) -> None:
        mine = Outcome()
        play(peer, server.info["url"], server.info["token"], mine)
        with lock:
            before = outcome.frames
            outcome.frames += mine.frames
            outcome.refused += mine.refused
            outcome.closed_by_server += mine.closed_by_server
            peers_played[0] += 1
            for q in quarters:
                if before < q <= outcome.frames:
                    watch.mark(f"fuzz {q} frames")

    def worker() -> None:
        while outcome.frames < target:
            one()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return outcome, peers_played[0]


def storm(server: Server, count: int, idle: int, threads: int) -> dict[str, int]:
    """Connections opened and dropped in every way a dying process can drop one, beside IDLE silent ones."""
    url, token = server.info["url"], server.info["token"]
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    auth = {"Authorization": f"Bearer {token}"}
    hello = json.dumps(
        {"type": "hello", "protocol": 1, "run_id": "fuzz-storm", "process": "p", "worker": "w", "pid": 1}
    )

    def tcp_only() -> None:
        socket.create_connection(address, timeout=5).close()

    def mid_request() -> None:
        with socket.create_connection(address, timeout=5) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websock")

    def _upgraded(after: Any) -> None:
        with connect(url, additional_headers=auth, proxy=None, open_timeout=10, logger=_QUIET) as ws:
            after(ws)
            with contextlib.suppress(OSError):
                ws.socket.shutdown(socket.SHUT_RDWR)
            ws.socket.close()

    def after_upgrade() -> None:
        _upgraded(lambda ws: None)

    def after_hello() -> None:
        _upgraded(lambda ws: ws.send(hello))

    def mid_frame() -> None:  # a text frame header announcing 4096 bytes, 3 of them sent
        _upgraded(lambda ws: (ws.send(hello), ws.socket.sendall(b"\x81\xfe\x10\x00abcd" + b"xyz")))

    kinds = [tcp_only, mid_request, after_upgrade, after_hello, mid_frame]
    counts = {k.__name__: 0 for k in kinds} | {"failed": 0, "idle": 0}
    lock = threading.Lock()
    silent: list[socket.socket] = []
    for _ in range(idle):
        with contextlib.suppress(OSError):
            silent.append(socket.create_connection(address, timeout=5))
    counts["idle"] = len(silent)

    def worker(offset: int) -> None:
        rng = random.Random(offset)
        for i in range(offset, count, threads):
            kind = kinds[i % len(kinds)] if rng.random() < 0.9 else rng.choice(kinds)
            try:
                kind()
                ok = kind.__name__
            except Exception:
                ok = "failed"
            with lock:
                counts[ok] += 1

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    for sock in silent:
        sock.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000, help="hostile frames to send (default 20000)")
    parser.add_argument("--storm", type=int, default=3_000, help="connections opened and dropped (3000)")
    parser.add_argument("--idle", type=int, default=300, help="silent connections held during the storm")
    parser.add_argument("--threads", type=int, default=4, help="threads sending (default 4)")
    parser.add_argument("--tests", type=int, default=300, help="tests of the real run (default 300)")
    parser.add_argument("--lines", type=int, default=20, help="output lines per test (default 20)")
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds each test sleeps (0.05)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="chaos-ingest-"))
    project = tmp / "project"
    generate(project, args.tests, args.lines)
    want = expected(args.tests, args.lines)
    server = Server(project / ".mcpdebug", tmp / "serve.log", extra=("--max-runs", "20")).start()
    watch = RssWatch(server.pid)
    release = tmp / "release"
    env = clean_env() | {"CHAOS_RELEASE": str(release), "CHAOS_SLEEP": str(args.sleep)}
    started = time.monotonic()
    run = subprocess.Popen(
        pytest_command("--mcp-debug", "-n", "2"),
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        print(f"fuzzing {server.info['url']} (pid {server.pid}) ...", file=sys.stderr)
        outcome, played = fuzz(server, args.frames, args.threads, watch)
        fuzzed = time.monotonic() - started
        print(f"storm of {args.storm} connections ...", file=sys.stderr)
        storms = storm(server, args.storm, args.idle, args.threads)
        watch.mark("after the storm")
        release.touch()
        output = run.communicate(timeout=900)[0].decode(errors="replace")
        time.sleep(1.0)  # the server takes in the run's last batches
        watch.mark("end")
        alive = server.alive
        crashes = server.crashes()
    finally:
        release.touch()
        if run.poll() is None:
            run.kill()
        watch.close()
        server.stop()
    check = check_store(server.directory, want)
    figures = {
        "environment": environment(),
        "command": "python benchmarks/chaos_ingest.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "hostile_frames": outcome.frames,
        "hostile_peers": played,
        "refused_at_handshake": outcome.refused,
        "closed_by_server": outcome.closed_by_server,
        "fuzz_seconds": round(fuzzed, 1),
        "storm": storms,
        "server_alive_at_end": alive,
        "crashes": len(crashes) + (0 if alive else 1),
        "crash_lines": crashes[:10],
        "rss_kb": dict(watch.marks) | {"peak": watch.peak},
        "real_run": {
            "exit_status": run.returncode,
            "expected_exit_status": want["exit_status"],
            "summary": output.strip().splitlines()[-1] if output.strip() else "",
            "tests": len(want["outcomes"]),
            **{k: v for k, v in vars(check).items() if k not in ("problems", "exit_status")},
            "problems": check.problems[:10],
        },
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept {tmp}", file=sys.stderr)
    ok = alive and not crashes and check.complete and run.returncode == want["exit_status"]
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchmarkError as exc:
        print(f"chaos_ingest: {exc}", file=sys.stderr)
        sys.exit(1)
