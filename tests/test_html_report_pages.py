"""The HTML report read as people read it: without JavaScript, by its links, and with its script's
search, sorting and folding, in headless Chromium with JavaScript on and off.

One recorded run serves every test here: the failing fixtures, a hang, three more tests (one
passing with output); seven cards, so the last two start folded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES
from helpers import FAST, Events, recorded
from report_pages import (
    element_text,
    needs_browser,
    open_report,
    page_height,
    screenshots,
    start_browser,
    table_rows,
    visible_text,
    without_scripts,
)

MORE = """
def test_prints_a_receipt():
    print("receipt number 7731: paid")


def test_refund_rounding():
    refund = 10 / 3
    assert round(refund, 2) == 3.34


def test_currency_code():
    code = "EURO"
    assert len(code) == 3, f"not an ISO code: {code}"
"""
FAILING = ("test_assertion.py", "test_fixture_error.py", "test_mixed.py", "test_teardown_error.py")
ORDER_TOTAL = "test_assertion.py::test_order_total"
BUSY = "test_loops.py::test_busy_loop"
CURRENCY = "test_more.py::test_currency_code"
HANG_AT_ONE_SECOND = ("--mcp-debug-timeout=1", "--mcp-debug-hang-grace=1")
PROBLEMS_FIRST = [
    "failed",
    "error",
    "failed",
    "error",
    "failed",
    "failed",
    "failed",
    "passed",
    "skipped",
    "xfailed",
    "passed",
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    for name in FAILING:
        shutil.copy(FIXTURES / "failing" / name, folder / name)
    shutil.copy(FIXTURES / "hangs" / "test_loops.py", folder / "test_loops.py")
    (folder / "test_more.py").write_text(MORE)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCPDEBUG")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *FAST,
            *FAILING,
            "test_more.py",
            BUSY,
            *HANG_AT_ONE_SECOND,
            "--mcp-debug-html=report.html",
        ],
        cwd=folder,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "mcpdebug: HTML report: report.html" in done.stdout, done.stdout
    return folder / "report.html"


@pytest.fixture(scope="module")
def nodeids(report: Path) -> list[str]:
    store = recorded(report.parent / ".mcpdebug")
    tests = [t["nodeid"] for t in store.tests(store.runs()[0]["run_id"])]
    store.close()
    assert len(tests) == 11
    return tests


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_browser()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def browser_without_js() -> Iterator[Any]:
    driver = start_browser(javascript=False)
    yield driver
    driver.quit()


def test_without_its_scripts_the_report_names_every_test_and_links_the_failure(
    report: Path, nodeids: list[str]
) -> None:
    """Issue 47's acceptance, read from the file itself: no browser, no script."""
    text = without_scripts(report.read_text())
    assert "<script" not in text and "<noscript>" in text
    rows = table_rows(text)
    assert len(rows) == len(nodeids)
    for nodeid in nodeids:
        assert sum(r["text"].count(nodeid) for r in rows) == 1, nodeid  # named once in the table
    statuses = [r["text"].split()[0] for r in rows]
    assert statuses == PROBLEMS_FIRST  # in the order they ran
    row = next(r for r in rows if ORDER_TOTAL in r["text"])
    card = element_text(text, row["link"])
    assert card is not None, row
    assert "assert {'total': 4, 'items': [1, 2]} == {'total': 3, 'items': [1, 2]}" in card  # its failure
    assert "customer str 'ada@example.com'" in card and "order_id int 1042" in card  # its locals
    assert f'href="#{row["id"]}"' in text  # the card links back to its row
    assert f'href="#{row["link"]}"><code class="st-failed">{ORDER_TOTAL}</code>' in text  # from the slowest
    # Every link inside the page lands somewhere, and the page fetches nothing.
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    targets = set(re.findall(r'href="#([^"]+)"', text))
    assert targets and targets <= set(ids), targets - set(ids)
    assert not re.search(r'(?:src|href)="(?!#|data:)', text)
    assert "https://" not in text and "http://" not in text.replace("http://www.w3.org", "")


def test_a_hung_test_has_one_card_with_its_diagnosis_and_a_hangs_tile(report: Path) -> None:
    text = without_scripts(report.read_text())
    assert len(re.findall(r"<summary>(?:HANG|FAILED|ERROR) " + re.escape(BUSY), text)) == 1
    busy = next(r for r in table_rows(text) if BUSY in r["text"])
    card = element_text(text, busy["link"])
    assert card is not None and "busy loop" in card and "Threads (" in card
    assert "The interruption (call): pytest_mcpdebug.hangs.watchdog.HangTimeout" in card
    summary = element_text(text, "summary")
    assert summary is not None and "5 failed 2 passed" in summary and "1 hang " in summary


