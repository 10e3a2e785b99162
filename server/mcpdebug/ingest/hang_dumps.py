"""Hang dumps of processes that died: faulthandler's backstop wrote them, the store attributes them.

A process ended by the GIL backstop (or a crash) could not send its diagnosis; it left a dump file in
``.mcpdebug/hangs/``. This turns each dump of a dead process into a hang event of the test it ran.
"""

from __future__ import annotations

from mcpdebug.store import Store
from pytest_mcpdebug import protocol
from pytest_mcpdebug.folder import pid_alive
from pytest_mcpdebug.hangs import gil_dump

HANGS_DIR = "hangs"


def attribute_hang_dumps(store: Store) -> int:
    """Record the GIL-hang dumps of processes that died (see `pytest_mcpdebug.hangs.gil_dump`).

    The dying process could not say which test hung; the store knows which test of that worker
    was still running. Recorded as an event of a process of its own (``dump-<process>``), so doing
    it again changes nothing. Returns how many were new.
    """
    folder = store.dir / HANGS_DIR
    try:
        paths = sorted(folder.glob("*.txt"))
    except OSError:
        return 0
    new = 0
    for path in paths:
        name = gil_dump.parse_name(path)
        if name is None or pid_alive(name.pid):
            continue
        if store.has_event(name.run_id, f"dump-{name.process}", 1):
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        diagnosis = gil_dump.parse(text) if gil_dump.has_dump(path) else gil_dump.vanished(name, text)
        if diagnosis is None:
            continue
        running = [gil_dump.dumped_test(text)] if gil_dump.dumped_test(text) else []
        running = running or [
            t["nodeid"] for t in store.tests(name.run_id, ("running",)) if t["worker"] == name.worker
        ]
        event = protocol.HangDetected(
            run_id=name.run_id,
            process=f"dump-{name.process}",
            seq=1,
            ts=path.stat().st_mtime,
            nodeid=running[-1] if running else "",
            worker=name.worker,
            when="call",
            report=diagnosis,
        )
        new += store.apply([event])
    return new
