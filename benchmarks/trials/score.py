"""Score trials, and print the table.

    score.py WORKSPACE --report REPORT.md [--results results.json] [--label L] [--no-check] [--wall S]
    score.py --table results.json           the Markdown table (one row per trial, then per kind)

WORKSPACE is one built by setup.py after a subject worked in it: its .trial/task.json says the task
and condition, .trial/TRIAL_LOG.jsonl the commands (see trial_run.py). REPORT is the subject's final
report, as the lead saved it. The row written (replacing one of the same task, condition and label):

- solved: named or fixed. named: the report names the faulty file and one of the answer's lines (one
  line either side counts). fixed: the answer's check passes in the workspace once the test files are
  put back as they were (a ci task's check runs under CI's environment and files; a flaky one many
  times). tests_edited says whether the subject changed a test file.
- commands by kind (pytest, mcp, mcpdebug, edit, grep, read, other), chars_read (what the commands
  printed), wall_s (first command's start to last command's end, or --wall), tools_used (an mcp-call
  or mcpdebug command), project_files_read (commands naming .mcpdebug/ or the HTML report),
  touched_outside (a command that names a path outside the workspace: a peek).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TASKS = json.loads((HERE / "tasks.json").read_text(encoding="utf-8"))["tasks"]
ANSWERS = json.loads((HERE / "answers" / "answers.json").read_text(encoding="utf-8"))
_SYSTEM = ("/dev/", "/tmp/", "/usr/", "/bin/", "/proc/")
KINDS = ("pytest", "mcp", "mcpdebug", "edit", "grep", "read", "other")

_PYTEST = re.compile(r"(^|[\s;&|(/])(py\.test|pytest)(\s|$)|python3?\s+-m\s+pytest")
_EDIT = re.compile(
    r"\bsed\s+(-\w*\s+)*-i|\bperl\s+-\w*i|\bpatch\b|\bgit\s+(apply|checkout|restore)\b|\btee\b|"
    r"(^|[^0-9&2])>{1,2}\s*(?!/dev/null|&)[\w./-]+|write_text|\.write\(|open\([^)]*['\"][wa]['\"]|\bed\s|apply_patch"
)
_GREP = re.compile(r"(^|[\s;&|(])(grep|egrep|rg|ag|ack|find|git\s+grep)(\s|$)")
_READ = re.compile(
    r"(^|[\s;&|(])(cat|sed|head|tail|less|more|nl|awk|bat|view|git\s+(show|diff|log|blame)|python3?\s+-c)(\s|$)"
)


def kind_of(cmd: str) -> str:
    if _PYTEST.search(cmd) and "pip " not in cmd:
        return "pytest"
    if "mcp-call" in cmd:
        return "mcp"
    if re.search(r"(^|[\s;&|(/])mcpdebug\s", cmd):
        return "mcpdebug"
    if _EDIT.search(cmd):
        return "edit"
    if _GREP.search(cmd):
        return "grep"
    if _READ.search(cmd):
        return "read"
    return "other"


def read_log(workspace: Path) -> list[dict]:
    """One entry per command: start's fields, and end's (rc, out_chars, seconds) when it ended."""
    path = workspace / ".trial" / "TRIAL_LOG.jsonl"
    commands: dict[int, dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            entry[entry.pop("event", "start")] = entry.pop("t", 0.0)
            commands.setdefault(entry["n"], {}).update(entry)
    for n, entry in commands.items():
        if "out_chars" not in entry:  # never ended (killed with the logger): count what it saved
            saved = workspace / ".trial" / "out" / f"{n:04d}.txt"
            entry["out_chars"] = len(saved.read_bytes().decode("utf-8", "replace")) if saved.exists() else 0
    return [commands[n] for n in sorted(commands)]


def named(report: str, answer: dict) -> bool:
    """The faulty file named (not a file whose name ends like it: test_x.py for x.py) with one of the
    answer's lines (one either side counts) close to it: `x.py:12`, `x.py, line 12`, `line 12 of x.py`."""
    base = Path(answer["file"]).name
    wanted = {n + d for n in answer["lines"] for d in (-1, 0, 1)}
    numbers: set[int] = set()
    for hit in re.finditer(rf"(?<![\w.-]){re.escape(base)}", report):
        after = report[hit.end() : hit.end() + 60]
        before = report[max(0, hit.start() - 60) : hit.start()]
        if m := re.match(r"\D{0,3}:(\d+)(?:\s*[-–]\s*(\d+))?", after):
            numbers.update(_span(m))
        for m in re.finditer(r"\b[Ll]ines?\s*(\d+)(?:\s*(?:[-–]|to|and|,)\s*(\d+))?", after + " " + before):
            numbers.update(_span(m))
    return bool(numbers & wanted)


