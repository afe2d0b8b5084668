"""On a GPU the analyses give the CPU's numbers (float tolerance): same instances, same draws (seeding.py),
batch sizes chosen from the device. Runs where CUDA is present; skipped elsewhere, saying so."""

from __future__ import annotations

import copy
from functools import partial

import numpy as np
import pytest
import torch

from attn_study.analysis.measuring import analysis_mode
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.families.sparsity.callback import Sparsity
from attn_study.models import encoders
from tests.helpers import StubData, tiny_model, token_batch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15, 16], [16, 17, 18, 19, 20, 2, 3], [4, 9, 9, 9]]


@pytest.mark.parametrize("encoder", ["lstm", "cnn", "average"])
def test_cpu_and_gpu_agree(encoder):
    make = {
        "lstm": partial(encoders.RNNEncoder, hidden_size=8),
        "cnn": partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=8),
        "average": partial(encoders.AverageEncoder, hidden_size=8),
    }[encoder]
    cpu = tiny_model(make, num_classes=2, double=True)
    batch = token_batch(SEQS, [0, 1, 1, 0, 1])
    families = [JainWallace(seed=3, steps=50, permutations=20), SerranoSmith(seed=3), Sparsity(seed=3)]
    frames = {}
    for device in ("cpu", "cuda"):
        model = copy.deepcopy(cpu).to(device)
        data = StubData(batch)  # each family moves its batches to the model's device
        for family in families:
            with analysis_mode(model):
                frames[device, family.name] = family.measure(
                    model, data, "test", np.arange(len(SEQS)), list(family.tests)
                ).frame
    for family in families:
        a, b = frames["cpu", family.name], frames["cuda", family.name]
        numeric = [c for c in a.columns if a[c].dtype.kind in "fiu"]
        np.testing.assert_allclose(
            b[numeric].to_numpy(float), a[numeric].to_numpy(float), atol=1e-6, rtol=0, err_msg=family.name
        )
