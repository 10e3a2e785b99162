"""Helpers for the HTML report's tests: the system Chromium (with JavaScript on or off) and a reading
of the report's HTML without a browser (what a page with its scripts removed still says).

Chromium and its driver come from the system packages (`apt-get install chromium chromium-driver`;
`.ci/run` installs them); selenium drives them. Screenshots go to $MCPDEBUG_SCREENSHOTS, or to the
test's temporary folder, for a person to look at.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
BROWSER_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1280,1600",
)
SCREENSHOTS = os.environ.get("MCPDEBUG_SCREENSHOTS")  # read before the tests' clean environment
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs the system Chromium and its driver: apt-get install -y chromium chromium-driver",
)


def start_browser(javascript: bool = True) -> Any:
    """Headless Chromium; with ``javascript=False`` no script of any page runs (the content setting
    a user or an administrator turns off)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(options=options, service=Service(str(DRIVER)))


def screenshots(tmp_path: Path) -> Path:
    folder = Path(SCREENSHOTS or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_report(browser: Any, path: Path, fragment: str = "") -> list[dict[str, Any]]:
    """Load a report from disk; returns what the page wrote to the console."""
    browser.get_log("browser")  # what earlier pages wrote
    browser.get(path.as_uri() + fragment)
    return list(browser.get_log("browser"))


def visible_text(browser: Any, css: str) -> list[str]:
    return [e.text for e in browser.find_elements("css selector", css) if e.is_displayed()]


def page_height(browser: Any) -> int:
    return int(browser.execute_script("return document.documentElement.scrollHeight") or 0)


def without_scripts(text: str) -> str:
    """The report with every `<script>` element removed (what a reader without JavaScript gets)."""
    return re.sub(r"<script\b[^>]*>.*?</script>", "", text, flags=re.DOTALL | re.IGNORECASE)


def table_rows(text: str) -> list[dict[str, str]]:
    """The test table's rows as written in the HTML: each row's id, its link (if any) and its text."""
    body = text.split('<table id="tests-table">', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = []
    for chunk in re.split(r"<tr\b", body)[1:]:
        ident = re.match(r'\s+id="([^"]+)"', chunk)
        link = re.search(r'<a class="t" href="#([^"]+)"', chunk)
        words = html.unescape(re.sub(r"<[^>]+>", " ", "<tr" + chunk))
        rows.append(
            {
                "id": ident.group(1) if ident else "",
                "link": link.group(1) if link else "",
                "text": " ".join(words.split()),
            }
        )
    return rows


class _ElementText(HTMLParser):
    """The text of the element with one id, up to its end tag (elements of the same name counted)."""

    def __init__(self, ident: str) -> None:
        super().__init__(convert_charrefs=True)
        self.ident = ident
        self.tag = ""
        self.depth = 0
        self.parts: list[str] = []
        self.found = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth:
            self.depth += tag == self.tag
        elif not self.found and dict(attrs).get("id") == self.ident:
            self.tag, self.depth, self.found = tag, 1, True

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag == self.tag:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.parts.append(data)


def element_text(text: str, ident: str) -> str | None:
    """The text of the element ``id=ident`` in an HTML page, or None if no element has that id."""
    parser = _ElementText(ident)
    parser.feed(text)
    parser.close()
    return " ".join(" ".join(parser.parts).split()) if parser.found else None
