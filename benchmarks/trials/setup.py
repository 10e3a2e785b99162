"""Build a trial workspace: setup.py TASK --condition with|plain --dest DIR [--verify] [--cache DIR]

DIR is made afresh (a workspace made before by this script is replaced; anything else is refused):
the task's source with its fault applied (a git repository of one commit), a venv with pytest and the
package's test dependencies (offline, from the cache's wheelhouse), the command logger
`.trial/bin/run`, and for a CI task the artifacts of one real run under CI's environment (then that
environment is gone). "with" adds pytest-mcpdebug built from this repository, `mcpdebug init -y` run
in the workspace (AGENTS.md, .mcp.json, the pytest configuration) and `mcp-call` in the venv.

The cache (default ~/.cache/mcpdebug-trials) holds the sdists (pinned by sha256 in tasks.json) and the
wheels; the first set-up fills it from PyPI with pip, later ones need no network.
`setup.py all --verify` builds every task in both conditions in a temporary folder and checks that the
fault shows (a hang times out, a failure fails, a flaky test fails within 20 runs, a CI failure is in
the artifact and not in a local run) and that `mcp-call --list` answers; it deletes what it built.
`setup.py TASK --prompt --condition C --dest DIR` prints the subject's prompt (README: the template).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TASKS = json.loads((HERE / "tasks.json").read_text(encoding="utf-8"))
ANSWERS = HERE / "answers"
DEFAULT_CACHE = Path.home() / ".cache" / "mcpdebug-trials"
MARK = ".trial/task.json"
LOGGER = HERE / "trial_run.py"
MCP_CALL = HERE / "mcp_call.py"
# the interpreter itself, not the venv this script runs in: workspaces outlive that venv
PYTHON = getattr(sys, "_base_executable", sys.executable) if sys.version_info >= (3, 11) else "python3"
_BUILT: list[Path] = []


def sh(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise SystemExit(f"set-up failed: {' '.join(cmd)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


# -- the cache: sdists pinned by sha256, and a wheelhouse ------------------------------------------


def sdist(cache: Path, name: str) -> Path:
    pin = TASKS["sdists"][name]
    path = cache / "sdists" / name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        sh(
            [
                PYTHON,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                pin["pip"],
                "-d",
                str(path.parent),
            ]
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != pin["sha256"]:
        raise SystemExit(f"{path}: sha256 {digest}, expected {pin['sha256']}; delete it and run again")
    return path


def wheelhouse(cache: Path, deps: list[str], with_project: bool) -> list[Path]:
    """The folders pip installs from: the cache's wheels, and (with) this repository's wheel."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    stamp = wheels / ("deps-" + hashlib.sha256("\n".join(sorted(deps)).encode()).hexdigest()[:12])
    if not stamp.exists():
        sh([PYTHON, "-m", "pip", "download", "-q", "-d", str(wheels), *deps])
        stamp.touch()
    if not with_project:
        return [wheels]
    if not _BUILT:
        # a wheel of this repository as it is now, once per set-up command, in a folder of its own
        # (set-ups running at the same time each install their own); what it needs goes to the cache
        own = Path(tempfile.mkdtemp(prefix="trials-wheel-"))
        atexit.register(shutil.rmtree, own, True)
        sh([PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(own), str(REPO)])
        built = next(own.glob("*.whl"))
        sh([PYTHON, "-m", "pip", "download", "-q", "-d", str(wheels), str(built)])
        # the cache keeps its dependencies, not the wheel: an older build of the same version there
        # would be installed in its place (pip takes the first file of a name it finds)
        (wheels / built.name).unlink(missing_ok=True)
        _BUILT.append(own)
    return [wheels, _BUILT[0]]


# -- the workspace ------------------------------------------------------------------------------------


def fresh(dest: Path) -> None:
    if dest.exists():
        if not (dest / MARK).is_file():
            raise SystemExit(f"{dest} exists and is not a trial workspace: give a new folder")
        for proc_dir in Path("/proc").glob("[0-9]*"):  # processes a subject left running there
            try:
                cwd = os.readlink(proc_dir / "cwd")
                if (cwd == str(dest) or cwd.startswith(f"{dest}/")) and int(proc_dir.name) != os.getpid():
                    os.kill(int(proc_dir.name), 9)
            except (OSError, ValueError):
                continue
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


def place_source(task: dict, dest: Path, cache: Path) -> None:
    source = task["source"]
    if source.startswith("project:"):
        shutil.copytree(
            HERE / "projects" / source.split(":", 1)[1],
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
        )
        return
    with tarfile.open(sdist(cache, source)) as tar:
        top = tar.getnames()[0].split("/")[0]
        with tempfile.TemporaryDirectory() as tmp:
            tar.extractall(tmp, filter="data")
            shutil.copytree(Path(tmp) / top, dest, dirs_exist_ok=True)


