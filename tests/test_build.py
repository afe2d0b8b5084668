"""attn_study/build.py: the training module a config and its data make. The loss's class weights and the class
prior (instance weighting's p(y)) are counted from the training split's labels, here by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_study.assemble import data_and_model
from tests.helpers import TINY, compose_config


@pytest.mark.parametrize("seed", [3, 4])
def test_class_weights_and_prior_are_the_training_splits(tmp_path, seed):
    cfg = compose_config(*TINY, f"seed={seed}", "model.class_weights=pos_weight", "logger=csv")
    assembled = data_and_model(cfg, tmp_path)
    labels = np.asarray(assembled.datamodule.split("train").labels)
    negative, positive = (labels == 0).sum(), (labels == 1).sum()
    assert negative != positive  # else the weight and the prior could not tell the classes apart
    module = assembled.module
    # Jain & Wallace's pos_weight: the positive class weighted by #negative / #positive
    torch.testing.assert_close(module.class_weights, torch.tensor([1.0, negative / positive], dtype=torch.float))
    torch.testing.assert_close(module.class_prior, torch.tensor([negative, positive], dtype=torch.float) / len(labels))


def test_class_weights_given_as_a_list_are_used_as_given(tmp_path):
    cfg = compose_config(*TINY, "model.class_weights=[0.5,3.0]", "logger=csv")
    module = data_and_model(cfg, tmp_path).module
    torch.testing.assert_close(module.class_weights, torch.tensor([0.5, 3.0]))
    assert data_and_model(compose_config(*TINY, "logger=csv"), tmp_path).module.class_weights is None