def _span(m: re.Match[str]) -> set[int]:
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else first
    return set(range(first, last + 1)) if 0 <= last - first <= 50 else {first, last}


def faulty_tree(task_id: str, into: Path) -> Path:
    """The workspace's source as set-up left it (fault applied), rebuilt from the cache."""
    sys.path.insert(0, str(HERE))
    import setup as trial_setup

    into.mkdir(parents=True, exist_ok=True)
    trial_setup.place_source(TASKS[task_id], into, trial_setup.DEFAULT_CACHE)
    trial_setup.apply_fault(task_id, into)
    return into


def test_files(root: Path) -> dict[str, bytes]:
    found = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in (".venv", ".trial", ".git") or "__pycache__" in rel.parts:
            continue
        if "tests" in rel.parts or rel.name.startswith("test_") or rel.name == "conftest.py":
            found[str(rel)] = path.read_bytes()
    return found


def check(workspace: Path, task_id: str) -> tuple[bool, bool, str]:
    """(fixed, tests_edited, note): the answer's check run in the workspace with its tests restored."""
    answer, task = ANSWERS[task_id], TASKS[task_id]
    with tempfile.TemporaryDirectory() as tmp:
        original = test_files(faulty_tree(task_id, Path(tmp) / "src"))
    now = test_files(workspace)
    edited = any(now.get(rel) != data for rel, data in original.items())
    for rel, data in original.items():
        (workspace / rel).write_bytes(data)
    sys.path.insert(0, str(HERE))
    import setup as trial_setup

    env = trial_setup.shell_env(workspace)
    ci = task.get("ci", {})
    env.update(ci.get("env", {}))
    for name, text in ci.get("files", {}).items():
        (workspace / name).write_text(text, encoding="utf-8")
    spec = answer["check"]
    runs = int(spec.get("runs", 1))
    with trial_setup.ci_services(ci) as exported:  # what CI's job starts (an ssh-agent)
        env.update(exported)
        return _run_check(workspace, ci, spec, runs, env, edited)


def _run_check(
    workspace: Path, ci: dict[str, Any], spec: dict[str, Any], runs: int, env: dict[str, str], edited: bool
) -> tuple[bool, bool, str]:
    try:
        for i in range(runs):
            try:
                import setup as trial_setup  # (on sys.path: check() put it there)

                done = subprocess.run(
                    [*trial_setup.ci_cpus(ci), "pytest", "-q", "-p", "no:cacheprovider", *spec["args"]],
                    cwd=workspace,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=spec["timeout"],
                )
            except subprocess.TimeoutExpired:
                return False, edited, f"run {i + 1}: timed out after {spec['timeout']} s"
            if done.returncode != 0:
                tail = done.stdout.strip().splitlines()[-1:] or ["?"]
                return False, edited, f"run {i + 1}/{runs}: exit {done.returncode}: {tail[0]}"
        return True, edited, f"{runs} run(s) passed"
    finally:
        for name in ci.get("files", {}):
            (workspace / name).unlink(missing_ok=True)


PLUGIN_BLOCKS = ("mcpdebug: hangs", "mcpdebug: beyond the traceback")
"""The headers of what the plugin adds to pytest's own output (a hang's diagnosis, the brief)."""


