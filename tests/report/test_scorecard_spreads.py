"""What the scorecard says of its own spread, on hand-made runs whose numbers give a known std: the split's spread
beside the seeds' (runs that differ only in their split seed are one cell), the authors' released runs beside the
verdict, a verdict from 2 seeds marked tentative in the files, the cell and the summary lines, and the band shown
in the cell."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from attn_study.report import paper_tables
from attn_study.report import scorecard as sc
from attn_study.report.coverage import summary_line
from attn_study.report.runs import Run
from tests.report.paper_runs import CODE_A
from tests.report.test_scorecard import SETTING

NEWS = {**SETTING, "dataset": "twenty_news"}
TAU_G = "jw/tau_grad/class_0/mean"  # the paper's 20News BiLSTM τ_g of class 0: 0.08 (r = 0.005)
RECIPE_SPLIT = 13478  # recipe=jain_wallace's split seed for 20News (conf/recipe_dataset/jain_wallace/twenty_news.yaml)


def news_run(i: int, value: float, split: int) -> Run:
    """A complete 20News BiLSTM run of the recipe with ``value`` as its τ_g of class 0, on the split drawn with
    ``split`` (another than the recipe's given on the command line, as a sweep over split seeds gives it)."""
    overrides = [] if split == RECIPE_SPLIT else [f"dataset.source.split_seed={split}"]
    config = {**NEWS, "seed": 13 + i % 2, "overrides": overrides}
    settings = {"dataset/source/split_seed": split}
    return Run(Path(f"/n{i}"), "complete", config=config, summary={TAU_G: value}, settings=settings, code=CODE_A)


def tau_g_cell(frame: pd.DataFrame) -> pd.Series:
    found = frame[(frame["dataset"] == "twenty_news") & (frame["key"] == TAU_G) & frame["setting"].str.contains("lstm")]
    assert len(found) == 1, found
    return found.iloc[0]


#: three splits × two seeds; each split's seeds ±0.01 around its mean, the split means 0.11, 0.21, 0.16
VALUES = {RECIPE_SPLIT: (0.10, 0.12), 1: (0.20, 0.22), 2: (0.15, 0.17)}


def split_runs() -> list[Run]:
    return [news_run(2 * k + i, v, split) for k, (split, pair) in enumerate(VALUES.items()) for i, v in enumerate(pair)]


def test_a_split_seed_on_the_command_line_is_no_departure():
    (run,) = [news_run(0, 0.1, 7)]
    assert sc.departures(run, "jain_wallace", "twenty_news") == []
    run.config["overrides"] = ["dataset.split_seed=7"]  # the name another source may give it
    assert sc.departures(run, "jain_wallace", "twenty_news") == []
    run.config["overrides"] = ["dataset.source.split=default"]  # another split procedure is one
    assert sc.departures(run, "jain_wallace", "twenty_news") == ["dataset.source.split=default"]


def test_runs_on_three_splits_are_one_cell_whose_band_holds_both_spreads():
    """Worked by hand. Mean 0.16. Seed std pooled within splits: the six deviations from their split's mean are
    ±0.01, Σ = 6 × 0.0001 = 0.0006 over 3 × (2 − 1) = 3 degrees of freedom: √0.0002 = 0.014142. Split std: the
    means 0.11, 0.21, 0.16 deviate −0.05, 0.05, 0 from 0.16: √(0.005 / 2) = 0.05. The band's std over all six runs:
    deviations −0.06, −0.04, 0.04, 0.06, −0.01, 0.01, Σ = 0.0106 over 5: √0.00212 = 0.046043. Band 2 × 0.046043 +
    0.005 (the paper's 0.08 rounded) = 0.097087 ≥ |0.16 − 0.08| = 0.08: reproduced — where the seeds' spread
    alone (2 × 0.014142 + 0.005 = 0.033) would not hold it."""
    found = tau_g_cell(sc.judge(split_runs()))
    assert found["n seeds"] == 6 and found["n splits"] == 3 and found["ours"] == pytest.approx(0.16)
    assert found["seed std"] == pytest.approx(math.sqrt(0.0002))
    assert found["split std"] == pytest.approx(0.05)
    assert found["band std"] == pytest.approx(math.sqrt(0.00212))
    assert found["band"] == pytest.approx(2 * math.sqrt(0.00212) + 0.005)
    assert found["spreads"] == "seeds+splits" and found["outcome"] == sc.REPRODUCED
    assert found["verdict"] == "reproduced" and not found["tentative"]


def test_runs_on_one_split_are_judged_by_their_seeds_as_before():
    """The same six values on the recipe's split: one split, so the band's std is the seeds' (the same
    √0.00212), the split std undefined, and the band says "seeds"."""
    runs = [news_run(i, v, RECIPE_SPLIT) for i, v in enumerate(v for pair in VALUES.values() for v in pair)]
    found = tau_g_cell(sc.judge(runs))
    assert found["n splits"] == 1 and found["spreads"] == "seeds" and math.isnan(found["split std"])
    assert found["seed std"] == pytest.approx(math.sqrt(0.00212)) == pytest.approx(found["band std"])


def test_one_run_per_split_has_no_seed_std_within_a_split():
    """Two splits, one seed each (0.10, 0.20): no split holds two seeds, so the pooled seed std is undefined; the
    split std and the band's are the std of 0.10 and 0.20, √0.005 = 0.070711."""
    found = tau_g_cell(sc.judge([news_run(0, 0.10, RECIPE_SPLIT), news_run(1, 0.20, 1)]))
    assert math.isnan(found["seed std"]) and found["n splits"] == 2
    assert found["split std"] == pytest.approx(math.sqrt(0.005)) == pytest.approx(found["band std"])


RELEASED = pd.DataFrame(
    [
        {"value": v, "verified": verified, **dict(zip(sc.CELL, cell))}
        for v, verified in (("0.30", "yes"), ("0.35", "yes"), ("0.41", "no"))
        for cell in [("jain_wallace", "Table 2", "sst", "SST / 0", "Gradient (BiLSTM) τ_g / Mean ± Std.", "mean")]
    ]
)


@pytest.mark.parametrize(
    ("values", "outcome", "expected"),
    [
        ((0.39, 0.40, 0.41), sc.REPRODUCED, "within the authors' released runs 0.300…0.410 (3 runs, 1 not verified)"),
        ((0.41, 0.41), sc.UNEXPLAINED, "within the authors' released runs 0.300…0.410 (3 runs, 1 not verified)"),
        (
            (0.44, 0.45, 0.46),
            sc.UNEXPLAINED,
            "outside the authors' released runs 0.300…0.410 (3 runs, 1 not verified): ours higher",
        ),
        (
            (0.19, 0.20, 0.21),
            sc.UNEXPLAINED,
            "outside the authors' released runs 0.300…0.410 (3 runs, 1 not verified): ours lower",
        ),
    ],
)
def test_the_authors_released_runs_are_said_beside_the_verdict(monkeypatch, values, outcome, expected):
    """Their runs 0.30, 0.35 and 0.41 (one quoted only): whether ours (the seeds' mean) lies within 0.30…0.41, its
    ends included, is said beside the verdict and does not make it. The paper's 0.40 (r = 0.005) against ours:
    0.40 ± (2 × 0.01 + 0.005) holds it; 0.41 ± 0.005 (two equal seeds) does not, though ours is their top run;
    0.45 and 0.20 ± 0.025 do not."""
    monkeypatch.setattr(sc, "released_runs", lambda: RELEASED)
    runs = [
        Run(Path(f"/s{i}"), "complete", config={**SETTING, "seed": 13 + i}, summary={TAU_G: v, "test/f1": 0.81})
        for i, v in enumerate(values)
    ]
    frame = sc.judge(runs)
    cell = frame[(frame["dataset"] == "sst") & (frame["key"] == TAU_G) & frame["setting"].str.contains(" lstm ")]
    assert cell["outcome"].tolist() == [outcome]
    assert cell["authors' runs"].tolist() == [expected]
    assert cell["authors' low"].tolist() == [0.30] and cell["authors' high"].tolist() == [0.41]
    others = frame[(frame["key"] != TAU_G) & (frame["outcome"] != sc.NOT_RUN)]
    assert others["authors' runs"].tolist() == [""]  # Table 1's F1: no released run of it here


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (1, "within the authors' released runs 0.300…0.300 (1 run)"),
        (2, "within the authors' released runs 0.300…0.350 (2 runs)"),
    ],
)
def test_one_or_two_released_runs_are_counted_in_words(count, said):
    """A cell whose authors released one run (0.30) or two (0.30, 0.35), all verified: ``1 run``, ``2 runs``."""
    released = RELEASED.iloc[:count]
    row = next(released.itertuples(index=False))
    assert sc.authors_runs(row, 0.30, released)["authors' runs"] == said


