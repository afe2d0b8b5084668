"""A real headless browser for the tests of the report's pages: Debian's Chromium driven by Playwright.

``.ci/run`` installs Chromium (``apt-get install chromium``); Playwright is a test dependency and never
downloads a browser of its own. Without either, the browser tests skip and say why."""

from __future__ import annotations

import contextlib
import shutil

import pytest

#: the flags a headless Chromium needs on a machine without a display or a network (and as root)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The Chromium executable, or a skip naming what is missing."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; .ci/run installs it)")
    return path


@contextlib.contextmanager
def browser_page(width: int = 1280, height: int = 900):
    """A page of a fresh headless Chromium of ``width`` × ``height`` CSS pixels; ``page.console_errors`` collects
    the console's errors and the page's uncaught exceptions."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency (.[test])")
    executable = chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.console_errors = []
            page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
            page.on("pageerror", lambda error: page.console_errors.append(str(error)))
            yield page
        finally:
            browser.close()
