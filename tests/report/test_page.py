"""The report as a reader sees it: ``index.html`` of a realistic set of runs (``paper_runs.py``) in a real headless
Chromium 1280 px wide (``tests/browser.py``). No table may run past the page, no TeX may show through (``τ_{loo}``,
``^{``, ``\\command``, ``$``), closed or with every detail opened, and the page logs no error."""

from __future__ import annotations

import re

import pytest

from attn_study.report.cli import build_report
from tests.browser import browser_page
from tests.report.paper_runs import paper_sweep

WIDTH = 1280
#: what TeX looks like when it shows through: a sub/superscript group, a backslash command, a dollar
TEX = re.compile(r"_\{|\^\{|\\[A-Za-z]+|\$")

#: every table's right edge and the page's own width, in CSS pixels
MEASURE = """() => ({
    page: document.documentElement.scrollWidth,
    view: document.documentElement.clientWidth,
    tables: Array.from(document.querySelectorAll('table')).map((t, i) => ({
        i: i,
        right: t.getBoundingClientRect().right,
        scroll: t.scrollWidth,
        first: (t.querySelector('th, td') || {innerText: ''}).innerText.slice(0, 40),
    })),
})"""


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    root = paper_sweep(tmp_path_factory.mktemp("page") / "sweep")
    return build_report(root) / "index.html"


def overflowing(page) -> list[dict]:
    found = page.evaluate(MEASURE)
    assert WIDTH - 20 <= found["view"] <= WIDTH  # the viewport as laid out (less a scrollbar, if any)
    wide = [t for t in found["tables"] if t["right"] > found["view"] + 0.5 or t["scroll"] > found["view"]]
    if found["page"] > found["view"]:
        wide.append({"page": found["page"], "view": found["view"]})
    return wide


def tex_shown(page) -> list[str]:
    text = page.evaluate("document.body.innerText")
    return sorted({text[max(0, m.start() - 30) : m.end() + 30] for m in TEX.finditer(text)})


def test_the_report_fits_1280_pixels_and_shows_no_tex(page_path):
    with browser_page(width=WIDTH) as page:
        page.goto(page_path.as_uri())
        assert page.evaluate("document.querySelectorAll('table.paper').length") >= 5  # the papers' own shapes
        assert overflowing(page) == []
        assert tex_shown(page) == []
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert page.evaluate("document.querySelectorAll('details[open]').length") > 30
        assert overflowing(page) == []  # the details, opened, widen no table past the page
        assert tex_shown(page) == []
        assert page.console_errors == []


def test_the_scorecard_cells_read_ours_then_the_papers(page_path):
    """A cell of Jain & Wallace's Table 2 as a reader sees it, its row named by the class, and its details."""
    with browser_page(width=WIDTH) as page:
        page.goto(page_path.as_uri())
        table = page.locator("h3:has-text('Jain & Wallace (2019), Table 2') + p + table.paper")
        rows = table.locator("tbody th").all_inner_texts()
        assert rows == ["SST / negative", "SST / positive"]  # the class names, not "SST / 0"
        headers = table.locator("thead").inner_text()
        assert "τloo" in headers.replace("\n", " ").replace(" ", "") and "_{" not in headers
        first = table.locator("tbody tr").first.locator("td").first
        shown = " ".join(first.inner_text().split())
        assert re.fullmatch(r"0\.\d{3} \(0\.40\) ±0\.\d{2} std 0\.\d{3} \(0\.21\) ±0\.\d{2}", shown), shown
        first.locator("summary").first.click()
        details = first.locator("details").first.inner_text()
        assert "over 3 seeds" in details and "band: ±" in details and "code: " in details
        assert page.console_errors == []
