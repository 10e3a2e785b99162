"""A run's summary in Markdown: for a CI job's summary (``$GITHUB_STEP_SUMMARY``) or a merge request.

What a reviewer scanning a CI page needs: the outcome in one line, each shard's, each failure and hang
with one line of diagnosis (the innermost frame of the project's code with its locals, from the
failure's snapshot; a hang's headline), and the commands that open the recording offline (`mcpdebug`
over the downloaded store, or `mcpdebug serve` for an agent). Bounded: at most `MAX_LISTED` of each.
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from mcpdebug.store import Store
from mcpdebug.views import calls
from mcpdebug.views.environment import ci_text
from mcpdebug.views.runs import counts_text, status_text
from mcpdebug.views.time_text import seconds

MAX_LISTED: Final = 30
"""Failures (and hangs) listed; the rest are counted, with the command that lists them."""
CELL_CHARS: Final = 160


def run_markdown(store: Store, run: dict[str, Any]) -> str:
    rid = run["run_id"]
    problems = store.problems(rid)
    hangs = store.hangs(rid)
    errors = store.collection_errors(rid)
    shards = store.shards(rid)
    failed = run["exit_status"] not in (0, None, 5) or problems or errors
    mark = "❌" if failed else ("⏳" if run["status"] == "running" else "✅")
    total = sum(run["counts"].values())
    lines = [
        f"### {mark} pytest: {counts_text(run['counts'])} (run `{rid}`)",
        "",
        f"{total} tests of {run['collected'] if run['collected'] is not None else '?'} collected; "
        f"{status_text(run)}; took {seconds(run['duration'])}.",
    ]
    ci: dict[str, str] = next((s["ci"] for s in shards if s["ci"]), {})
    if ci:
        lines.append(f"CI: {_inline(ci_text(ci))}")
    if len(shards) > 1:
        lines += ["", _shard_table(store, rid, shards)]
    if problems:
        lines += ["", f"#### Failures ({len(problems)})", ""]
        for p in problems[:MAX_LISTED]:
            label = "FAILED" if p["phase"] == "call" else f"ERROR in {p['phase']}"
            where = f", {_shard_of(p['worker'])}" if _shard_of(p["worker"]) else ""
            lines.append(
                f"- **{label}** {_code(p['nodeid'])}{where}: {_code(_cut(p['message'] or '(no message)'))}"
            )
            evidence = _evidence(store, rid, p["nodeid"])
            if evidence:
                lines.append(f"  - {_code(_cut(evidence))}")
        lines += _more(len(problems), "failures", ["show", rid, "--outcome", "failed,error"])
    if hangs:
        lines += ["", f"#### Hangs ({len(hangs)})", ""]
        for h in hangs[:MAX_LISTED]:
            lines.append(f"- {_code(h['nodeid'] or '(the run)')} [{h['kind']}]: {_code(_cut(h['summary']))}")
        lines += _more(len(hangs), "hangs", ["show", rid])
    if errors:
        lines += ["", f"#### Collection errors ({len(errors)})", ""]
        lines += [f"- {_code(e['nodeid'])}: {_code(_cut(e['message']))}" for e in errors[:MAX_LISTED]]
    lines += ["", *_investigate(rid, problems[0]["nodeid"] if problems else None)]
    return "\n".join(lines)


def _shard_table(store: Store, rid: str, shards: list[dict[str, Any]]) -> str:
    tests = store.shard_tests(rid)
    rows = ["| shard | host | tests | outcome | exit status |", "| --- | --- | ---: | --- | ---: |"]
    for s in shards:
        counted = sum(s["counts"].values()) if s["counts"] else tests.get(s["label"], 0)
        outcome = counts_text(s["counts"]) if s["counts"] else s["status"]
        exit_status = "" if s["exit_status"] is None else str(s["exit_status"])
        cells = [_cell(s["label"] or "(none)"), _cell(s["host"]), str(counted), _cell(outcome), exit_status]
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows)


def _evidence(store: Store, rid: str, nodeid: str) -> str:
    """The locals of the innermost frame of the project's code, as pytest's brief shows them."""
    for failure in store.failures(rid, nodeid):
        snapshot = failure["snapshot"]
        frame = next((f for f in snapshot.frames if not f.library and f.locals), None)
        if frame is not None:
            shown = ", ".join(f"{v.name} = {_cut(v.value, 60)}" for v in frame.locals[:6])
            return f"{frame.function}() at line {frame.line}: {shown}"
    return ""


def _investigate(rid: str, first: str | None) -> list[str]:
    commands = [
        ("the run, its shards and failures", ["show", rid]),
        *([("a failure's frames, locals and source", ["failure", rid, first])] if first else []),
        ("what it ran in (CI job, environment)", ["show", rid, "--env"]),
        ("every test's output, searched", ["logs", rid, "--grep", "PATTERN"]),
        ("for an agent: an MCP server over the store", ["serve"]),
    ]
    location = calls.location()
    width = max(len(_command(args, location)) for _, args in commands)
    return [
        "<details><summary>Investigate offline: download the merged store, then</summary>",
        "",
        "```bash",
        *[f"{_command(args, location):<{width}}  # {what}" for what, args in commands],
        "```",
        "",
        "</details>",
    ]


def _command(args: list[str], location: tuple[str, ...]) -> str:
    return "mcpdebug " + shlex.join([*args, *location])


def _more(count: int, what: str, args: list[str]) -> list[str]:
    if count <= MAX_LISTED:
        return []
    return [f"- ... and {count - MAX_LISTED} more {what}: `{_command(args, calls.location())}`"]


def _shard_of(worker: str | None) -> str:
    label = (worker or "").rpartition(":")[0]
    return f"shard {label}" if label else ""


def _cut(text: str, limit: int = CELL_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _code(text: str) -> str:
    """``text`` as a code span, whatever backquotes it holds."""
    longest = 0
    run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inline(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def _cell(text: str) -> str:
    return _inline(_cut(text, 60))
