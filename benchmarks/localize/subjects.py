"""The packages of the localization benchmark, each pinned by version and sdist hash, and the sets.

- ``dev``: the packages the ranking may be tuned on (the project's fixture and the three packages of
  `benchmarks/mutants.py`).
- ``heldout``: four other packages, never looked at mutant by mutant while tuning: their mutants are
  generated once (`generate.py`), frozen in ``heldout.json``, and only the set's totals are printed.
  Its totals were seen before the second round of tuning: no longer a held-out measurement.
- ``fresh``: the held-out set of the second round (`FRESH`), the same rules.

Sources are fetched as sdists with pip into a cache outside the repository (``$MCPDEBUG_CORPUS_CACHE``
or ``~/.cache/mcpdebug-corpus``, the corpus benchmark's cache: ``sdists/`` shared, this benchmark's
unpacked copies under ``localize/``), refused when the hash differs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Subject:
    name: str
    version: str
    sha256: str
    files: tuple[str, ...]
    """The modules mutated (relative to the unpacked sdist)."""
    tests: tuple[str, ...]
    """What pytest runs (paths in the unpacked sdist), with `OPTIONS`."""
    pythonpath: str = ""
    """Added to PYTHONPATH (a ``src`` layout)."""
    fix: tuple[str, str, str] | None = None
    """(file, text, replacement) applied before mutating: the fixture's own bug."""
    package: str = ""
    """The sdist's name, when it is not ``name`` (other modules of a package another set uses)."""

    @property
    def distribution(self) -> str:
        return self.package or self.name


OPTIONS = ("-o", "addopts=", "-p", "no:asyncio", "-p", "no:randomly", "-p", "no:cacheprovider")

DEV = (
    Subject(
        "shop",
        "",
        "",
        ("shop/pricing.py", "shop/cart.py"),
        ("tests",),
        fix=("shop/pricing.py", "return subtotal - 10  #", "return 10  #"),
    ),
    Subject(
        "inflection",
        "0.5.1",
        "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
        ("inflection/__init__.py",),
        ("test_inflection.py",),
    ),
    Subject(
        "toolz",
        "1.2.0",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        ("toolz/itertoolz.py", "toolz/functoolz.py", "toolz/dicttoolz.py", "toolz/recipes.py"),
        ("toolz/tests",),
    ),
    Subject(
        "boltons",
        "26.2.0",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        tuple(f"boltons/{m}.py" for m in ("strutils", "iterutils", "listutils", "mathutils", "setutils")),
        tuple(f"tests/test_{m}.py" for m in ("strutils", "iterutils", "listutils", "mathutils", "setutils")),
    ),
)

HELDOUT = (
    Subject(
        "cachetools",
        "8.0.0",
        "5ed01bd676800d51f0025605e4fd8ad0891550513e7b0a4c3da478463764e5c3",
        tuple(
            f"src/cachetools/{m}.py"
            for m in ("__init__", "_cached", "_cachedmethod", "_decorator", "_descriptor", "func", "keys")
        ),
        ("tests",),
        pythonpath="src",
    ),
    Subject(
        "semver",
        "3.0.4",
        "afc7d8c584a5ed0a11033af086e8af226a9c0b206f313e0301f8dd7b6b589602",
        tuple(f"src/semver/{m}.py" for m in ("version", "_deprecated", "_types", "cli")),
        ("tests",),
        pythonpath="src",
    ),
    Subject(
        "parse",
        "1.20.2",
        "b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce",
        ("parse.py",),
        ("tests",),
    ),
    Subject(
        "isodate",
        "0.7.2",
        "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        tuple(
            f"src/isodate/{m}.py"
            for m in ("isodates", "isotime", "isodatetime", "isoduration", "isotzinfo", "duration", "isostrf")
        ),
        ("tests",),
        pythonpath="src",
    ),
)