def apply_fault(task_id: str, dest: Path) -> None:
    patch = ANSWERS / f"{task_id}.patch"
    sh(["patch", "-s", "-p1", "--no-backup-if-mismatch", "-i", str(patch)], cwd=dest)


def make_venv(task: dict, dest: Path, wheels: list[Path], with_project: bool) -> Path:
    venv = dest / ".venv"
    sh([PYTHON, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    # this repository's wheel by its path: never an older build of the same version
    own = [str(next(wheels[-1].glob("pytest_mcpdebug-*.whl")))] if with_project else []
    wanted = list(task["deps"]) + own
    links = [arg for folder in wheels for arg in ("--find-links", str(folder))]
    sh([str(py), "-m", "pip", "install", "-q", "--no-index", *links, *wanted])
    source = TASKS["sdists"].get(task["source"])
    if source:
        # the package under test can be a dependency of what was installed (anyio is one of the MCP
        # SDK's): its wheel in site-packages would shadow the workspace's source on the .pth line, as
        # `pip install -e .` does not let it; the source's own metadata then satisfies the dependency
        name = source["pip"].split("==")[0]
        installed = subprocess.run([str(py), "-m", "pip", "show", "-q", name], capture_output=True)
        if installed.returncode == 0:
            sh([str(py), "-m", "pip", "uninstall", "-q", "-y", name])
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(sh([str(py), "-c", purelib]).stdout.strip())
    (site / "_trial_source.pth").write_text(str((dest / task["pythonpath"]).resolve()) + "\n")
    return venv


# a task's `shell_env: "workstation"`: only these (and LC_*) of this machine's variables, as on a
# developer's workstation (this machine may export what only CI has, e.g. REQUESTS_CA_BUNDLE);
# trial_run.py keeps the same list for the subject's shell
WORKSTATION = ("HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TMPDIR", "PATH")


def shell_env(dest: Path) -> dict[str, str]:
    """The subject's shell: the workspace's venv first on PATH, as after `source .venv/bin/activate`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPDEBUG", "PYTEST", "VIRTUAL_ENV"))}
    try:
        task = json.loads((dest / MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        task = {}
    if TASKS["tasks"].get(task.get("task", ""), {}).get("shell_env") == "workstation":
        env = {k: v for k, v in env.items() if k in WORKSTATION or k.startswith("LC_")}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{dest / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(dest / ".venv")
    return env


def install_tools(dest: Path, with_project: bool) -> None:
    bin_dir = dest / ".trial" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    run = bin_dir / "run"
    run.write_text(f"#!{PYTHON}\n" + LOGGER.read_text(encoding="utf-8"))
    run.chmod(0o755)
    if with_project:
        call = dest / ".venv" / "bin" / "mcp-call"
        call.write_text(f"#!{dest / '.venv' / 'bin' / 'python'}\n" + MCP_CALL.read_text(encoding="utf-8"))
        call.chmod(0o755)


def git_commit(dest: Path, message: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }
    if not (dest / ".git").exists():
        sh(["git", "init", "-q", "-b", "main"], cwd=dest)
        (dest / ".git" / "info" / "exclude").write_text(".trial/\n.venv/\nci/\n.mcpdebug/\n__pycache__/\n")
    sh(["git", "add", "-A"], cwd=dest)
    sh(["git", "commit", "-q", "-m", message], cwd=dest, env=env)


@contextlib.contextmanager
def ci_services(ci: dict[str, Any]) -> Iterator[dict[str, str]]:
    """What CI's job starts before the tests and the variables it exports for them (ended after).

    `ssh_agent` (a key comment): an ssh-agent holding one new ed25519 key, as a job that loads a
    deploy key (`eval $(ssh-agent)`, `ssh-add`) has it; SSH_AUTH_SOCK and SSH_AGENT_PID are exported."""
    comment = ci.get("ssh_agent")
    if not comment:
        yield {}
        return
    folder = Path(tempfile.mkdtemp(prefix="ssh-"))  # short: an AF_UNIX path has 107 bytes at most
    key, sock = folder / "id_ed25519", folder / "agent.sock"
    sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
    agent = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if agent.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"set-up failed: ssh-agent did not start (exit {agent.poll()})")
            time.sleep(0.05)
        exported = {"SSH_AUTH_SOCK": str(sock), "SSH_AGENT_PID": str(agent.pid)}
        sh(["ssh-add", "-q", str(key)], env={**os.environ, **exported})
        yield exported
    finally:
        agent.terminate()
        agent.wait()
        shutil.rmtree(folder, ignore_errors=True)


def ci_cpus(ci: dict) -> list[str]:
    """A CI job's `cpus` (e.g. "0"): the runner's CPUs, as a one-vCPU runner has them; the job's
    commands run under `taskset -c CPUS` (the log does not show it, as a runner's does not)."""
    return ["taskset", "-c", str(ci["cpus"])] if ci.get("cpus") is not None else []


def ci_artifacts(task: dict, dest: Path, with_project: bool) -> None:
    """One real run under CI's environment; its console log (and, with the project, its store and
    HTML report) are kept; CI's files, services and variables are not."""
    ci = task["ci"]
    with ci_services(ci) as exported:
        _ci_run(ci, dest, with_project, exported)


def _ci_run(ci: dict[str, Any], dest: Path, with_project: bool, exported: dict[str, str]) -> None:
    for name, text in ci.get("files", {}).items():
        (dest / name).write_text(text, encoding="utf-8")
    env = {**shell_env(dest), **ci.get("env", {}), **exported, "CI": "true"}
    out = dest / "ci"
    out.mkdir()
    cmd = ["pytest", *ci.get("args", [])] + (["--mcp-debug-html", "ci/report.html"] if with_project else [])
    # CI's job time limit (`timeout`, default 600 s): the job is killed then, the log just stops
    # and the runner adds its line, as a cancelled job's log does
    limit = ci.get("timeout", 600)
    log = out / "console.log"
    with log.open("w", encoding="utf-8") as console:
        console.write(f"$ {shlex.join(cmd)}\n")
        console.flush()
        job = subprocess.Popen(
            [*ci_cpus(ci), *cmd],
            cwd=dest,
            env=env,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            job.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            # as a runner cancels a job: SIGTERM to the job's processes, SIGKILL after a grace period
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            allowed = f"{limit // 60} minutes" if limit % 60 == 0 else f"{limit} seconds"
            console.write(
                f"\n##[error]The job running on runner ci-runner-2 has exceeded the maximum "
                f"execution time of {allowed}.\n##[error]The operation was canceled.\n"
            )
    if with_project and not (out / "report.html").is_file():  # (a killed run writes it since 2026-11-29)
        # a cancelled job's pytest never reached its session end, where the report is written: the
        # workflow's `if: always()` step writes it from the store, as a CI set-up would
        sh(["mcpdebug", "report", "--html", "ci/report.html"], cwd=dest, env=env)
    for name in ci.get("files", {}):
        (dest / name).unlink()
    for cache in dest.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(dest / ".pytest_cache", ignore_errors=True)


def artifacts_sentence(task: dict, with_project: bool) -> str:
    if task["kind"] != "ci":
        return ""
    if with_project:
        return (
            "CI keeps the artifacts of the failing run, downloaded here: the console log "
            "`ci/console.log`, the HTML report `ci/report.html`, and the run's recorded "
            "`.mcpdebug/` store, unpacked into the project's `.mcpdebug/`."
        )
    return "CI keeps the console log of the failing run, downloaded here as `ci/console.log`."


def client_context(dest: Path) -> list[str]:
    """What a native MCP client puts before its agent in a project after `mcpdebug init` (round 4 on):
    the project's instructions file, loaded at start as Codex loads AGENTS.md and Claude Code its
    CLAUDE.md, and the connected server's tools as the client lists them (`mcp-call --list`, the same
    names, descriptions and arguments); a shell agent calls them through `mcp-call`."""
    env = shell_env(dest)
    listed = subprocess.run(
        ["mcp-call", "--list"], cwd=dest, env=env, capture_output=True, text=True, timeout=120
    )
    subprocess.run(["mcp-call", "--stop"], cwd=dest, env=env, capture_output=True, check=False, timeout=60)
    if listed.returncode != 0:
        raise SystemExit(f"mcp-call --list failed in {dest}: {listed.stderr[-500:]}")
    return [
        "Your MCP client has started this project's MCP server `mcpdebug` (from `.mcp.json`); from the "
        "shell you call its tools with `mcp-call TOOL key=value ...`. The client lists them as:",
        "",
        "```",
        listed.stdout.strip(),
        "```",
        "",
        *project_instructions(dest),
    ]


def project_instructions(dest: Path) -> list[str]:
    """The project's AGENTS.md as a client loads it, in either condition (anyio and cachetools ship
    their own; `mcpdebug init` adds its section in "with")."""
    path = dest / "AGENTS.md"
    if not path.is_file():
        return []
    return [
        "The project's AGENTS.md, which your client loads for every conversation in this folder:",
        "",
        "````markdown",  # four: a project's AGENTS.md may hold fenced blocks of its own
        path.read_text(encoding="utf-8").strip(),
        "````",
        "",
    ]


def prompt(task_id: str, condition: str, dest: Path, bare: bool = False) -> str:
    task = TASKS["tasks"][task_id]
    body = task["prompt"].replace("{artifacts}", artifacts_sentence(task, condition == "with"))
    body = " ".join(body.split())
    lines = [body, ""]
    if condition == "with" and bare:  # rounds 1-3: one line, the agent lists the tools itself
        lines += [
            "This project's MCP server is reachable from the shell with `mcp-call` "
            "(list its tools with `mcp-call --list`).",
            "",
        ]
    elif condition == "with":
        lines += client_context(dest)
    elif not bare:
        lines += project_instructions(dest)
    lines += [
        f"The project is in {dest}. Run every shell command through the logger, from that folder: "
        f"`{dest}/.trial/bin/run 'COMMAND'` (it runs COMMAND with bash in the project's virtualenv "
        "and records it). Read and edit files with shell commands through it too, not with a separate "
        "file tool. Work only inside that folder.",
        "",
        "End with a short report: the cause, the file and line(s) at fault, and the fix you made.",
    ]
    return "\n".join(lines) + "\n"


def build(task_id: str, condition: str, dest: Path, cache: Path) -> None:
    task = TASKS["tasks"][task_id]
    with_project = condition == "with"
    started = time.monotonic()
    dest = dest.resolve()
    fresh(dest)
    place_source(task, dest, cache)
    apply_fault(task_id, dest)
    # the mark early: shell_env() reads the task from it during set-up (rewritten at the end)
    (dest / ".trial").mkdir(exist_ok=True)
    (dest / MARK).write_text(json.dumps({"task": task_id, "condition": condition}))
    wheels = wheelhouse(cache, task["deps"], with_project)
    make_venv(task, dest, wheels, with_project)
    install_tools(dest, with_project)
    if with_project:
        # `init_args`: the developer's choice at init (e.g. a hang timeout below the package's own)
        init = ["mcpdebug", "init", "-y", *task.get("init_args", []), "."]
        sh(init, cwd=dest, env=shell_env(dest))
    if task["kind"] == "ci":
        ci_artifacts(task, dest, with_project)
    git_commit(dest, "current main")
    (dest / ".trial" / "task.json").write_text(
        json.dumps(
            {
                "task": task_id,
                "condition": condition,
                "kind": task["kind"],
                "built": time.time(),
                "symptom": task["symptom"],
                **({"shell_env": task["shell_env"]} if "shell_env" in task else {}),
            },
            indent=2,
        )
    )
    (dest / ".trial" / "prompt.md").write_text(prompt(task_id, condition, dest), encoding="utf-8")
    print(f"{task_id} ({condition}): {dest} in {time.monotonic() - started:.0f} s")


# -- verification: the fault shows, the tools answer ---------------------------------------------------


def verify(task_id: str, condition: str, dest: Path) -> list[str]:
    task = TASKS["tasks"][task_id]
    env = shell_env(dest)
    problems: list[str] = []
    base = ["pytest", "-p", "no:cacheprovider", task["symptom"]]
    if task["kind"] == "hang":
        # in a session of its own: the whole tree (a process pool's workers too) ends at the timeout
        with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
            hung = subprocess.Popen(
                ["pytest", "-x", task["symptom"]],
                cwd=dest,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                hung.wait(timeout=20)
                # a hang timeout below 20 s (`init_args`, under a library's own timeout) ends it
                # sooner in "with": then it must have ended with the hang's diagnosis
                out.seek(0)
                if not (condition == "with" and f"HANG {task['symptom']}" in out.read()):
                    problems.append("the symptom test did not hang")
            except subprocess.TimeoutExpired:
                os.killpg(hung.pid, signal.SIGKILL)
                hung.wait()
    elif task["kind"] == "ci":
        local = subprocess.run(base, cwd=dest, env=env, capture_output=True, text=True, timeout=300)
        if local.returncode != 0:
            problems.append("the CI failure reproduces locally")
        log = (dest / "ci" / "console.log").read_text(encoding="utf-8")
        shown = (f"FAILED {task['symptom']}", f"ERROR {task['symptom']}")
        if task["ci"].get("hangs"):
            # CI's job hung in the symptom test: the log was cut off at the job's limit, or (with the
            # project's hang timeout) the test failed with its diagnosis
            cut = "The operation was canceled" in log and task["symptom"].split("::")[0] in log
            if not (cut or (condition == "with" and any(line in log for line in shown))):
                problems.append("the CI console log shows no hang in the symptom test")
        elif not any(line in log for line in shown):
            problems.append("the CI console log does not show the failure")
        if condition == "with" and not (dest / "ci" / "report.html").is_file():
            problems.append("no HTML report")
    elif task["kind"] == "flaky":
        outcomes = [
            subprocess.run(
                ["pytest", "-q", "-p", "no:cacheprovider", "tests"],
                cwd=dest,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            ).returncode
            for _ in range(20)
        ]
        failed = sum(rc != 0 for rc in outcomes)
        if not 0 < failed < 20:
            problems.append(f"not flaky: {failed}/20 runs failed")
        print(f"  {task_id}: {failed}/20 runs failed")
    else:
        done = subprocess.run(base, cwd=dest, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 1:
            problems.append(f"the symptom test did not fail (exit {done.returncode})")
    if condition == "with":
        listed = subprocess.run(
            ["mcp-call", "--list"], cwd=dest, env=env, capture_output=True, text=True, timeout=120
        )
        if listed.returncode != 0 or "get_failure" not in listed.stdout:
            problems.append(f"mcp-call --list did not answer: {listed.stderr[-500:]}")
        if not (dest / "AGENTS.md").is_file() or not (dest / ".mcp.json").is_file():
            problems.append("mcpdebug init wrote no AGENTS.md or .mcp.json")
    return problems


def stop_broker(dest: Path) -> list[str]:
    """`mcp-call --stop`, and the broker (and its server) gone within 30 s."""
    subprocess.run(["mcp-call", "--stop"], cwd=dest, env=shell_env(dest), check=False, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [p for p in Path("/proc").glob("[0-9]*") if _runs_from(p, dest)]
        if not left:
            return []
        time.sleep(0.5)
    return [f"mcp-call --stop left {len(left)} process(es) running"]


def _runs_from(proc_dir: Path, dest: Path) -> bool:
    try:
        return str(dest) in (proc_dir / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def check_answer(task_id: str, dest: Path) -> list[str]:
    """The fault undone (the patch reversed), the answer's check must pass: else no fix could."""
    sys.path.insert(0, str(HERE))
    import score  # the scoring script beside this one

    sh(
        ["patch", "-s", "-R", "-p1", "--no-backup-if-mismatch", "-i", str(ANSWERS / f"{task_id}.patch")],
        cwd=dest,
    )
    fixed, _, note = score.check(dest, task_id)
    return [] if fixed else [f"the answer's check fails without the fault: {note}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", help=f"one of {', '.join(TASKS['tasks'])}, or all (with --verify)")
    parser.add_argument("--condition", choices=["with", "plain"])
    parser.add_argument("--dest", type=Path)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--verify", action="store_true", help="build in a temporary folder, check, delete")
    parser.add_argument("--prompt", action="store_true", help="print the subject's prompt and stop")
    parser.add_argument(
        "--bare", action="store_true", help="with --prompt: rounds 1-3's prompt (one line about mcp-call)"
    )
    parser.add_argument(
        "--check-answers",
        action="store_true",
        help="with --verify: also check that the suite passes once the fault is undone",
    )
    args = parser.parse_args(argv)
    tasks = list(TASKS["tasks"]) if args.task == "all" else [args.task]
    if any(t not in TASKS["tasks"] for t in tasks):
        parser.error(f"unknown task {args.task!r}")
    conditions = [args.condition] if args.condition else ["plain", "with"]
    if args.prompt:
        if not args.dest or not args.condition:
            parser.error("--prompt needs --condition and --dest")
        print(prompt(tasks[0], args.condition, args.dest.resolve(), bare=args.bare), end="")
        return 0
    if not args.verify:
        if len(tasks) != 1 or not args.condition or not args.dest:
            parser.error("give one TASK, --condition and --dest (or --verify)")
        build(tasks[0], args.condition, args.dest, args.cache)
        return 0
    failures = 0
    for task_id in tasks:
        for condition in conditions:
            with tempfile.TemporaryDirectory(prefix=f"trial-{task_id}-{condition}-") as tmp:
                dest = Path(tmp) / "work"
                build(task_id, condition, dest, args.cache)
                problems = verify(task_id, condition, dest)
                if args.check_answers:
                    problems += check_answer(task_id, dest)
                if condition == "with":
                    problems += stop_broker(dest)
                print(f"  {task_id} ({condition}): {'OK' if not problems else '; '.join(problems)}")
                failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