def diagnosis_read(workspace: Path) -> int:
    """Commands whose output held the plugin's own block in pytest's output: the project reached the
    agent where it already looks, without a tool call."""
    out = workspace / ".trial" / "out"
    texts = (p.read_bytes().decode("utf-8", "replace") for p in sorted(out.glob("*.txt")))
    return sum(any(block in text for block in PLUGIN_BLOCKS) for text in texts)


def score(workspace: Path, report_path: Path, label: str, run_check: bool, wall: float | None) -> dict:
    meta = json.loads((workspace / ".trial" / "task.json").read_text(encoding="utf-8"))
    task_id = meta["task"]
    report = report_path.read_text(encoding="utf-8")
    commands = read_log(workspace)
    counts = dict.fromkeys(KINDS, 0)
    outside = []
    for c in commands:
        counts[kind_of(c["cmd"])] += 1
        for token in shlex.split(c["cmd"], posix=True) if _splittable(c["cmd"]) else c["cmd"].split():
            if token.startswith("/") and not token.startswith((str(workspace), *_SYSTEM)):
                outside.append(token)
    if wall is None and commands:
        first = min(c.get("start", 0.0) for c in commands)
        last = max(max(c.get("end", 0.0), c.get("start", 0.0)) for c in commands)
        wall = round(last - first, 1)
    was_named = named(report, ANSWERS[task_id])
    fixed, edited, note = check(workspace, task_id) if run_check else (False, False, "not checked")
    return {
        "task": task_id,
        "kind": meta["kind"],
        "condition": meta["condition"],
        "label": label,
        "solved": was_named or fixed,
        "named": was_named,
        "fixed": fixed,
        "tests_edited": edited,
        "check": note,
        "commands": {**counts, "total": len(commands)},
        "chars_read": sum(int(c.get("out_chars", 0)) for c in commands),
        "wall_s": wall,
        "tools_used": counts["mcp"] + counts["mcpdebug"] > 0,
        "project_files_read": sum(".mcpdebug" in c["cmd"] or "report.html" in c["cmd"] for c in commands),
        "diagnosis_read": diagnosis_read(workspace),
        "touched_outside": sorted(set(outside)),
    }


def _splittable(cmd: str) -> bool:
    try:
        shlex.split(cmd)
    except ValueError:
        return False
    return True


def save(row: dict, results: Path) -> None:
    rows = json.loads(results.read_text(encoding="utf-8")) if results.exists() else []
    key = (row["task"], row["condition"], row["label"])
    rows = [r for r in rows if (r["task"], r["condition"], r["label"]) != key] + [row]
    rows.sort(key=lambda r: (r["kind"], r["task"], r["condition"], r["label"]))
    results.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


