"""The commands as the README and ``--help`` show them: a debug run that finishes, the messages users read."""

from __future__ import annotations

import pandas as pd
import pytest

from attn_study import assemble, saved
from attn_study.config import config_differences
from attn_study.data.processed import Preprocessing, build
from attn_study.errors import UserError
from attn_study.run import run, train_and_test
from tests.data.test_recipes import ListSource
from tests.helpers import TINY

# a debug run's test (trainer=debug: 2 batches) sees 32 of these 80 test instances
CUT_SHORT = [*TINY, "logger=none", "encoder.hidden_size=8", "dataset.source.n_test=80", "dataset.eval_batch_size=16"]


def test_a_test_cut_short_still_records_every_test_instances_attention(make_cfg, tmp_path):
    """``trainer=debug`` tests 2 batches; attention.parquet holds all 80 instances, each as the model gives it."""
    run_dir = tmp_path / "run"
    summary = train_and_test(make_cfg(*CUT_SHORT), run_dir)
    assert summary["data/test_size"] == 80
    frame = pd.read_parquet(run_dir / "attention.parquet")
    loaded = assemble.load(run_dir, force=True)
    expected = saved.record(loaded.model, loaded.datamodule)["test"]
    assert list(frame["uid"]) == list(loaded.datamodule.split("test").uids)
    for row, (alpha, probs) in enumerate(zip(expected.attention, expected.outputs)):
        assert frame["attention"].iloc[row] == pytest.approx(alpha, abs=1e-6)
        assert frame["probabilities"].iloc[row] == pytest.approx(probs, abs=1e-6)


def test_a_partial_attention_record_is_refused_in_one_line(make_cfg, tmp_path):
    """A run compared with a base whose attention.parquet lacks instances stops before training, in one line."""
    base = tmp_path / "base"
    run(make_cfg(*CUT_SHORT), base)
    frame = pd.read_parquet(base / "attention.parquet")
    frame.iloc[:40].to_parquet(base / "attention.parquet")
    compared = make_cfg(*CUT_SHORT, "analysis=[wiegreffe_pinter]", f"analysis.wiegreffe_pinter.base={base}")
    with pytest.raises(UserError) as refused:
        train_and_test(compared, tmp_path / "compared")
    assert "\n" not in str(refused.value) and "40 vs 80" in str(refused.value)
    assert not (tmp_path / "compared" / "checkpoints").exists()


# -- the refusal of a run directory holding another configuration ---------------------------------


def test_config_differences_lead_with_the_choices_and_keep_constructor_paths_out():
    stored = {
        "encoder/name": "lstm",
        "encoder/_target_": "attn_study.models.encoders.RNNEncoder",
        "encoder/cell": "lstm",
        "analysis/jain_wallace/split": "test",
        "analysis/jain_wallace/steps": 500,
        "model/optimizer/lr": 0.001,
        "run_name": "synthetic-flat-lstm",
        "seed": 13,
    }
    current = {
        "encoder/name": "cnn",
        "encoder/_target_": "attn_study.models.encoders.CNNEncoder",
        "encoder/filters": 64,
        "analysis/jain_wallace/split": "test",
        "analysis/jain_wallace/steps": 30,
        "analysis/sparsity/split": "test",
        "model/optimizer/lr": 0.01,
        "model/new_setting": None,  # added later, off: the same experiment
        "run_name": "synthetic-flat-cnn",
        "seed": 13,
    }
    assert config_differences(stored, current, limit=None) == [
        "encoder: lstm → cnn",
        "analysis: [jain_wallace] → [jain_wallace,sparsity]",
        "analysis.jain_wallace.steps: 500 → 30",
        "model.optimizer.lr: 0.001 → 0.01",
    ]
    assert config_differences(stored, current, limit=2)[-1] == "… 2 more"
    assert config_differences({"analysis": {}}, {"analysis/sparsity/split": "test"}) == ["analysis: [] → [sparsity]"]
    only_paths = {**stored, "encoder/_target_": "elsewhere.RNNEncoder"}
    assert config_differences(stored, only_paths) == [
        "encoder._target_: attn_study.models.encoders.RNNEncoder → elsewhere.RNNEncoder"
    ]


def test_a_single_run_refused_for_another_configuration_says_what_differs_and_hydra_run_dir(make_cfg, tmp_path, caplog):
    run_dir = tmp_path / "run"
    run(make_cfg(*TINY, "logger=none", "encoder.hidden_size=8"), run_dir)
    other = make_cfg(*TINY, "logger=none", "encoder=cnn", "encoder.filters=4")
    with pytest.raises(UserError) as refused:
        run(other, run_dir)
    message = str(refused.value)
    assert "(encoder: lstm → cnn)" in message and message.endswith("choose another hydra.run.dir")
    assert "_target_" not in message and "\n" not in message
    assert run(other, run_dir, keep_going=True) is None  # a sweep job: logged, the sweep goes on
    assert "choose another hydra.sweep.dir" in caplog.text


# -- what the data filter says ------------------------------------------------------------------------


def test_the_data_filter_says_each_drop_with_its_reason_and_nothing_for_a_reason_that_dropped_nothing(caplog):
    caplog.set_level("INFO", logger="attn_study.data.processed")
    lengths = (1, 2, 3, 5, 5, 7)
    texts = {split: [(" ".join(["w"] * n), n % 2) for n in lengths] for split in ("train", "dev", "test")}
    build(ListSource(texts), Preprocessing())
    assert "toy/test: 6 read, 6 kept\n" in caplog.text + "\n" and "None" not in caplog.text
    assert "dropped" not in caplog.text
    caplog.clear()
    data = build(ListSource(texts), Preprocessing(min_length=2, max_length=6, drop_longest=True))
    assert (
        "toy/test: 6 read, 2 kept; dropped: 1 shorter than 2 tokens, 1 longer than 6 tokens, 2 of the split's "
        "longest length 5 (drop_longest)"
    ) in caplog.text
    assert data.stats["test"] == {"read": 6, "kept": 2, "too_short": 1, "too_long": 1, "longest": 2}
    caplog.clear()
    build(ListSource(texts), Preprocessing(drop_longest=True))
    assert "toy/test: 6 read, 5 kept; dropped: 1 of the split's longest length 7 (drop_longest)" in caplog.text
    assert "longer than" not in caplog.text and "shorter than" not in caplog.text