@needs_browser
def test_the_report_without_javascript_in_chromium(
    report: Path, nodeids: list[str], browser_without_js: Any, tmp_path: Path
) -> None:
    browser = browser_without_js
    console = open_report(browser, report)
    assert [m for m in console if m["level"] in ("SEVERE", "WARNING")] == []
    table = browser.find_element("id", "tests-table").text
    assert all(nodeid in table for nodeid in nodeids)
    assert len(visible_text(browser, "#tests-table tbody tr")) == len(nodeids)
    assert "Sorting and search need JavaScript" in browser.find_element("css selector", "noscript p").text
    assert not browser.find_element("id", "tests-filter").is_displayed()
    assert not browser.find_element("id", "tools").is_displayed()
    # Five cards open, the rest one line each; a link opens a folded card (the busy loop's, from the
    # slowest tests; the currency code's failure, from its row) and shows it.
    cards = browser.find_elements("css selector", "details.item")
    assert [c.get_attribute("open") is not None for c in cards] == [True] * 5 + [False] * 2
    busy_card = cards[-1]
    assert "[test] MainThread" not in busy_card.text  # folded: its summary line only
    browser.find_element("css selector", "table.slow a").click()
    assert busy_card.get_attribute("open") is not None
    assert "[test] MainThread" in busy_card.text and _in_view(browser, busy_card)
    row_link = browser.find_element("xpath", f"//table[@id='tests-table']//a[text()='{CURRENCY}']")
    browser.execute_script("arguments[0].scrollIntoView()", row_link)
    row_link.click()
    currency_card = cards[-2]
    assert currency_card.get_attribute("open") is not None
    assert "not an ISO code: EURO" in currency_card.text and "code str 'EURO'" in currency_card.text
    # From the card back to its row.
    currency_card.find_element("link text", "its row in the tests table").click()
    row = browser.find_element("xpath", f"//a[text()='{CURRENCY}']/ancestor::tr")
    assert browser.current_url.endswith("#" + row.get_attribute("id")) and _in_view(browser, row)
    shot = screenshots(tmp_path) / "report-without-javascript.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


def _in_view(browser: Any, element: Any) -> bool:
    return bool(
        browser.execute_script(
            "var r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight", element
        )
    )


def shown_tests(browser: Any) -> list[str]:
    """The test ids of the table's visible rows, top to bottom."""
    rows = browser.find_elements("css selector", "#tests-table tbody tr")
    return [
        r.find_element("css selector", "td:last-child").text.splitlines()[0] for r in rows if r.is_displayed()
    ]


@needs_browser
def test_search_sort_rows_and_folding_with_javascript(
    report: Path, nodeids: list[str], browser: Any, tmp_path: Path
) -> None:
    console = open_report(browser, report)
    assert [m for m in console if m["level"] in ("SEVERE", "WARNING")] == []
    search = browser.find_element("id", "q")
    assert search.is_displayed() and browser.find_element("id", "tools").is_displayed()
    # Search: test ids, messages, a card's locals and output, a passing test's output; all words.
    for words, expected in [
        ("ada@example.com", [ORDER_TOTAL]),  # a local of the failing frame
        ("database unavailable", ["test_fixture_error.py::test_query_users"]),  # a message
        ("receipt number 7731", ["test_more.py::test_prints_a_receipt"]),  # a passing test's output
        ("step 2: connecting", ["test_mixed.py::test_output_then_fail"]),  # a failing test's output
        ("settle MainThread", [BUSY]),  # the hang's diagnosis
        ("test_mixed skip", ["test_mixed.py::test_skip"]),
        ("no such thing anywhere", []),
    ]:
        search.clear()
        search.send_keys(words)
        assert shown_tests(browser) == expected, words
    search.clear()
    search.send_keys(" ")
    assert sorted(shown_tests(browser)) == sorted(nodeids)
    assert browser.find_element("id", "tests-count").text == f"{len(nodeids)} tests"
    # Sorting: duration (slowest first, then fastest first), the id, the outcome (problems first).
    headers = {th.text: th for th in browser.find_elements("css selector", "#tests-table th button")}
    assert set(headers) == {"outcome", "duration", "worker", "test"}
    headers["duration"].click()
    assert shown_tests(browser)[0] == BUSY
    durations = [
        float(r.text.split(" s")[0])
        for r in browser.find_elements("css selector", "#tests-table td:nth-child(2)")
    ]
    assert durations == sorted(durations, reverse=True)
    headers["duration"].click()
    assert shown_tests(browser)[-1] == BUSY
    headers["test"].click()
    assert shown_tests(browser) == sorted(nodeids)
    headers["outcome"].click()
    outcomes = [r.text.split()[0] for r in browser.find_elements("css selector", "#tests-table tbody tr")]
    assert outcomes[:7] == ["failed"] * 5 + ["error"] * 2 and outcomes[7:] == sorted(
        outcomes[7:], key=["passed", "xfailed", "skipped"].index
    )
    # Folding: collapse all, then a click anywhere on a row opens its test's card.
    browser.find_element("id", "collapse").click()
    cards = browser.find_elements("css selector", "details.item")
    assert all(c.get_attribute("open") is None for c in cards)
    collapsed = page_height(browser)
    row = browser.find_element("xpath", f"//a[text()='{ORDER_TOTAL}']/ancestor::tr")
    row.find_element("css selector", "td:nth-child(2)").click()
    card = cards[0]
    assert browser.current_url.endswith(
        "#" + row.find_element("css selector", "a.t").get_attribute("href").split("#")[1]
    )
    assert card.get_attribute("open") is not None and _in_view(browser, card)
    assert "ada@example.com" in card.text
    browser.find_element("id", "expand").click()
    assert all(c.get_attribute("open") is not None for c in cards)
    assert page_height(browser) > collapsed + 1000  # seven cards unfolded
    # A passing test's row opens its output.
    receipt = browser.find_element(
        "xpath", "//summary[text()='test_more.py::test_prints_a_receipt']/ancestor::tr"
    )
    receipt.find_element("css selector", "td").click()
    assert "receipt number 7731: paid" in receipt.text
    shot = screenshots(tmp_path) / "report-tests-table.png"
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "tests"))
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


