"""The accuracy table: one row per complete run, in the models' order, with a column only where some run has a value
for it, and a number a run did not record left empty (never a placeholder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attn_study.report.accuracy import accuracy_table
from attn_study.report.runs import Run

CODE = {"version": "0.1.0", "commit": "c" * 40, "dirty": False}


def run(dataset: str, encoder: str, seed: int, summary: dict, state: str = "complete", **fields) -> Run:
    config = {"dataset": dataset, "model": "flat", "encoder": encoder, "attention": "additive"}
    config.update(projection="softmax", seed=seed, variant="")
    path = Path(f"/runs/{dataset}-{encoder}-{seed}")
    return Run(path=path, state=state, config=config, summary=summary, code=CODE, **fields)


def test_one_row_per_complete_run_sorted_with_unrecorded_numbers_left_empty():
    runs = [
        run("sst", "lstm", 2, {"test/acc": 0.8, "test/f1": 0.7, "train/seconds": 30.0}, started=100.0, finished=160.0),
        run("imdb", "lstm", 1, {"test/acc": 0.9}, started=50.0, finished=40.0),  # clock went back: no wall time
        run(
            "sst", "cnn", 1, {"test/acc": 0.75, "test/f1": 0.74, "train/seconds": 12.0}, started=1000.0, finished=1009.0
        ),
        run("agnews", "lstm", 1, {"test/acc": 0.1}, state="failed"),
    ]
    frame = accuracy_table(runs)
    # dataset, then encoder: imdb < sst, and within sst cnn < lstm
    assert list(zip(frame["dataset"], frame["encoder"])) == [("imdb", "lstm"), ("sst", "cnn"), ("sst", "lstm")]
    assert frame["test/acc"].tolist() == [0.9, 0.75, 0.8]
    imdb = frame.iloc[0]
    assert np.isnan(imdb["test/f1"]) and np.isnan(imdb["training time"]) and np.isnan(imdb["last attempt"])
    assert np.isnan(imdb["test/auroc"]) and np.isnan(imdb["its best dev value"]) and np.isnan(imdb["epochs"])
    assert frame["training time"].tolist()[1:] == [12.0, 30.0]
    assert frame["last attempt"].tolist()[1:] == [9.0, 60.0]
    assert frame["selected on"].tolist() == ["val/acc"] * 3  # nothing recorded: the default selection
    # one attempt each, one code version, no paper accuracy, no variant: none of those columns
    assert not {"attempts", "code", "paper test/acc", "variant"} & set(frame.columns)


def test_the_attempts_column_appears_only_when_a_run_was_resumed():
    first = run("sst", "lstm", 1, {"test/acc": 0.8})
    unknown = run("sst", "lstm", 2, {"test/acc": 0.8, "run/attempts": np.nan})  # a null in summary.json: one attempt
    assert "attempts" not in accuracy_table([first, unknown]).columns
    resumed = run("sst", "lstm", 3, {"test/acc": 0.8}, attempts=3)  # status.json's count, summary.json has none
    recorded = run("sst", "lstm", 4, {"test/acc": 0.8, "run/attempts": 2}, attempts=5)  # summary.json's count wins
    frame = accuracy_table([first, resumed, recorded])
    assert frame["attempts"].tolist() == [1, 3, 2]


def test_the_selected_metric_and_its_best_dev_value_and_the_papers_accuracy_in_fractions():
    chosen = run("sst", "lstm", 1, {"test/acc": 0.8, "val/auroc_best": 0.91, "train/epochs": 7})
    chosen.config["paper_accuracy"] = 78.5
    frame = accuracy_table([chosen])
    assert frame["selected on"].tolist() == ["val/auroc"] and frame["its best dev value"].tolist() == [0.91]
    assert frame["epochs"].tolist() == [7]
    assert frame["paper test/acc"].tolist() == [pytest.approx(0.785)]


def test_no_complete_run_makes_an_empty_table():
    assert accuracy_table([run("sst", "lstm", 1, {}, state="failed")]).empty