FRESH = (
    Subject(
        "tabulate",
        "0.9.0",
        "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
        ("tabulate/__init__.py",),
        tuple(
            f"test/test_{m}.py" for m in ("api", "input", "internal", "output", "regression", "textwrapper")
        ),
    ),
    Subject(
        "more_itertools",
        "11.2.1",
        "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
        ("more_itertools/recipes.py",),
        (
            "tests/test_recipes.py",
            *(
                f"--deselect=tests/test_recipes.py::{t}"  # 68 s, 6 s, 3 s, 2 s of the suite's 85 s under load
                for t in (
                    "PrimeFunctionTests::test_primes",
                    "PrimeFunctionTests::test_nth_prime_approximate",
                    "RunningMedianTests::test_vs_statistics_median",
                    "PolynomialFromRootsTests::test_large",
                )
            ),
        ),
    ),
    Subject(
        "pyrsistent",
        "0.20.0",
        "4c48f78f62ab596c679086084d0dd13254ae4f3d6c72a83ffdf5ebdef8f265a4",
        tuple(
            f"pyrsistent/{m}.py"
            for m in (
                "_pmap",
                "_pvector",
                "_pset",
                "_pbag",
                "_plist",
                "_pdeque",
                "_precord",
                "_pclass",
                "_checked_types",
                "_field_common",
                "_transformations",
                "_helpers",
                "_immutable",
                "_toolz",
            )
        ),
        tuple(
            f"tests/{m}_test.py"
            for m in (
                "bag",
                "checked_map",
                "checked_set",
                "checked_vector",
                "class",
                "deque",
                "field",
                "freeze",
                "immutable_object",
                "list",
                "map",
                "record",
                "regression",
                "set",
                "toolz",
                "transform",
                "vector",
            )
        ),
    ),
    Subject(
        "boltons-other",
        "26.2.0",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        tuple(
            f"boltons/{m}.py"
            for m in (
                "dictutils",
                "cacheutils",
                "urlutils",
                "queueutils",
                "formatutils",
                "funcutils",
                "tbutils",
            )
        ),
        tuple(
            f"tests/test_{m}.py"
            for m in (
                "dictutils",
                "cacheutils",
                "urlutils",
                "queueutils",
                "formatutils",
                "funcutils",
                "tbutils",
            )
        ),
        package="boltons",
    ),
)
"""Frozen after the ranking's second round of tuning (on ``dev`` only), before anything was scored on
it: three packages no other set uses (tabulate without its command-line tests, which start processes;
pyrsistent without its hypothesis test: random inputs change which tests fail from one run to the
next; more-itertools' recipes, fewer mutants, without its four slowest tests: 79 of its 85 s under
load, which made pytest-cov's run time out) and boltons' modules the dev set does not mutate."""

SETS = {"dev": DEV, "heldout": HELDOUT, "fresh": FRESH}


def cache_dir() -> Path:
    root = os.environ.get("MCPDEBUG_CORPUS_CACHE") or "~/.cache/mcpdebug-corpus"
    path = Path(root).expanduser().resolve()
    if path == REPO or REPO in path.parents:
        raise SystemExit(f"the cache {path} is inside the repository; choose a folder outside it")
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sdist(subject: Subject, cache: Path) -> Path:
    """The subject's sdist, downloaded once with pip and checked against its pinned hash."""
    folder = cache / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    name = subject.distribution
    stems = {f"{name}-{subject.version}", f"{name.replace('-', '_')}-{subject.version}"}
    found = [p for p in folder.iterdir() if any(p.name.startswith(s + ".tar") for s in stems)]
    if not found:
        spec = f"{name}=={subject.version}"
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*command, spec, "-d", str(folder)], check=True, capture_output=True)
        found = [p for p in folder.iterdir() if any(p.name.startswith(s + ".tar") for s in stems)]
    digest = _sha256(found[0])
    if digest != subject.sha256:
        raise SystemExit(f"{found[0]}: sha256 {digest} is not the pinned {subject.sha256}; refused")
    return found[0]


def source(subject: Subject, cache: Path) -> Path:
    """A fresh copy of the subject's source (its bug fixed, for the fixture), under ``localize/src``."""
    target = cache / "localize" / "src" / subject.name
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not subject.sha256:
        shutil.copytree(REPO / "fixtures" / "suspects", target, ignore=shutil.ignore_patterns(".mcpdebug"))
    else:
        unpacked = cache / "localize" / "unpacked" / subject.name  # two subjects of one sdist at once
        unpacked.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist(subject, cache)) as archive:
            top = archive.getnames()[0].split("/")[0]
            shutil.rmtree(unpacked / top, ignore_errors=True)
            archive.extractall(unpacked, filter="data")
        shutil.copytree(unpacked / top, target)
    if subject.fix:
        path = target / subject.fix[0]
        path.write_text(path.read_text().replace(subject.fix[1], subject.fix[2]))
    return target


def environment(subject: Subject, folder: Path, base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(("MCPDEBUG", "PYTEST_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant of the same size within a second: no stale .pyc
    if subject.pythonpath:
        env["PYTHONPATH"] = str(folder / subject.pythonpath)
    return env
