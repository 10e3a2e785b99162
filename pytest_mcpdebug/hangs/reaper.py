"""A small watcher process that outlives pytest and shows why it ended, if a dump says so.

faulthandler's backstop ends a process hung in a C call that holds the GIL, and a crash ends it too;
nothing in that process can print a diagnosis afterwards. The reaper waits for the end of its input
(the pipe closes however pytest ends), then prints the diagnosis from the dump file, if there is one.

It starts as a bare interpreter (``-I -S``: no ``site``, no ``.pth`` files, nothing of the
environment's), since it starts beside every recorded run's collection and, but for a dump, only
waits; to read a dump it imports the project from the test process's own ``sys.path``, handed over
as an argument, so it reads it with the same code that wrote it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_REAPER = """
import os, sys
try:
    sys.stdin.buffer.read()  # returns when pytest's process ends, however it ends
except BaseException:
    pass
try:
    dumped = os.path.getsize(sys.argv[1]) > 4096  # past the header (gil_dump.HEADER_SIZE), or nothing to do
except OSError:
    dumped = False
if dumped:
    import json
    from pathlib import Path
    sys.path[:0] = json.loads(sys.argv[2])  # the test process's: the same code that wrote the dump
    from pytest_mcpdebug.hangs import gil_dump
    path = Path(sys.argv[1])
if dumped and gil_dump.has_dump(path):
    text = path.read_text(errors="replace")
    report = gil_dump.parse(text)
    test = gil_dump.dumped_test(text) or "the running test"
    if report is not None and report.kind == "crashed":
        dumped = text.split("\\n", 2)[2].strip()
        sys.stderr.write(f"\\nmcpdebug: CRASH {test}: {report.summary}\\n{dumped}\\n")
    elif report is not None:
        frames = next((t.frames for t in report.threads if t.test), [])
        shown = [f for i, f in enumerate(frames) if i == 0 or not f.library][:12]
        where = "".join(f"\\n    {f.file}:{f.line} in {f.function}()" for f in shown)
        sys.stderr.write(
            f"\\nmcpdebug: HANG {test}: {report.summary}{where}\\n"
            f"mcpdebug: the process was ended; every thread's stack is in {path}\\n"
        )
"""


def start(dump: Path, stderr: int) -> subprocess.Popen[bytes] | None:
    """A small process that outlives this one: if faulthandler's backstop ends this process (a hang
    holding the GIL, where nothing here can run), it prints the diagnosis from the dump to the
    terminal, so a plain `pytest` run in CI shows why it stopped."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, str(dump), json.dumps(sys.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=False,
        )
    except OSError:
        return None
