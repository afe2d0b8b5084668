"""attn_study/job/components.py: the training module a config and its data make. The loss's class weights and the class
prior (instance weighting's p(y)) are counted from the training split's labels, here by hand."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch

from attn_study.job.plan import build_plan, check_plan
from tests.helpers import TINY, compose_config


@pytest.mark.parametrize("seed", [3, 4])
def test_class_weights_and_prior_are_the_training_splits(tmp_path, seed):
    cfg = compose_config(*TINY, f"seed={seed}", "model.class_weights=pos_weight", "logger=csv")
    assembled = build_plan(check_plan(cfg), tmp_path)
    labels = np.asarray(assembled.datamodule.split("train").labels)
    negative, positive = (labels == 0).sum(), (labels == 1).sum()
    assert negative != positive  # else the weight and the prior could not tell the classes apart
    module = assembled.module
    # Jain & Wallace's pos_weight: the positive class weighted by #negative / #positive
    torch.testing.assert_close(module.class_weights, torch.tensor([1.0, negative / positive], dtype=torch.float))
    torch.testing.assert_close(module.class_prior, torch.tensor([negative, positive], dtype=torch.float) / len(labels))


def test_class_weights_given_as_a_list_are_used_as_given(tmp_path):
    cfg = compose_config(*TINY, "model.class_weights=[0.5,3.0]", "logger=csv")
    module = build_plan(check_plan(cfg), tmp_path).module
    torch.testing.assert_close(module.class_weights, torch.tensor([0.5, 3.0]))
    plain = compose_config(*TINY, "logger=csv")
    assert build_plan(check_plan(plain), tmp_path).module.class_weights is None


class _NeverBetter(L.LightningModule):
    """One weight, two training batches an epoch; dev accuracy 0.5 at every epoch: the first stays the best."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        return (self.w - batch.sum()).pow(2).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val/acc", 0.5)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.ones(4, 1), batch_size=2)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(torch.ones(2, 1), batch_size=2)


def test_the_resume_point_is_the_last_epoch_even_when_the_best_is_an_earlier_one(tmp_path):
    """checkpoints/last.ckpt holds the last finished epoch, not the best one (Lightning's save_last alone writes it
    only when dev improves), with the best-on-dev checkpoint's state as it stands; resuming from it trains on from
    there and leaves best.ckpt alone."""
    from attn_study.job.components import build_callbacks

    cfg = compose_config()
    checkpoints = tmp_path / "checkpoints"

    def trainer(epochs):
        return L.Trainer(
            max_epochs=epochs,
            callbacks=build_callbacks(cfg, tmp_path),
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
        )

    trainer(3).fit(_NeverBetter())
    last = torch.load(checkpoints / "last.ckpt", weights_only=False)
    best = torch.load(checkpoints / "best.ckpt", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (2, 6) and (best["epoch"], best["global_step"]) == (0, 2)
    (state,) = [v for k, v in last["callbacks"].items() if "val/acc" in k]
    assert state["best_model_path"] == str(checkpoints / "best.ckpt") and state["best_model_score"] == 0.5
    resumed = trainer(5)
    resumed.fit(_NeverBetter(), ckpt_path=str(checkpoints / "last.ckpt"))
    assert resumed.global_step == 10
    assert torch.load(checkpoints / "best.ckpt", weights_only=False)["global_step"] == 2
    assert torch.load(checkpoints / "last.ckpt", weights_only=False)["global_step"] == 10


def test_word_tying_is_off_when_its_settings_are_left_out(tmp_path):
    """``~training.word_tying`` (no weight given at all): weight 0, no word-tying objective, as with ``weight: 0.0``."""
    cfg = compose_config(*TINY, "~training.word_tying", "logger=csv")
    assert "word_tying" not in cfg.training
    assert build_plan(check_plan(cfg), tmp_path).module.word_tying is None
