"""Issue 47's HTML report figures: how long the page is, what reads without JavaScript, and what its
script costs on a big run.

Usage: python benchmarks/report_pages.py [--tests 10000] [--failures 100] [--no-big]

1. The 23-test report issue 47 measured: `fixtures/failing` (without its collection error), `fixtures/passing`
   and four files of `fixtures/hangs` (ten hangs), run with `-n 2 --mcp-debug-timeout=1`; the page's
   height in headless Chromium with JavaScript on and off, the test rows each shows, the cards open.
2. A generated run of N tests of which F fail (`seeing.py`'s suite): the report's size and build
   time, the page's load in Chromium (to the end of its script, which indexes every row and card
   for the search), and one search over every test.

Needs the system Chromium and chromedriver (`apt-get install chromium chromium-driver`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MCPDEBUG = str(Path(sys.executable).with_name("mcpdebug"))
HANG_FILES = ("test_loops.py", "test_blocking.py", "test_fixture_hangs.py", "test_quick.py")
LOAD_TIME = "var n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime"
SEARCH_TWICE = """
var q = document.getElementById('q'), times = [];
['c7@example.com', 'test 9876 ran'].forEach(function (words) {
  var t = performance.now();
  q.value = words;
  q.dispatchEvent(new Event('input'));
  times.push(performance.now() - t);
});
return times;
"""
"""The first search builds the index, the next one reads it."""
ENV = {k: v for k, v in os.environ.items() if not k.startswith("MCPDEBUG")}


def browser(javascript: bool) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,1600")
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "chromedriver"))


def measure(path: Path, javascript: bool) -> dict[str, Any]:
    driver = browser(javascript)
    try:
        driver.get(path.as_uri())
        rows = driver.find_elements("css selector", "#tests-table tbody tr")
        cards = driver.find_elements("css selector", "details.item")
        return {
            "height": driver.execute_script("return document.documentElement.scrollHeight"),
            "rows": sum(1 for r in rows if r.is_displayed()),
            "open": sum(1 for c in cards if c.get_attribute("open") is not None),
            "cards": len(cards),
        }
    finally:
        driver.quit()


def small(folder: Path) -> None:
    for name in (ROOT / "fixtures" / "failing").glob("test_*.py"):
        if name.name != "test_collection_error.py":
            shutil.copy(name, folder / name.name)
    shutil.copy(ROOT / "fixtures" / "passing" / "test_passing.py", folder / "test_passing.py")
    for name in HANG_FILES:
        shutil.copy(ROOT / "fixtures" / "hangs" / name, folder / name)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2"]
    command += ["--mcp-debug-timeout=1", "--mcp-debug-hang-grace=1", "--mcp-debug-html=report.html"]
    done = subprocess.run(command, cwd=folder, env=ENV, capture_output=True, text=True, check=False)
    print(f"23-test run: {done.stdout.strip().splitlines()[-1]}")
    report = folder / "report.html"
    for javascript in (True, False):
        m = measure(report, javascript)
        print(
            f"  JavaScript {'on ' if javascript else 'off'}: page {m['height']:,} px, "
            f"{m['rows']} test rows shown, {m['open']} of {m['cards']} cards open"
        )
    print(f"  report {report.stat().st_size / 1e3:.0f} KB")


def big(folder: Path, tests: int, failures: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from seeing import generate

    generate(folder, tests, failures)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mcp-debug"],
        cwd=folder,
        env=ENV,
        capture_output=True,
        check=False,
    )
    out = folder / "report.html"
    spent = []
    for _ in range(4):  # the first also takes the spool into the store
        started = time.perf_counter()
        done = subprocess.run(
            [MCPDEBUG, "report", "--html", str(out), "--dir", str(folder / ".mcpdebug")],
            capture_output=True,
            text=True,
            env=ENV,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        spent.append(time.perf_counter() - started)
    print(
        f"{tests}-test run, {failures} failing: report {out.stat().st_size / 1e6:.2f} MB, "
        f"mcpdebug report --html {min(spent[1:]):.2f} s (best of 3, store up to date)"
    )
    driver = browser(True)
    try:
        loads, searches = [], []
        for _ in range(3):
            driver.get(out.as_uri())
            loads.append(driver.execute_script(LOAD_TIME))
            searches.append(driver.execute_script(SEARCH_TWICE))
        shown = driver.find_element("id", "tests-count").text
        height = driver.execute_script("return document.documentElement.scrollHeight")
    finally:
        driver.quit()
    print(
        f"  Chromium: load event {min(loads):.0f} ms after the start (best of 3); a search over every "
        f"test {min(s[0] for s in searches):.0f} ms the first time (the index is built), "
        f"{min(s[1] for s in searches):.0f} ms the next ('test 9876 ran': {shown}); page {height:,} px"
    )
    m = measure(out, False)
    print(f"  JavaScript off: {m['rows']:,} test rows shown, {m['open']} of {m['cards']} cards open")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--failures", type=int, default=100)
    parser.add_argument("--no-big", action="store_true", help="only the 23-test report")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        small(Path(name))
    if not args.no_big:
        with tempfile.TemporaryDirectory() as name:
            big(Path(name), args.tests, args.failures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
