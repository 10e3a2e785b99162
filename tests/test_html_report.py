"""The HTML report: written by `pytest --mcp-debug-html` with no server, opened in real headless Chromium.

Reading it without JavaScript, its links, search, sorting and folding: `test_html_report_pages.py`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, MCPDEBUG
from helpers import run_inner
from report_pages import needs_browser, open_report, screenshots, start_browser, visible_text


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_browser()
    yield driver
    driver.quit()


@needs_browser
def test_failing_suite_report_in_chromium(pytester: pytest.Pytester, browser: Any, tmp_path: Path) -> None:
    for name in ("test_assertion.py", "test_fixture_error.py", "test_mixed.py", "test_teardown_error.py"):
        shutil.copy(FIXTURES / "failing" / name, pytester.path / name)
    result = run_inner(pytester, "--mcp-debug-html=report.html")
    assert result.ret == 1  # as without the report
    result.stdout.fnmatch_lines(["mcpdebug: HTML report: report.html"])
    report = pytester.path / "report.html"
    console = open_report(browser, report)
    assert [m for m in console if m["level"] in ("SEVERE", "WARNING")] == []
    html = report.read_text()
    assert (
        "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    )  # nothing fetched
    summaries = visible_text(browser, "#failures details.item > summary")
    assert any(s.startswith("FAILED test_assertion.py::test_order_total") for s in summaries), summaries
    assert any("ERROR test_fixture_error.py::test_query_users (setup)" in s for s in summaries)
    assert any("RuntimeError: database unavailable" in s for s in summaries)
    body = browser.find_element("css selector", "#failures").text
    assert "assert {'total': 4, 'items': [1, 2]} == {'total': 3, 'items': [1, 2]}" in body
    assert "test_assertion.py:27 in test_order_total" in body  # frames relative to the rootdir
    assert "ada@example.com" in body  # a local of the failing frame
    # The test table is in the page, problems first, and filters as one types.
    rows = browser.find_elements("css selector", "#tests-table tbody tr")
    assert len(rows) == 7
    assert [r.text.split()[0] for r in rows][:4] == ["failed", "error", "failed", "error"]
    browser.find_element("id", "q").send_keys("test_mixed")
    shown = [r for r in browser.find_elements("css selector", "#tests-table tbody tr") if r.is_displayed()]
    assert {r.text.split()[0] for r in shown} == {"passed", "failed", "skipped", "xfailed"}
    assert browser.find_element("id", "tests-count").text == "4 of 7 tests match"
    shot = screenshots(tmp_path) / "report-failures.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


@needs_browser
def test_hanging_suite_report_in_chromium(pytester: pytest.Pytester, browser: Any, tmp_path: Path) -> None:
    for name in ("test_loops.py", "test_blocking.py"):
        shutil.copy(FIXTURES / "hangs" / name, pytester.path / name)
    result = run_inner(
        pytester,
        "test_loops.py::test_busy_loop",
        "test_blocking.py::test_lock_deadlock",
        "--mcp-debug-timeout=1",
        "--mcp-debug-hang-grace=1",
        "--mcp-debug-html=out/hangs.html",
    )
    assert result.ret == 1
    report = pytester.path / "out" / "hangs.html"
    console = open_report(browser, report)
    assert [m for m in console if m["level"] in ("SEVERE", "WARNING")] == []
    summaries = visible_text(browser, "#hangs details.item > summary")
    assert len(summaries) == 2, summaries
    assert any(
        s.startswith("HANG test_loops.py::test_busy_loop (call)") and "busy loop" in s for s in summaries
    )
    assert any("test_lock_deadlock" in s and "blocked" in s for s in summaries)
    hangs = browser.find_element("id", "hangs")
    text = hangs.text
    assert "[test] MainThread" in text and "test_loops.py:8 in settle()" in text
    assert "THREADS (" in text.upper()
    # A hung test is shown once: its card holds the diagnosis, and the interruption (its failure).
    assert browser.find_elements("id", "failures") == []
    cards = browser.find_elements("css selector", "details.item")
    assert len(cards) == 2
    assert all("The interruption (call): " in c.text and "HangTimeout" in c.text for c in cards)
    assert "2\nhangs" in browser.find_element("id", "summary").text
    browser.execute_script("arguments[0].scrollIntoView()", hangs)
    shot = screenshots(tmp_path) / "report-hangs.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


def test_a_report_that_cannot_be_written_is_a_warning(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    (pytester.path / "blocked").write_text("a file where the report's folder would be")
    result = run_inner(pytester, "--mcp-debug-html=blocked/report.html")
    assert result.ret == 0  # the run's outcome is the run's
    result.stdout.fnmatch_lines(["mcpdebug: warning: the HTML report was not written: *"])


def test_the_report_command_and_a_run_without_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_bad():\n    assert 1 == 2\n")
    result = run_inner(pytester, "--mcp-debug")
    assert "HTML report" not in result.stdout.str()
    assert not list(pytester.path.glob("*.html"))
    done = pytester.run(MCPDEBUG, "report", "--html", "r.html", "--dir", str(pytester.path / ".mcpdebug"))
    assert done.ret == 0, done.stderr.str()
    html = (pytester.path / "r.html").read_text()
    assert "FAILED test_one.py::test_bad" in html and "assert 1 == 2" in html
    missing = pytester.run(
        MCPDEBUG, "report", "nope", "--html", "x.html", "--dir", str(pytester.path / ".mcpdebug")
    )
    assert missing.ret == 3 and "nope" in missing.stderr.str()


SHOP = """
def discount(total, percent):
    if percent > 50:
        return total - percent  # the bug: subtracts the percentage itself
    return total - total * percent // 100
"""
SHOP_TESTS = """
from pathlib import Path

from shop import discount

COUNTER = Path(__file__).with_name("runs.count")


def test_small_discount():
    assert discount(200, 10) == 180


def test_big_discount():
    assert discount(200, 60) == 80


def test_sometimes():
    n = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(n))
    assert n != 2, "fails on the second run only"
"""


def test_suspects_and_flaky_history_appear_when_the_run_has_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shop=SHOP, test_shop=SHOP_TESTS)
    run_inner(pytester, "--mcp-debug-coverage", "--mcp-debug-html=first.html")
    run_inner(pytester, "--mcp-debug-coverage", "--mcp-debug-html=second.html")
    first = (pytester.path / "first.html").read_text()
    assert 'id="suspects"' in first and 'id="flaky"' not in first  # one run: no history yet
    assert "<code>shop.py:3</code> discount" in first  # the bug's line ranks first
    second = (pytester.path / "second.html").read_text()
    assert 'id="flaky"' in second and "test_shop.py::test_sometimes" in second
    assert "fails on the second run only" in second
    run_inner(pytester, "--mcp-debug-html=plain.html")
    plain = (pytester.path / "plain.html").read_text()
    assert 'id="suspects"' not in plain  # no coverage recorded in that run