def test_past_its_limits_the_report_names_the_rest_and_every_link_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More failures, hangs and tests than the report keeps in full: the rest are named, linked to
    their rows while they have one, and no link points nowhere."""
    from mcpdebug.report import html, html_data
    from mcpdebug.store import Store
    from pytest_mcpdebug import protocol

    ev = Events("20261128-000000-limits")
    events: list[protocol.Event] = [ev.start(), ev.run_started()]
    events.append(  # a hang of the run itself (no test), detected first
        ev(
            protocol.HangDetected,
            nodeid="",
            worker="main",
            when="",
            report=protocol.HangReport(kind="killed", summary="the run was killed"),
        )
    )
    for n in range(6):
        nodeid = f"test_many.py::test_fail_{n}"
        events += ev.test(
            nodeid, "failed", output=[("call", "stdout", f"output of {n}")], message=f"boom {n}"
        )
        snapshot = protocol.Snapshot(
            exception=protocol.SnapshotException(type="AssertionError", message=f"boom {n}"),
            frames=[
                protocol.SnapshotFrame(
                    file="/src/test_many.py",
                    line=n + 1,
                    function=f"test_fail_{n}",
                    locals=[protocol.SnapshotVar(name="n", type="int", value=str(n))],
                )
            ],
        )
        events.append(
            ev(protocol.FailureSnapshot, nodeid=nodeid, worker="main", when="call", snapshot=snapshot)
        )
    hung = "test_many.py::test_fail_5"
    events.append(
        ev(
            protocol.HangDetected,
            nodeid=hung,
            worker="main",
            when="call",
            report=protocol.HangReport(kind="blocked", summary="blocked in time.sleep"),
        )
    )
    for n in range(3):
        events += ev.test(f"test_many.py::test_pass_{n}")
    events += ev.run_finished(1)
    store = Store(tmp_path / ".mcpdebug")
    store.apply(events)
    monkeypatch.setattr(html_data, "FAILURES", 2)
    monkeypatch.setattr(html_data, "HANGS", 1)
    monkeypatch.setattr(html_data, "OPEN_CARDS", 1)
    monkeypatch.setattr(html_data, "TESTS", 5)  # the six failing tests do not all have a row
    text = html.render(html_data.build(store, store.run(ev.run_id)))
    store.close()
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    targets = set(re.findall(r'href="#([^"]+)"', text))
    assert targets <= set(ids), targets - set(ids)
    assert text.count('<details class="item') == 3  # the run's hang, two failures
    assert len(re.findall(r"<details class=\"item[^\"]*\" open>", text)) == 1
    rows = table_rows(without_scripts(text))
    assert len(rows) == 5 and all("test_fail_" in r["text"] for r in rows)
    more = text.split("more failures, named only", 1)[1].split("</ul>", 1)[0]
    assert more.count("<li>") == 4 and more.count("<a href=") == 3  # test_fail_5 has no row: named only
    assert "<code>test_many.py::test_fail_5</code>: blocked in time.sleep" in text  # the hang past HANGS
    assert "HANG (the run)" in text and "the run was killed" in text
