"""Saved corpus results: written after every run, merged from several invocations into one table.

A corpus is run in batches (a few projects at a time, at different commits, as the plugin changes);
one table shows them all. Merging keeps which batch each project's figures come from: its letter,
commit, start and end, the command, the load average at its start.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any


def save(results: dict[str, Any], path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str))
    tmp.replace(path)


def without_outcomes(results: dict[str, Any]) -> dict[str, Any]:
    """The results without each run's per-test outcomes (a few MB): what the table and a reader need."""
    projects = {}
    for name, project in results["projects"].items():
        configs = {
            config: dict(data, runs=[{k: v for k, v in r.items() if k != "outcomes"} for r in data["runs"]])
            for config, data in project["configs"].items()
        }
        projects[name] = dict(project, configs=configs)
    return dict(results, projects=projects)


def merge(saved: list[dict[str, Any]]) -> dict[str, Any]:
    """Several saved results as one: each project from the last file where it was measured (a project
    with no finished configuration, as in an interrupted invocation, does not replace an earlier one),
    tagged with its batch. A file merged before keeps its batches."""
    batches: list[dict[str, Any]] = []
    projects: dict[str, dict[str, Any]] = {}
    for results in saved:
        own = results.get("batches") or [_batch_of(results)]
        first = len(batches)
        for index, batch in enumerate(own):
            batches.append(dict(batch, letter=_letter(first + index)))
        for name, project in results["projects"].items():
            if not any("summary" in data for data in project["configs"].values()):
                continue
            index = project.get("batch_index", 0)
            projects[name] = dict(project, batch_index=first + index, batch=_letter(first + index))
    used = sorted({p["batch_index"] for p in projects.values()})
    renumber = {old: new for new, old in enumerate(used)}
    batches = [dict(batches[old], letter=_letter(new)) for old, new in renumber.items()]
    for project in projects.values():
        project["batch_index"] = renumber[project["batch_index"]]
        project["batch"] = _letter(project["batch_index"])
    for batch in batches:
        names = [n for n, p in projects.items() if p["batch"] == batch["letter"]]
        batch["projects"] = names
        batch["end"] = _end(projects[n] for n in names) or batch.get("end")
    first_results = saved[0]
    return dict(
        first_results,
        batches=batches,
        projects=projects,
        commit=" + ".join(dict.fromkeys(b["commit"] for b in batches)),
        command=" + ".join(b["command"] for b in batches),
    )


def _batch_of(results: dict[str, Any]) -> dict[str, Any]:
    return {
        "date": results["date"],
        "commit": results["commit"],
        "command": results["command"],
        "load_at_start": results.get("load_at_start"),
        "runs": results.get("runs"),
        "jobs": results.get("jobs"),
    }


def _end(projects: Any) -> str | None:
    """When the batch's last run finished (UTC, as the start's stamp is written)."""
    finished = [
        r["finished"]
        for project in projects
        for data in project["configs"].values()
        for r in data["runs"]
        if "finished" in r
    ]
    if not finished:
        return None
    return datetime.datetime.fromtimestamp(max(finished), datetime.timezone.utc).strftime("%Y-%m-%dT%H%MZ")


def _letter(index: int) -> str:
    return chr(ord("A") + index)
