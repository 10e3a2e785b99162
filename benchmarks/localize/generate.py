"""Generate a set's single-line mutants once and freeze them (``dev.json``, ``heldout.json``,
``fresh.json``).

Usage: python benchmarks/localize/generate.py dev|heldout|fresh [--per-subject 16] [--seed 45]
       [--subjects A,B]

Mutations as the issue names them: comparisons flipped (``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <->
``!=``, ``is`` <-> ``is not``, ``in`` <-> ``not in``), ``and``/``or`` swapped, integer constants changed by
one, ``True``/``False`` swapped, ``return x`` -> ``return None``; only on lines the suite runs. Candidates
are shuffled with the seed and tried in that order; a mutant is kept when it makes 1-20 of the tests
that run its line fail (pytest-cov's per-test contexts say which) and the same tests fail again on a
second run of those tests alone, within the time limit. What is
written is the mutation (file, line, columns, old, new) and the tests it fails: never anything a
localizer said about it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import subprocess
import sys
import tokenize
from pathlib import Path

from subjects import OPTIONS, SETS, Subject, cache_dir, environment, source

HERE = Path(__file__).resolve().parent
SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "and": "or", "or": "and"}
TIMEOUT = 120


def pytest(
    folder: Path, env: dict[str, str], *args: str, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:mcpdebug", *OPTIONS, "-q", "-rfE", "--tb=no", *args]
    env = {**env, "COLUMNS": "1000"}  # -rfE's reasons whole: at 80 columns "Failed: Timeout" was cut off
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def failed(result: subprocess.CompletedProcess[str]) -> list[str]:
    found = re.findall(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.MULTILINE)
    return sorted({f.split(" - ")[0] for f in found})


def covering_tests(subject: Subject, folder: Path, env: dict[str, str]) -> dict[str, dict[int, set[str]]]:
    """For each mutated file: line -> the tests that run it (pytest-cov's per-test contexts)."""
    from coverage import CoverageData

    data_file = folder / ".coverage-generate"
    targets = sorted({str(Path(f).parent) for f in subject.files})
    covs = [f"--cov={t}" for t in targets]
    env = {**env, "COVERAGE_FILE": str(data_file)}
    pytest(folder, env, "-p", "pytest_cov", *covs, "--cov-report=", "--cov-context=test", *subject.tests)
    data = CoverageData(basename=str(data_file))
    data.read()
    found: dict[str, dict[int, set[str]]] = {}
    for rel in subject.files:
        by_line = data.contexts_by_lineno(str((folder / rel).resolve()))
        found[rel] = {
            line: {c.rsplit("|", 1)[0] for c in contexts if c}
            for line, contexts in by_line.items()
            if any(contexts)
        }
    data_file.unlink(missing_ok=True)
    return found


def candidates(path: Path, covered: set[int]) -> list[tuple[int, int, int, str, str]]:
    """(line, start col, end col, old, new) of each single-token mutation on a covered line."""
    text = path.read_text()
    lines = text.splitlines()
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    found = []
    for i, token in enumerate(tokens):
        (line, start), (end_line, end) = token.start, token.end
        if line != end_line or line not in covered:
            continue
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if token.string in SWAPS and token.type in (tokenize.OP, tokenize.NAME):
            found.append((line, start, end, token.string, SWAPS[token.string]))
        elif token.string == "is" and after != "not":
            found.append((line, start, end, "is", "is not"))
        elif token.string == "in" and token.type == tokenize.NAME and tokens[i - 1].string != "not":
            if not lines[line - 1].lstrip().startswith("for "):
                found.append((line, start, end, "in", "not in"))
        elif token.string in ("True", "False"):
            found.append((line, start, end, token.string, "False" if token.string == "True" else "True"))
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            value = int(token.string)
            found.append((line, start, end, token.string, str(value + 1)))
            if value > 0:
                found.append((line, start, end, token.string, str(value - 1)))
        elif token.type == tokenize.NAME and token.string == "return":
            rest = lines[line - 1][end:].strip()
            if rest and rest != "None" and not rest.endswith(("(", "[", "{", "\\", ",")):
                found.append((line, start, len(lines[line - 1]), "return " + rest, "return None"))
    return found


def apply(path: Path, line: int, start: int, end: int, new: str) -> str:
    """Write the mutant; returns the original text (to put back). Raises SyntaxError for a bad one."""
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][:start] + new + lines[line - 1][end:]
    mutated = "".join(lines)
    compile(mutated, str(path), "exec")
    path.write_text(mutated)
    return original


def generate(subject: Subject, wanted: int, seed: int) -> list[dict[str, object]]:
    cache = cache_dir()
    folder = source(subject, cache)
    env = environment(subject, folder, dict(os.environ))
    baseline = pytest(folder, env, *subject.tests)
    broken = set(failed(baseline))
    covering = covering_tests(subject, folder, env)
    pool = [(rel, *c) for rel in subject.files for c in candidates(folder / rel, set(covering[rel]))]
    random.Random(f"{seed}-{subject.name}").shuffle(pool)
    print(f"{subject.name}: {len(pool)} candidates, {len(broken)} tests failing unmutated", flush=True)
    kept: list[dict[str, object]] = []
    for rel, line, start, end, old, new in pool:
        if len(kept) >= wanted:
            break
        path = folder / rel
        try:
            original = apply(path, line, start, end, new)
        except SyntaxError:
            continue
        try:
            tests = sorted(covering[rel][line] - broken)  # only they can fail (the line is not run at import)
            try:
                first = pytest(folder, env, "-p", "timeout", "--timeout=20", *tests)
            except subprocess.TimeoutExpired:
                continue
            failing = [t for t in failed(first) if t not in broken]
            if not 1 <= len(failing) <= 20 or "Timeout" in first.stdout:
                continue
            try:
                again = pytest(folder, env, "-p", "timeout", "--timeout=20", *failing)
            except subprocess.TimeoutExpired:
                continue
            if failed(again) != failing:
                continue
            text = original.splitlines()[line - 1]
            kept.append(
                {
                    "id": f"{subject.name}-{len(kept) + 1:02d}",
                    "subject": subject.name,
                    "file": rel,
                    "line": line,
                    "start": start,
                    "end": end,
                    "old": old,
                    "new": new,
                    "original": text,
                    "failing": failing,
                }
            )
            print(f"  kept {len(kept)}/{wanted}", flush=True)  # no place, no line: nothing to tune on
        finally:
            path.write_text(original)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", choices=sorted(SETS))
    parser.add_argument("--per-subject", type=int, default=16)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--subjects", default="", help="only these (comma-separated), added to the file")
    options = parser.parse_args()
    out = HERE / f"{options.set}.json"
    frozen = json.loads(out.read_text()) if out.exists() else {"seed": options.seed, "mutants": []}
    only = set(filter(None, options.subjects.split(",")))
    done = {m["subject"] for m in frozen["mutants"]}
    for subject in SETS[options.set]:
        if (only and subject.name not in only) or subject.name in done:
            continue
        wanted = min(options.per_subject, 10) if subject.name == "shop" else options.per_subject
        frozen["mutants"] += generate(subject, wanted, options.seed)
        out.write_text(json.dumps(frozen, indent=1) + "\n")
    print(f"{out}: {len(frozen['mutants'])} mutants")


if __name__ == "__main__":
    main()
