"""What a run ran in: its shards, its CI job, its machine and its environment variables (secrets hidden).

A failure seen only in CI often comes from the job's environment (a variable set otherwise, another
branch) or its machine (one usable CPU, an ASCII locale): `get_environment` and ``mcpdebug show RUN
--env`` say what the machine gave the run (`machine_facts`), then list the variables it recorded (each
shard's: those that differ between shards apart), and a run's summary names its shards and its CI job
in a few lines (`context_lines`).
"""

from __future__ import annotations

import re
from typing import Any, Final

from mcpdebug.replies import RunEnvironment, ShardRow
from mcpdebug.store import Store
from mcpdebug.views import machine_facts
from mcpdebug.views.calls import call
from mcpdebug.views.lookup import quoted
from mcpdebug.views.runs import bound, counts_text

MAX_VALUE_CHARS: Final = 300
"""A value shown longer is cut (the recording kept up to 1,000 characters of it)."""
_CI_ORDER: Final = ("workflow", "job", "run", "attempt", "commit", "branch", "event", "runner", "os", "url")


def ci_text(ci: dict[str, str]) -> str:
    """``github: workflow CI, job tests, run 123, commit 4f2a9c1, branch main (https://...)``."""
    if not ci:
        return ""
    shown = [f"{key} {_short(key, ci[key])}" for key in _CI_ORDER if ci.get(key) and key != "url"]
    shown += [f"{k} {v}" for k, v in ci.items() if k not in (*_CI_ORDER, "provider", "note") and v]
    provider = ci.get("provider", "ci")
    if provider == "ci":  # only CI=true was set
        provider = "a CI job (CI=true; no provider's variables)"
    text = provider + (": " + ", ".join(shown) if shown else "")
    return text + (f" ({ci['url']})" if ci.get("url") else "") + (f"; {ci['note']}" if ci.get("note") else "")


def _short(key: str, value: str) -> str:
    return value[:12] if key == "commit" and re.fullmatch(r"[0-9a-f]{40}", value) else value


def context_lines(store: Store, run: dict[str, Any]) -> list[str]:
    """For a run's summary: its shards (when there are several) and its CI job, if it ran in one."""
    shards = store.shards(run["run_id"])
    lines: list[str] = []
    if len(shards) > 1:
        tests = store.shard_tests(run["run_id"]) if not all(s["counts"] for s in shards) else {}
        lines.append(f"Shards ({len(shards)}), merged from one run id:")
        for shard in shards:
            lines.append(f"- {_shard_line(shard, tests)}")
    ci: dict[str, str] = next((s["ci"] for s in shards if s["ci"]), {})
    if ci:
        lines.append(f"CI: {ci_text(ci)}")
    machine: dict[str, str] = next((s["machine"] for s in shards if s.get("machine")), {})
    limited = machine_facts.limits(machine)
    if limited:  # a CI runner's one vCPU or cgroup quota: a cause of hangs that no variable names
        lines.append(f"Machine: {limited}")
    if any(s["environment"] for s in shards) or machine:
        what = "its machine and variables" if machine else "its variables"
        lines.append(f"Environment: {call('get_environment', run_id=run['run_id'])} lists {what}.")
    return lines


def _shard_line(shard: dict[str, Any], tests: dict[str, int]) -> str:
    label = shard["label"] or "(no label)"
    counts = counts_text(shard["counts"]) if shard["counts"] else f"{tests.get(shard['label'], 0)} tests"
    exit_status = f", exit status {shard['exit_status']}" if shard["exit_status"] is not None else ""
    status = "" if shard["status"] == "finished" else f", {shard['status']}"
    return f"{label} on {shard['host'] or '?'}: {counts}{exit_status}{status}"


def environment(store: Store, run: dict[str, Any], name: str | None = None) -> RunEnvironment:
    """The run's recorded environment: variables the same in every shard, those that differ, its CI."""
    rid = run["run_id"]
    shards = [s for s in store.shards(rid) if s["started"] is not None or s["environment"]]
    pattern = re.compile(re.escape(name), re.IGNORECASE) if name else None
    labels = [s["label"] for s in shards]
    values: dict[str, dict[str, str]] = {}
    for shard in shards:
        for key, value in shard["environment"].items():
            if pattern is None or pattern.search(key):
                values.setdefault(key, {})[shard["label"]] = value[:MAX_VALUE_CHARS]
    same = {
        k: next(iter(v.values()))
        for k, v in values.items()
        if len(v) == len(labels) and len(set(v.values())) == 1
    }
    differing = {k: v for k, v in sorted(values.items()) if k not in same}
    tests = store.shard_tests(rid)
    rows = [
        ShardRow(
            label=s["label"],
            host=s["host"],
            status=s["status"],
            exit_status=s["exit_status"],
            tests=tests.get(s["label"], 0) if len(shards) > 1 else sum(run["counts"].values()),
            ci=s["ci"],
            machine=s["machine"],
        )
        for s in shards
    ]
    ci: dict[str, str] = next((s["ci"] for s in shards if s["ci"]), {})
    text = _text(run, shards, tests, ci, same, differing, name)
    return RunEnvironment(text=text, run_id=rid, ci=ci, shards=rows, variables=same, differing=differing)


def _text(
    run: dict[str, Any],
    shards: list[dict[str, Any]],
    tests: dict[str, int],
    ci: dict[str, str],
    same: dict[str, str],
    differing: dict[str, dict[str, str]],
    name: str | None,
) -> str:
    rid = run["run_id"]
    if not any(s["environment"] for s in shards):
        return (
            f"Run {rid} recorded no environment (recorded by a pytest-mcpdebug from before environments "
            "were, or stored without its code version)."
        )
    lines = [f"Run {rid} ran in:", *machine_facts.block(shards)]
    if ci:
        lines.append(f"CI: {ci_text(ci)}")
    if len(shards) > 1:
        lines.append(f"Shards ({len(shards)}):")
        lines += [f"- {_shard_line(s, tests)}" + (f"; {ci_text(s['ci'])}" if s["ci"] else "") for s in shards]
    what = f" named like {quoted(name)}" if name else ""
    if differing:
        lines += ["", f"Variables{what} that differ between shards ({len(differing)}):"]
        for key, by_shard in differing.items():
            for label in [s["label"] for s in shards]:
                lines.append(f"  {key} [{label or 'no label'}] = {_value(by_shard.get(label))}")
    lines += ["", f"Variables{what} ({len(same)}{', the same in every shard' if len(shards) > 1 else ''}):"]
    lines += [f"  {key}={_value(value)}" for key, value in sorted(same.items())]
    if not same and not differing and name:
        lines.append(f"  (none; {call('get_environment', run_id=rid)} lists them all)")
    lines += [
        "",
        "Values of variables named like secrets (token, password, key, ...) and credentials inside "
        "values were hidden by the test process before they were recorded.",
    ]
    return bound("\n".join(lines))


def _value(value: str | None) -> str:
    if value is None:
        return "(not set)"
    return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "..."