def table(rows: list[dict]) -> str:
    out = [
        "| task | condition | solved | named | fixed | commands | pytest | mcp | mcpdebug | read+grep "
        "| edit | chars read | wall s | tools used | plugin's block read |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- "
        "| ---: |",
    ]
    yes = {True: "yes", False: "no"}
    for r in rows:
        c = r["commands"]
        out.append(
            f"| {r['task']} | {r['condition']} | {yes[r['solved']]} | {yes[r['named']]} "
            f"| {yes[r['fixed']]} "
            f"| {c['total']} | {c['pytest']} | {c['mcp']} | {c['mcpdebug']} | {c['read'] + c['grep']} "
            f"| {c['edit']} | {r['chars_read']:,} | {r['wall_s']} | {yes[r['tools_used']]} "
            f"| {r.get('diagnosis_read', 0)} |"
        )
    out += [
        "",
        "| kind | condition | trials | solved | commands (median) | chars read (median) | tools used "
        "| tools used or the plugin's block read |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["condition"]), []).append(r)
    for (kind, condition), group in sorted(groups.items()):
        out.append(
            f"| {kind} | {condition} | {len(group)} | {sum(r['solved'] for r in group)} "
            f"| {_median([r['commands']['total'] for r in group])} "
            f"| {_median([r['chars_read'] for r in group]):,} "
            f"| {sum(r['tools_used'] for r in group)}/{len(group)} "
            f"| {sum(r['tools_used'] or r.get('diagnosis_read', 0) > 0 for r in group)}/{len(group)} |"
        )
    return "\n".join(out) + "\n"


def goal(rows: list[dict]) -> str:
    """Issue 44's goal over ROWS: tools used in the "with" trials; on hang and CI tasks, the with-
    commands against the plain ones (each task's trials of one condition averaged, so a task run
    twice weighs as one), and the tasks solved in each condition."""
    by_task: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_task.setdefault((r["task"], r["condition"]), []).append(r)
    with_rows = [r for r in rows if r["condition"] == "with"]
    used = sum(r["tools_used"] for r in with_rows)
    totals = {"with": 0.0, "plain": 0.0}
    walls = {"with": 0.0, "plain": 0.0}
    solved = {"with": 0.0, "plain": 0.0}
    tasks = sorted({t for (t, c) in by_task if (t, "with") in by_task and (t, "plain") in by_task})
    paired = [t for t in tasks if by_task[(t, "with")][0]["kind"] in ("hang", "ci")]
    for task in tasks:
        for condition in totals:
            trials = by_task[(task, condition)]
            solved[condition] += sum(r["solved"] for r in trials) / len(trials)
            if task in paired:
                totals[condition] += sum(r["commands"]["total"] for r in trials) / len(trials)
                walls[condition] += sum(r["wall_s"] for r in trials) / len(trials)
    share = totals["with"] / totals["plain"] if totals["plain"] else 0.0
    return (
        f"tools used in {used} of {len(with_rows)} with-trials ({used / max(len(with_rows), 1):.0%}); "
        f"hang and CI tasks ({len(paired)}): with {totals['with']:.0f} commands, plain "
        f"{totals['plain']:.0f} ({share:.0%}), wall time {walls['with']:,.0f} s against "
        f"{walls['plain']:,.0f} s ({walls['with'] / max(walls['plain'], 1):.0%}); "
        f"tasks solved: with {solved['with']:g}, plain "
        f"{solved['plain']:g} of {len(tasks)}\n"
    )


def _median(values: list[int]) -> int:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else round((ordered[mid - 1] + ordered[mid]) / 2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace", nargs="?", type=Path)
    parser.add_argument("--report", type=Path)
    parser.add_argument("--results", type=Path, default=HERE / "results.json")
    parser.add_argument("--label", default="1", help="tells repeated trials of one task and condition apart")
    parser.add_argument("--no-check", action="store_true", help="do not run the fix check")
    parser.add_argument(
        "--named",
        choices=["yes", "no"],
        help="the lead's reading of the report, over the heuristic's (named is a heuristic)",
    )
    parser.add_argument("--wall", type=float, help="wall time in seconds, when known better than the log's")
    parser.add_argument("--table", type=Path, metavar="RESULTS", help="print the Markdown table of RESULTS")
    parser.add_argument(
        "--goal", type=Path, metavar="RESULTS", help="print issue 44's goal figures of RESULTS"
    )
    parser.add_argument(
        "--with-labels", help="with --table/--goal: only these labels' with-trials (comma-separated)"
    )
    parser.add_argument(
        "--plain-labels", help="with --table/--goal: only these labels' plain trials (comma-separated)"
    )
    args = parser.parse_args(argv)
    if args.table or args.goal:
        rows = json.loads((args.table or args.goal).read_text(encoding="utf-8"))
        for condition, labels in (("with", args.with_labels), ("plain", args.plain_labels)):
            if labels:
                keep = set(labels.split(","))
                rows = [r for r in rows if r["condition"] != condition or r["label"] in keep]
        print((table if args.table else goal)(rows), end="")
        return 0
    if not args.workspace or not args.report:
        parser.error("give WORKSPACE and --report (or --table RESULTS)")
    row = score(args.workspace.resolve(), args.report, args.label, not args.no_check, args.wall)
    if args.named:
        row["named"] = args.named == "yes"
        row["solved"] = row["named"] or row["fixed"]
    save(row, args.results)
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
