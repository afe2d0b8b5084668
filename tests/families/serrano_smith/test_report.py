"""Serrano & Smith's report figure: what each box of the fraction-removed plot stands for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_study import layout
from attn_study.families.serrano_smith import report
from attn_study.report.runs import Run
from tests.helpers import drawn_boxes


def ss_run(root: Path, instances: pd.DataFrame) -> Run:
    path = root / "yelp-han-gru"
    (path / layout.ANALYSIS / "serrano_smith").mkdir(parents=True)
    instances.to_parquet(path / layout.ANALYSIS / "serrano_smith" / layout.INSTANCES)
    config = {"dataset": "yelp", "model": "han", "encoder": "gru", "seed": 1, "variant": ""}
    return Run(path=path, state="complete", config=config, summary={"ss/n_instances": len(instances)})


def test_each_rankings_box_is_its_own_over_the_texts_that_can_be_erased(tmp_path, monkeypatch):
    """Two rankings share a model's tick: boxes 0.8 / 2 = 0.4 apart (centres −0.2 and +0.2), 0.9 × 0.4 = 0.36 wide,
    each spanning the linear quartiles of its fractions over the texts of 2 items or more that flip (a one-item
    text cannot be erased; a text that never flips is NaN): attention 0.5, 0.25, 0.25, 0.4 → 0.25, 0.425; random
    0.5, 0.75, 1.0 → 0.625, 0.875 (by hand)."""
    drawn = drawn_boxes(monkeypatch, report)
    instances = pd.DataFrame(
        {
            "length": [1, 2, 4, 4, 5],
            "attention_frac": [1.0, 0.5, 0.25, 0.25, 0.4],
            "random_frac": [1.0, 0.5, 0.75, np.nan, 1.0],
        }
    )
    report.fraction_removed_figure([ss_run(tmp_path, instances)], "yelp", tmp_path / "figure.png")
    tab10_first, tab10_second = "#1f77b4", "#ff7f0e"  # the rankings' colours, in RANKING_LABELS' order
    expected = [(tab10_first, -0.2, 0.36, 0.25, 0.425), (tab10_second, 0.2, 0.36, 0.625, 0.875)]
    assert len(drawn) == len(expected)
    for (colour, *box), want in zip(drawn, expected):
        assert colour == want[0]
        assert box == pytest.approx(want[1:])
