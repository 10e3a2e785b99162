"""run 'COMMAND': run COMMAND with bash in the trial workspace's virtualenv, and log it.

Every call appends two JSON lines to .trial/TRIAL_LOG.jsonl (a "start" line with the command, its
folder and the time; an "end" line with the exit status, the characters it printed and the seconds it
took) and keeps what it printed in .trial/out/N.txt. The output is shown as it comes, stdout and
stderr merged. Written by benchmarks/trials/setup.py; read by benchmarks/trials/score.py.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TRIAL = Path(__file__).resolve().parent.parent
ROOT = TRIAL.parent
LOG = TRIAL / "TRIAL_LOG.jsonl"
# a task's "shell_env": "workstation" (in .trial/task.json): the shell gets a developer workstation's
# login variables only, not whatever the machine running the trial exports
WORKSTATION = ("HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TMPDIR", "PATH")


def log(entry):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command = argv[0] if len(argv) == 1 else " ".join(argv)
    cwd = os.getcwd()
    if not (cwd == str(ROOT) or cwd.startswith(f"{ROOT}/")):
        cwd = str(ROOT)
    n = len(LOG.read_text(encoding="utf-8").splitlines()) if LOG.exists() else 0
    out_dir = TRIAL / "out"
    out_dir.mkdir(exist_ok=True)
    started = time.time()
    log({"n": n, "event": "start", "t": started, "cwd": cwd, "cmd": command})
    env = dict(os.environ)
    try:
        task = json.loads((TRIAL / "task.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        task = {}
    if task.get("shell_env") == "workstation":
        env = {k: v for k, v in env.items() if k in WORKSTATION or k.startswith("LC_")}
    env["VIRTUAL_ENV"] = str(ROOT / ".venv")
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("PYTHONHOME", None)
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    chars = 0

    def stop(signum, frame):
        os.killpg(proc.pid, signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(out_dir / f"{n:04d}.txt", "wb") as saved:
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            chars += len(chunk.decode("utf-8", "replace"))
            saved.write(chunk)
            saved.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
    rc = proc.wait()
    log(
        {
            "n": n,
            "event": "end",
            "t": time.time(),
            "rc": rc,
            "out_chars": chars,
            "seconds": round(time.time() - started, 3),
        }
    )
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
