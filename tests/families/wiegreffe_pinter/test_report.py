"""Wiegreffe & Pinter's report on hand-made runs (no training): the baselines table per dataset × model and
attention kind, its printed cells, and each run against its base (the frontier)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_study.families.wiegreffe_pinter import report
from attn_study.report.runs import Run

BASE_OPTION = "analysis/wiegreffe_pinter/base"


def wp_run(root: Path, name: str, dataset="sst", encoder="lstm", attention="additive", summary=None, **config) -> Run:
    settings = config.pop("settings", {})
    fields = {"model": "flat", "projection": "softmax", "seed": 1, "variant": "", "training": "standard"}
    full = {"dataset": dataset, "encoder": encoder, "attention": attention, **fields, **config}
    return Run(path=root / name, state="complete", config=full, summary=summary or {}, settings=settings)


@pytest.fixture
def runs(tmp_path):
    base = wp_run(tmp_path, "base", summary={"test/acc": 0.80, "test/f1": 0.78})
    compared = {BASE_OPTION: str(tmp_path / "base")}
    seed = wp_run(
        tmp_path,
        "seed",
        model_seed=1001,
        settings=compared,
        summary={"test/acc": 0.82, "test/f1": 0.80, "wp/jsd/mean": 0.1, "wp/tvd/mean": 0.05, "wp/agreement": 0.9},
    )
    adversary = wp_run(
        tmp_path,
        "adversary",
        training="model consistent adversary",
        settings=compared | {"training/schedule": "model_consistent_adversary", "training/lam": 1.0},
        summary={"test/acc": 0.79, "wp/jsd/mean": 0.5, "wp/tvd/mean": 0.02, "wp/agreement": 0.97},
    )
    mlp = {"encoder": "average", "activation": "tanh"}
    return [
        base,
        seed,
        adversary,
        wp_run(tmp_path, "uniform", attention="uniform", summary={"test/acc": 0.70, "test/f1": 0.69}),
        wp_run(tmp_path, "mlp", **mlp, summary={"test/acc": 0.75, "test/f1": 0.74}),
        wp_run(
            tmp_path,
            "mlp-base",
            **mlp,
            attention="preloaded",
            attention_source=str(tmp_path / "base"),
            summary={"test/acc": 0.78, "test/f1": 0.77},
        ),
        wp_run(
            tmp_path,
            "mlp-adversary",
            **mlp,
            attention="preloaded",
            attention_source=str(tmp_path / "adversary"),
            summary={"test/acc": 0.72, "test/f1": 0.70},
        ),
        wp_run(tmp_path, "imdb", dataset="imdb", summary={"test/acc": 0.88, "test/f1": 0.88}),  # listed last
    ]


def test_the_baselines_are_per_dataset_and_model_each_attention_kind_over_its_seeds(runs):
    """Rows sorted by dataset, then model; kinds in the order learned, uniform, the base's, the adversaries' by λ;
    the adversary itself (not standard training) is no row's. Means and stds (ddof 0) by hand."""
    frame = report.baselines(runs)
    mlp = "diagnostic MLP (average, tanh)"
    assert list(zip(frame["dataset"], frame["model"])) == [("imdb", "lstm"), ("sst", mlp), ("sst", "lstm")]
    kinds = ["learned", "uniform", "pre-loaded: base", "pre-loaded: adversary λ=1.0"]
    assert [c.removesuffix(" acc mean") for c in frame.columns if c.endswith(" acc mean")] == kinds
    lstm = frame.set_index("model").loc["lstm"].set_index("dataset").loc["sst"]
    assert lstm["learned acc mean"] == pytest.approx(0.81) and lstm["learned acc std"] == pytest.approx(0.01)
    assert lstm["learned acc n"] == 2 and lstm["uniform F1 mean"] == 0.69 and np.isnan(lstm["uniform F1 std"])
    assert lstm["pre-loaded: base acc n"] == 0 and np.isnan(lstm["pre-loaded: base acc mean"])
    shown = report.baselines_display(frame).set_index("model")
    assert shown.loc["lstm", "learned acc"].tolist() == ["0.880", "0.810 ± 0.010 (2)"]  # imdb, sst
    assert (
        shown.loc[mlp, "pre-loaded: base F1"] == "0.770"
        and shown.loc[mlp, "pre-loaded: adversary λ=1.0 acc"] == "0.720"
    )
    assert shown.loc[mlp, "uniform acc"] == "—"  # no run of it


def test_each_compared_run_is_named_by_its_base_and_its_role(runs, tmp_path):
    frame = report.frontier(runs)
    assert frame["base"].tolist() == ["sst flat-lstm-additive-softmax s1"] * 2  # the base run's name, not its path
    assert frame["role"].tolist() == ["adversary λ=1.0", "model seed 1001"]
    assert frame["jsd"].tolist() == [0.5, 0.1] and frame["lam"].tolist()[0] == 1.0
    titles = [title for title, _ in report.sections(runs, tmp_path)]
    assert titles == ["Wiegreffe & Pinter: baselines"]
    assert pd.read_csv(tmp_path / "wp_frontier.csv")["tvd"].tolist() == [0.02, 0.05]
    assert len(pd.read_csv(tmp_path / "wp_baselines.csv")) == 3 and (tmp_path / "wp_jsd_vs_tvd.png").is_file()
