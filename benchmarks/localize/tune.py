"""The dev set scored again from its recordings, without any localizer verdict: the recorded run's
place of each mutated line and whether the first `get_failure` reply names it. For tuning the ranking
(the dev set only: a held-out set is never scored mutant by mutant).

Usage: python benchmarks/localize/tune.py [--scratch DIR] [--rows]

Reads the stores `evaluate.py dev` recorded (``<scratch>/dev/<id>``); runs nothing. A store scored
before holds the localizer's verdicts: they are left out here (the recorded run's figures), so the
`get_failure` reply is the one an agent first sees.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

from evaluate import FAILING, HERE, first_failure, names_line, static_place
from subjects import SETS, cache_dir, source

from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import Store
from mcpdebug.views import lookup
from mcpdebug.views import suspects as suspects_view
from pytest_mcpdebug.coverage.data import find_files, load
from pytest_mcpdebug.diagnosis import localization
from pytest_mcpdebug.diagnosis.localization import Line


def print_show(
    store: Store, run: dict[str, Any], text: str, mutant: dict[str, Any], place: int | None, target: Line
) -> None:
    """A mutant's failure, its top suspects with why, and the suspects block of the reply."""
    print(
        f"== {mutant['id']} {mutant['file']}:{mutant['line']} {mutant['original'].strip()!r}: "
        f"{mutant['old']!r} -> {mutant['new']!r}, place {place}"
    )
    print(text[text.find("Raised at") : text.find("Frames, innermost")].strip())
    outcomes = {t["nodeid"]: t["status"] for t in store.tests(run["run_id"])}
    failing = {t for t, o in outcomes.items() if o in FAILING}
    passing = {t for t, o in outcomes.items() if o == "passed"}
    paths, _ = find_files(store.dir, run["run_id"], store.coverage_files(run["run_id"]))
    ranked = localization.rank_lines(load(paths).lines, failing, passing, suspects_view.evidence(store, run))
    for s in ranked[:14]:
        mark = "**" if s.key == target else "  "
        print(
            f"{mark}{s.first}-{s.last} {s.score:.3f} {Path(s.key[0]).name}:{s.key[1]} {s.kind}: {s.why[:160]}"
        )
    print(text[text.find("Suspects (") :])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--rows", action="store_true", help="one line per mutant")
    parser.add_argument("--show", default="", help="these mutants' top suspects and get_failure reply")
    options = parser.parse_args()
    cache = cache_dir()
    scratch = options.scratch or cache / "localize" / "runs"
    Store.localization = lambda self, run_id: None  # type: ignore[method-assign,assignment]
    folders = {s.name: cache / "localize" / "src" / s.name for s in SETS["dev"]}
    for subject in SETS["dev"]:
        if not folders[subject.name].is_dir():
            source(subject, cache)
    places: list[int | None] = []
    named = 0
    sizes: list[int] = []
    show = set(filter(None, options.show.split(",")))
    for mutant in json.loads((HERE / "dev.json").read_text())["mutants"]:
        if show and mutant["id"] not in show:
            continue
        into = scratch / "dev" / mutant["id"] / "store"
        if (into / ".mcpdebug").is_dir():
            into = into / ".mcpdebug"
        folder = folders[mutant["subject"]]
        path = folder / mutant["file"]
        original = path.read_text()  # the ranking reads the mutant's source (statement kinds, calls)
        lines = original.splitlines(keepends=True)
        line = lines[mutant["line"] - 1]
        lines[mutant["line"] - 1] = line[: mutant["start"]] + mutant["new"] + line[mutant["end"] :]
        path.write_text("".join(lines))
        try:
            store = Store(into)
            ingest_spool(store)
            run = lookup.run(store, "latest")
            target = (str(path.resolve()), mutant["line"])
            place = static_place(store, run, target)
            text = asyncio.run(first_failure(store, run["run_id"]))
            if show:
                print_show(store, run, text, mutant, place, target)
            store.close()
        finally:
            path.write_text(original)
        hit = names_line(text, (mutant["file"], target[0]), mutant["line"])
        start = text.find("Suspects (")
        sizes.append(len(text) - start if start >= 0 else 0)
        places.append(place)
        named += hit
        if options.rows:
            print(
                f"{mutant['id']:14} {mutant['old']!r:>14} -> {mutant['new']!r:<14} place {place} named {hit}"
            )
    total = len(places)

    def top(n: int) -> str:
        return f"{100 * sum(1 for p in places if p is not None and p <= n) / total:.0f}%"

    print(
        f"dev {total}: recorded top-1 {top(1)} top-3 {top(3)} top-5 {top(5)} top-10 {top(10)}; "
        f"get_failure names {named}/{total} ({100 * named / total:.0f}%); "
        f"suspects block {statistics.median(sizes):.0f} chars median, {max(sizes)} max"
    )


if __name__ == "__main__":
    main()
