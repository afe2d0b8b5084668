"""The faithful-by-design comparison table: which runs it groups, and each cell's mean and seed std."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_study.report import mohankumar
from attn_study.report.runs import Run


def run(encoder: str, seed: int, acc: float, conicity: float | None, dataset: str = "sst", model: str = "flat") -> Run:
    summary = {"test/acc": acc, "jw/tau_grad/mean": 0.1 * seed}
    if conicity is not None:
        summary["test/conicity/mean"] = conicity
    config = {"dataset": dataset, "model": model, "encoder": encoder, "attention": "additive"}
    config.update(projection="softmax", seed=seed, variant_parts={}, variant="", training="standard")
    return Run(path=Path(f"/runs/{encoder}-{seed}"), state="complete", config=config, summary=summary)


def test_groups_by_dataset_and_lstm_with_mean_and_seed_std(tmp_path):
    runs = [
        run("vanilla_lstm", 1, 0.80, 0.70),
        run("vanilla_lstm", 2, 0.82, 0.72),
        run("diversity_lstm", 1, 0.79, 0.20),
        run("diversity_lstm", 2, 0.81, 0.16),
        run("diversity_lstm", 3, 0.80, 0.18),
        run("orthogonal_lstm", 1, 0.78, None),  # no conicity recorded: "—", not 0
        run("cnn", 1, 0.9, 0.5),  # not an LSTM of the comparison
        run("lstm", 1, 0.6, 0.9, model="han"),  # no state per token
    ]
    frame = mohankumar.comparison_table(runs).set_index("encoder")
    assert list(frame.index) == ["diversity_lstm", "orthogonal_lstm", "vanilla_lstm"]
    assert frame.loc["diversity_lstm", "seeds"] == 3
    assert frame.loc["diversity_lstm", "conicity ↓"] == pytest.approx(0.18)
    assert frame.loc["diversity_lstm", "conicity ↓ std"] == pytest.approx(np.std([0.20, 0.16, 0.18], ddof=1))
    assert frame.loc["vanilla_lstm", "accuracy"] == pytest.approx(0.81)
    assert frame.loc["vanilla_lstm", "τ(attention, gradient) ↑"] == pytest.approx(0.15)
    assert np.isnan(frame.loc["orthogonal_lstm", "conicity ↓"])
    assert np.isnan(frame.loc["orthogonal_lstm", "accuracy std"])  # one seed: no spread
    shown = mohankumar.comparison_display(frame.reset_index()).set_index("encoder")
    assert shown.loc["diversity_lstm", "conicity ↓"] == "0.180 ± 0.020"
    assert shown.loc["orthogonal_lstm", "conicity ↓"] == "—"
    assert shown.loc["orthogonal_lstm", "accuracy"] == "0.780"


def test_shown_only_with_a_model_built_to_be_faithful(tmp_path):
    assert mohankumar.sections([run("lstm", 1, 0.8, 0.7), run("cnn", 1, 0.8, 0.5)], tmp_path) == []
    sections = mohankumar.sections([run("lstm", 1, 0.8, 0.7), run("diversity_lstm", 1, 0.8, 0.2)], tmp_path)
    assert [title for title, _ in sections] == ["Faithful by design (Mohankumar et al. 2020)"]
    written = pd.read_csv(tmp_path / "mohankumar.csv")
    assert written["conicity ↓"].tolist() == [0.2, 0.7]  # numbers in the CSV, not formatted strings
