"""A failure seen only in CI: the variables its code reads, as the CI run had them, in its report.

The project reads its settings from ``SHOPKIT_*`` variables far from where the value breaks (the
traceback shows neither the variable nor its value). Recorded "in CI" (``CI=true``, a time zone
other than here), `mcpdebug failure` and get_hang name the variables the failing code reads with the
run's values, and the process-wide ones that differ from here; a local run adds nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hangs import tool_text

from conftest import MCPDEBUG
from helpers import FAST

SETTINGS = """
import os

PREFIX = "SHOPKIT_"


def load(environ=None):
    env = dict(os.environ if environ is None else environ)
    values = {k[len(PREFIX):].lower(): v for k, v in env.items() if k.startswith(PREFIX)}
    values.setdefault("tiers", "gold;silver")
    if os.environ.get("SHOPKIT_LEGACY_RATES"):
        values["legacy"] = True
    return values
"""
PRICING = """
import os
import threading

from shopkit.settings import load


def discount(tier):
    tiers = load()["tiers"].split(";")
    rates = {"gold": 20, "silver": 10} if not os.environ.get("SHOPKIT_LEGACY_RATES") else {}
    return rates[tiers[tiers.index(tier)]]


def wait_for_tiers():
    if "," in load()["tiers"]:
        threading.Event().wait()
"""
TESTS = """
from shopkit.pricing import discount, wait_for_tiers


def test_gold_discount():
    assert discount("gold") == 20


def test_waits_for_tiers():
    wait_for_tiers()
"""


def record(folder: Path, env: dict[str, str], *args: str) -> Path:
    """A run of the project in ``folder`` with ``env`` added, recorded; its store."""
    subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, "-q", "--mcp-debug", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": "src", **env},
        capture_output=True,
        timeout=300,
        check=False,
    )
    return folder / ".mcpdebug"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [n for n in os.environ if n.startswith("SHOPKIT_")] + ["CI", "GITHUB_ACTIONS"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TZ", "UTC")
    (tmp_path / "src" / "shopkit").mkdir(parents=True)
    (tmp_path / "src" / "shopkit" / "__init__.py").write_text("")
    (tmp_path / "src" / "shopkit" / "settings.py").write_text(SETTINGS)
    (tmp_path / "src" / "shopkit" / "pricing.py").write_text(PRICING)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pricing.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def failure_text(folder: Path, *args: str) -> str:
    shown = subprocess.run(
        [MCPDEBUG, "failure", *args, "--dir", str(folder / ".mcpdebug")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_a_ci_failure_names_the_variables_its_code_reads_with_the_ci_values(project: Path) -> None:
    ci = {
        "CI": "true",
        "SHOPKIT_TIERS": "gold,silver",
        "TZ": "Pacific/Auckland",
        "SHOPKIT_API_TOKEN": "tok-123",
        "PYTHONASYNCIODEBUG": "1",  # a CI setting that changes any asyncio program
    }
    record(project, ci, "-k", "gold")
    text = failure_text(project)
    assert "FAILED tests/test_pricing.py::test_gold_discount" in text
    section = text.split("Environment variables the failing code reads", 1)[1].split("\n\n", 1)[0]
    assert (
        "named in src/shopkit/pricing.py" in section
        and "SHOPKIT_*, named after its package shopkit" in section
    )
    assert "  SHOPKIT_LEGACY_RATES (not set)" in section  # read from the environment, unset in CI
    assert "  SHOPKIT_TIERS='gold,silver'" in section  # the value that broke it (read in settings.py)
    assert "  SHOPKIT_API_TOKEN='<redacted>'" in section and "tok-123" not in text  # a secret stays hidden
    assert "differs from here" in text
    assert "  TZ='Pacific/Auckland' (here: 'UTC')" in text
    assert "  PYTHONASYNCIODEBUG='1' (here: not set)" in text, text
    shown = subprocess.run(
        [MCPDEBUG, "show", "--dir", str(project / ".mcpdebug")], capture_output=True, text=True, timeout=120
    )
    assert "CI: a CI job (CI=true; no provider's variables)\n" in shown.stdout, shown.stdout  # not "CI: ci: "


def test_a_local_failure_lists_what_its_code_reads_and_nothing_process_wide(project: Path) -> None:
    record(project, {"SHOPKIT_TIERS": "gold,silver", "TZ": "Pacific/Auckland"}, "-k", "gold")
    text = failure_text(project)
    assert "  SHOPKIT_TIERS='gold,silver'" in text
    assert "differs from here" not in text and "TZ=" not in text


def test_a_failure_whose_code_reads_nothing_of_the_environment_has_no_section(project: Path) -> None:
    (project / "tests" / "test_pricing.py").write_text("def test_plain():\n    assert 1 + 1 == 3\n")
    record(project, {})
    text = failure_text(project)
    assert "FAILED tests/test_pricing.py::test_plain" in text
    assert "Environment variables" not in text


def test_a_hang_in_ci_names_the_variables_of_its_package(project: Path) -> None:
    """The hung frames are the test's and the package's; get_hang lists the package's SHOPKIT_*
    variables as CI had them."""
    store = record(
        project, {"CI": "true", "SHOPKIT_TIERS": "gold,silver"}, "-k", "waits", "--mcp-debug-timeout=2"
    )
    text = tool_text(store, "get_hang", test="tests/test_pricing.py::test_waits_for_tiers")
    assert "HANG tests/test_pricing.py::test_waits_for_tiers" in text
    assert "Environment variables the failing code reads" in text
    assert "  SHOPKIT_TIERS='gold,silver'" in text
