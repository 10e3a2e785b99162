"""``python -m pytest_mcpdebug.hangs.detect``: run a Python program under the hang watchdog.

Used by the server's ``detect_hang(command=...)``: the program (a script with its arguments, or
``-m module``) runs in this process's main thread while the watchdog samples it; if it is still
running after ``--timeout`` seconds, the hang report (the same as a test's) is written to
``--report`` as JSON and the program is interrupted. Exit status: the program's own, or 124 when it
hung (as `timeout(1)`).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from pytest_mcpdebug import protocol
from pytest_mcpdebug.hangs.target import HangExit, HangTimeout, Target
from pytest_mcpdebug.hangs.watchdog import Watchdog

HUNG = 124


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_mcpdebug.hangs.detect")
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--report", required=True, help="where the hang report goes (JSON)")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="script.py [args] or -m module [args]")
    args = parser.parse_args(argv)
    program = [a for a in args.program if a != "--"] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("give the program to run: script.py [args] or -m module [args]")
    report_path = Path(args.report)
    hung: list[bool] = []

    def on_hang(target: Target, report: protocol.HangReport) -> None:
        report_path.write_text(protocol.encode_value(report))
        hung.append(True)

    def on_stuck(target: Target) -> None:
        import os

        os._exit(HUNG)

    watchdog = Watchdog(interval=args.interval, grace=args.grace, on_hang=on_hang, on_stuck=on_stuck)
    watchdog.start()
    label = " ".join(program)
    watchdog.arm(label, args.timeout, "exit")
    if program[0] == "-m" and len(program) < 2:
        parser.error("-m needs a module name")
    module = program[1] if program[0] == "-m" else None
    sys.argv = program[1:] if module else program
    if module is None:
        sys.path.insert(0, str(Path(program[0]).resolve().parent))

    def run() -> None:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(program[0], run_name="__main__")

    status = 0
    try:
        run()
    except (HangTimeout, HangExit):
        status = HUNG
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        watchdog.disarm()
        watchdog.stop()
    return HUNG if hung else status


if __name__ == "__main__":
    sys.exit(main())
