"""A small watcher process that outlives pytest and shows why it ended, if a dump says so.

faulthandler's backstop ends a process hung in a C call that holds the GIL, and a crash ends it too;
nothing in that process can print a diagnosis afterwards. The reaper waits for the end of its input
(the pipe closes however pytest ends), then prints the diagnosis from the dump file, if there is one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_REAPER = """
import sys
from pathlib import Path
try:
    sys.stdin.buffer.read()  # returns when pytest's process ends, however it ends
except BaseException:
    pass
import os
path = Path(sys.argv[1])
try:
    dumped = os.path.getsize(path) > 4096  # past the header (gil_dump.HEADER_SIZE): import nothing if not
except OSError:
    dumped = False
if dumped:
    from pytest_mcpdebug.hangs import gil_dump
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
            [sys.executable, "-c", _REAPER, str(dump)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=False,
        )
    except OSError:
        return None
