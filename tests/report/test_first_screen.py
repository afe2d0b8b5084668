"""The report leads with the result: in a real browser (Chromium, ``tests/browser.py``) its first 1280 × 900 screen
shows what was run in one line, the scorecard's line per paper table the runs touch and a τ of Jain & Wallace's
Table 2; the runs with their failures, how a number is judged and the coverage of the paper tables no run touches
come after the results, the coverage closed. The terminal gets the scorecard's lines the page shows."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest

from attn_study.report.cli import main as report_main
from tests.browser import browser_page
from tests.report.paper_runs import paper_sweep

WIDTH, HEIGHT = 1280, 900

#: the text of every element of a kind wholly inside the first screen
ON_FIRST_SCREEN = """(selector) => Array.from(document.querySelectorAll(selector))
    .filter(e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight && r.height > 0; })
    .map(e => e.innerText)"""
#: the top of each section's heading, by its text
HEADINGS = "() => Array.from(document.querySelectorAll('h2')).map(h => [h.innerText, h.getBoundingClientRect().top])"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """``paper_sweep``'s report, as ``attn-study-report`` writes it, with what it printed."""
    root = paper_sweep(tmp_path_factory.mktemp("first") / "sweep")
    with pytest.MonkeyPatch.context() as patch:
        printed = []
        patch.setattr("builtins.print", lambda *args, **kwargs: printed.append(" ".join(map(str, args))))
        report_main([str(root)])
    return root, root / "report", "\n".join(printed)


def tau_g_bilstm_negative(root) -> float:
    """Ours in J&W Table 2's first cell (SST, predicted negative, τ_g of the BiLSTM): the mean over the three seeds
    of each run's recorded mean, read from the runs' summaries."""
    values = [json.loads((root / f"jw-lstm-{seed}" / "summary.json").read_text()) for seed in (13, 14, 15)]
    return float(np.mean([v["jw/tau_grad/class_0/mean"] for v in values]))


def test_the_first_screen_shows_what_was_run_the_scorecard_and_a_tau(report):
    root, out, _ = report
    with browser_page(width=WIDTH, height=HEIGHT) as page:
        page.goto((out / "index.html").as_uri())
        lead = page.evaluate(ON_FIRST_SCREEN, "p.lead")
        # paper_runs: J&W 2 encoders × 3 seeds, Meister 2 × 5 × 3 + 2, S&S 1 (imdb_rating), Mohankumar 1 = 40 used;
        # seed 13's older BiLSTM run is replaced, and one job failed
        assert lead == [
            "40 runs in the tables: imdb_rating (1), sst (39); 3 seeds (13, 14, 15). Left out: 1 failed, 1 replaced "
            "by a later run of their config; each under Runs, with why."
        ]
        lines = page.evaluate(ON_FIRST_SCREEN, "ul.summary li")
        assert any(line.startswith("Jain & Wallace (2019), Table 2: ") for line in lines)
        cells = page.evaluate(ON_FIRST_SCREEN, "table.paper td")
        shown = f"{tau_g_bilstm_negative(root):.3f} (0.40)"  # ours (the paper's, report/papers/jain_wallace.csv)
        assert any(cell.startswith(shown) for cell in cells), (shown, cells)
        headings = dict(page.evaluate(HEADINGS))
        assert min(headings, key=headings.get) == "Paper vs this project"  # never "3 failed" first
        results = [top for heading, top in headings.items() if heading.startswith("Jain & Wallace:")]
        assert results and headings["Runs"] > max(results) and headings["Runs"] > HEIGHT
        assert list(headings)[-2:] == ["How a published number is judged", "Coverage of the papers' tables"]
        # the tables no run touches: named only inside the closed coverage, after every result
        untouched = page.locator("p.note", has_text="No run here gives a number of:")
        assert untouched.count() == 1 and not untouched.is_visible()
        assert page.evaluate("document.querySelector('details.section').open") is False
        page.locator("details.section > summary").click()
        assert untouched.is_visible() and page.locator("details.section table").first.is_visible()
        assert page.console_errors == []


def test_the_terminal_prints_the_scorecards_lines_after_the_paths(report):
    """The lines under "scorecard" are the page's, one per touched table and one counting the others; a touched
    table's reproduced numbers are those scorecard.csv lists as reproduced."""
    root, out, printed = report
    lines = printed.splitlines()
    assert lines[0] == f"report: {out / 'index.html'}" and lines[1].startswith("tables: ")
    assert lines[2] == "scorecard (ours against the papers' numbers):"
    shown = [line.removeprefix("  ") for line in lines[3:] if line.startswith("  ")]
    page = (out / "index.html").read_text()
    summary = re.search(r"<ul class='summary'>(.*?)</ul>", page).group(1)
    # the page's items are the same lines, each touched table's name a link to its table
    assert shown == [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in re.findall(r"<li>(.*?)</li>", summary)]
    assert len(re.findall(r"<li><a href='#t-", summary)) == len(shown) - 1
    card = pd.read_csv(out / "scorecard.csv")
    table2 = card[(card["paper"] == "jain_wallace") & (card["source"] == "Table 2")]
    reproduced = int((table2["outcome"] == "reproduced").sum())
    line = next(line for line in shown if line.startswith("Jain & Wallace (2019), Table 2: "))
    assert f": {reproduced} reproduced, " in line and reproduced > 0
    touched = card.groupby(["paper", "source"]).ngroups
    assert len(shown) == touched + 1 and shown[-1].endswith("other paper tables: no run here gives a number of them")