def test_the_real_20news_cell_is_within_the_authors_runs():
    """released_runs.csv's 20News BiLSTM τ_g of class 0: −0.053, 0.07 (quoted), 0.081, 0.175; ours 0.16."""
    said = tau_g_cell(sc.judge(split_runs()))["authors' runs"]
    assert said == "within the authors' released runs -0.053…0.175 (4 runs, 1 not verified)"


def f1_runs(values) -> list[Run]:
    """J&W Table 1's SST F1 (paper 0.81) from runs with these F1s."""
    return [
        Run(Path(f"/f{i}"), "complete", config={**SETTING, "seed": 13 + i}, summary={"test/f1": v})
        for i, v in enumerate(values)
    ]


def test_a_verdict_from_two_seeds_is_tentative_in_the_files_the_cell_and_the_summary_lines(tmp_path, monkeypatch):
    """F1 0.80 and 0.82: std √0.0002 = 0.014142, band 2 × 0.014142 + 0.005 = 0.0333 (shown ±0.03): reproduced, and
    tentative; a third seed makes it firm; one seed gives no verdict, so nothing tentative."""

    def f1(frame):
        return frame[(frame["source"] == "Table 1") & (frame["dataset"] == "sst")].iloc[0]

    two = f1(sc.judge(f1_runs([0.80, 0.82])))
    assert two["outcome"] == sc.REPRODUCED and two["tentative"] and two["band"] == pytest.approx(0.0332843, abs=1e-6)
    assert not f1(sc.judge(f1_runs([0.80, 0.81, 0.82])))["tentative"]
    assert not f1(sc.judge(f1_runs([0.81])))["tentative"]
    runs = f1_runs([0.80, 0.82])
    monkeypatch.setattr(paper_tables, "available_data", lambda runs: {"sst"})
    card_ = paper_tables.scorecard(runs, runs, tmp_path)
    html = card_.summary_html() + card_.tables
    assert "<summary>0.810 (0.81) <small>±0.03, tentative</small></summary>" in html
    assert "tentative: 2 seeds (a verdict is firm from 3)" in html
    card = pd.read_csv(tmp_path / "scorecard.csv")
    assert card.loc[card["source"] == "Table 1", "tentative"].tolist() == [True]
    lines = card_.lines
    assert lines[0] == (
        "Jain & Wallace (2019), Table 1: 12 numbers: 1 reproduced, 0 not reproduced, 0 not comparable, "
        "11 not run (11 data absent); 1 verdict tentative (under 3 seeds)"
    )
    tables = sc.references().groupby(["paper", "source"]).ngroups
    assert lines[1:] == [f"{tables - 1} other paper tables: no run here gives a number of them"]
    assert re.search(r"Table 1</a>: 12 numbers: .*; 1 verdict tentative \(under 3 seeds\)</li>", html)
    assert (  # the note under the table's own heading counts it too
        "Table 1</h3><p class='note'>12 numbers: 1 reproduced, 0 not reproduced, 0 not comparable, 11 not run; "
        "1 verdict tentative (under 3 seeds).</p>"
    ) in card_.tables


def test_summary_line_says_why_numbers_were_not_run_and_how_many_verdicts_are_tentative():
    counts = {sc.REPRODUCED: 3, sc.UNEXPLAINED: 1, sc.NOT_RUN: 5}
    assert summary_line(counts, 2, "4 data absent, 1 compute") == (
        "9 numbers: 3 reproduced, 1 not reproduced, 0 not comparable, 5 not run (4 data absent, 1 compute); "
        "2 verdicts tentative (under 3 seeds)"
    )
    assert summary_line(counts, 1) == (
        "9 numbers: 3 reproduced, 1 not reproduced, 0 not comparable, 5 not run; 1 verdict tentative (under 3 seeds)"
    )
