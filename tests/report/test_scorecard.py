"""The reproduction scorecard's rule, on runs whose numbers are set by hand against a published number
(Jain & Wallace Table 1: SST BiLSTM F1 0.81; Table 2: τ_g of class 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_study.report.runs import Run
from attn_study.report.scorecard import references, rounding, scorecard, verdict

SETTING = {
    "dataset": "sst",
    "model": "flat",
    "encoder": "lstm",
    "attention": "additive",
    "projection": "softmax",
    "recipe": "jain_wallace",
    "embeddings": "glove.6B.50d.txt.gz",
    "lam": None,
}


def runs(values, key="test/f1", recipe="jain_wallace", **extra):
    return [
        Run(
            Path(f"/r{i}"),
            "complete",
            config={**SETTING, "recipe": recipe, "seed": 13 + i},
            summary={key: v, **{k: v2[i] for k, v2 in extra.items()}},
        )
        for i, v in enumerate(values)
    ]


def cell(frame, source="Table 1", statistic="f1"):
    row = frame[(frame.source == source) & (frame.statistic == statistic)]
    assert len(row) == 1, frame[["source", "statistic", "setting"]]
    return row.iloc[0]


def test_the_reference_number_is_there():
    table = references()
    row = table[
        (table.paper == "jain_wallace")
        & (table.source == "Table 1")
        & (table.dataset == "sst")
        & (table.key == "test/f1")
    ]
    assert row.value.tolist() == ["0.81"]


def test_rounding_is_half_the_last_printed_digit():
    assert rounding("0.81") == pytest.approx(0.005) and rounding("12") == 0.5 and rounding("0.405") == 0.0005


def test_three_seeds_around_the_paper_reproduce_it_and_three_far_below_do_not():
    near = cell(scorecard(runs([0.80, 0.81, 0.82])))
    assert near["verdict"] == "reproduced" and near["n seeds"] == 3
    assert near["ours"] == pytest.approx(0.81) and near["seed std"] == pytest.approx(0.01)
    assert near["paper value"] == "0.81" and near["embeddings"] == "glove.6B.50d.txt.gz"
    # band 2·0.001 + 0.005 (rounding): 0.79 is outside, 0.807 inside
    assert cell(scorecard(runs([0.789, 0.790, 0.791])))["verdict"] == "not reproduced (ours lower)"
    assert cell(scorecard(runs([0.806, 0.807, 0.808])))["verdict"] == "reproduced"
    assert cell(scorecard(runs([0.90, 0.91, 0.92])))["verdict"] == "not reproduced (ours higher)"


def test_one_seed_is_never_reproduced_and_another_recipe_is_not_comparable():
    assert cell(scorecard(runs([0.81])))["verdict"] == "1 seed: no interval"
    assert cell(scorecard(runs([0.81, 0.81], recipe=None)))["verdict"].startswith("not comparable: recipe None")


def test_random_embeddings_are_not_comparable_with_the_papers_pretrained_ones():
    random_ = runs([0.81, 0.81, 0.81])
    random_[1].config["embeddings"] = "random"  # one seed without vectors spoils the cell
    assert cell(scorecard(random_))["verdict"] == "not comparable: random embeddings (paper's: pretrained fastText)"
    assert cell(scorecard(runs([0.81, 0.81, 0.81])))["verdict"] == "reproduced"


def test_the_bootstrap_interval_widens_the_band():
    key = "jw/tau_grad/class_1/mean"
    table = references()
    row = table[
        (table.paper == "jain_wallace")
        & (table.key == key)
        & (table.dataset == "sst")
        & (table.encoder == "lstm")
        & (table.statistic == "mean")
    ].iloc[0]
    paper = float(row.value)
    lows, highs = [paper - 0.02] * 3, [paper + 0.08] * 3
    frame = scorecard(runs([paper + 0.03] * 3, key=key, **{key[:-4] + "ci_low": lows, key[:-4] + "ci_high": highs}))
    found = frame[frame.source == row.source]
    assert found["verdict"].tolist() == ["reproduced"]  # |0.03| <= 0 + 0.05 + rounding
    one = scorecard(runs([paper + 0.03], key=key, **{key[:-4] + "ci_low": lows, key[:-4] + "ci_high": highs}))
    assert one[one.source == row.source]["verdict"].tolist() == ["1 seed: the paper's value inside our interval"]
    assert (
        verdict(
            paper,
            row.value,
            {"n seeds": 3, "ours": paper + 0.2, "seed std": 0.0, "ci low": paper + 0.19, "ci high": paper + 0.21},
        )
        == "not reproduced (ours higher)"
    )
