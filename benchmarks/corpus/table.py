"""The Markdown table of a corpus run (from its raw results)."""

from __future__ import annotations

from typing import Any

CONFIGS = ("serial", "xdist", "coverage")


def markdown(results: dict[str, Any]) -> str:
    batches = results.get("batches")
    lines = [f"Python {results['python']}, {results['nproc']} cores, {results['jobs']} runs at a time"]
    if batches:
        lines += [f"- {_batch_line(b)}" for b in batches]
    else:
        lines[0] += f"; {results['date']}, commit {results['commit']}; `{results['command']}`"
    lines += [
        "",
        "| project | covers | tests | recorded runs (serial / -n 2 / cov) | outcome mismatches | hangs "
        "| new warnings | ratio serial | ratio -n 2 | ratio cov | notes |",
        "| --- | --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for name, project in results["projects"].items():
        summaries = {
            c: project["configs"][c]["summary"] for c in CONFIGS if "summary" in project["configs"].get(c, {})
        }
        if not summaries:
            continue
        tests = max(s["tests"] for s in summaries.values())
        runs = " / ".join(str(summaries[c]["recorded_runs"]) if c in summaries else "-" for c in CONFIGS)
        mismatches = _per_config(summaries, "mismatched_runs")
        hangs = _per_config(summaries, "hangs")
        new_warnings = sum(len(s["new_warnings"]) + len(s["plugin_warnings"]) for s in summaries.values())
        ratios = [_ratio(summaries.get(c)) for c in CONFIGS]
        notes = [project["notes"]]
        varies = sorted({t for s in summaries.values() for t in s["plain_varies"]})
        if varies:
            notes.append(
                f"flaky by itself (plain varies): {', '.join(varies[:3])}{' ...' if len(varies) > 3 else ''}"
            )
        plain_hangs = sum(s["plain_hangs"] for s in summaries.values())
        if plain_hangs:
            notes.append(f"plain hung {plain_hangs}x")
        differs = [d for s in summaries.values() for d in s.get("record_differs", [])]
        checked = sum(s.get("record_checked", 0) for s in summaries.values())
        if differs:
            notes.append(f"record differs from pytest in {len(differs)} of {checked} read back: {differs[0]}")
        if project["deselected"]:
            notes.append(f"{len(project['deselected'])} deselected")
        batch = f" ({project['batch']})" if batches else ""
        cells = [
            f"{name} {project['version']}{batch}",
            ", ".join(project["covers"]),
            tests,
            runs,
            mismatches,
            hangs,
        ]
        cells += [new_warnings, *ratios, "; ".join(n for n in notes if n)]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _per_config(summaries: dict[str, dict[str, Any]], key: str) -> str:
    values = [summaries[c][key] if c in summaries else None for c in CONFIGS]
    if all(not v for v in values):
        return "0"
    return " / ".join("-" if v is None else str(v) for v in values)


def _ratio(summary: dict[str, Any] | None) -> str:
    if not summary or summary["ratio"] is None:
        return "-"
    return f"{summary['ratio']:.2f}x"


def _batch_line(batch: dict[str, Any]) -> str:
    """`A` (toolz, pebble): 2026-11-28 14:02-14:49 UTC, commit 563ba7c, load 4.9 at start; `command`"""
    start, end = batch["date"], batch.get("end") or ""
    when = f"{start[:10]} {start[11:13]}:{start[13:15]}"
    if end:
        when += f"-{end[11:13]}:{end[13:15]}" if end[:10] == start[:10] else f" to {end[:10]} {end[11:15]}"
    load = batch.get("load_at_start")
    at_start = f", load average {load[0]:.1f} at start" if load else ""
    projects = ", ".join(batch.get("projects", []))
    head = f"{batch['letter']} ({projects}): {when} UTC, commit {batch['commit']}{at_start}"
    return f"{head}; `{batch['command']}`"
