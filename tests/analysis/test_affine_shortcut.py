"""The affine decoding shortcut (models/classifier.py): every statistic that decodes many attentions is
the same through the projected states U_t = W h_t as by pooling each attention, on every model type."""

from __future__ import annotations

import contextlib
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.analysis.measuring import analysis_mode
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.families.sparsity.callback import Sparsity
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier, general_decoding
from tests.helpers import StubData, tiny_model, token_batch
from tests.models.test_han import batch_of as han_batch
from tests.models.test_han import make_model as han_model
from tests.models.test_pair_model import batch_of as pair_batch
from tests.models.test_pair_model import make as pair_model

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3], [4, 9]]
FLAT = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=4),
    "average": partial(encoders.AverageEncoder, hidden_size=5, activation="tanh"),
    "noenc": encoders.NoEncoder,
    "transformer": partial(encoders.TransformerEncoder, model_dim=8, num_heads=2, ff_dim=16, num_layers=1),
}


def cases():
    """(name, model, batch, families) for every model type; double precision, eval mode."""
    out = []
    for name, encoder in FLAT.items():
        for proj in (projection.Softmax, projection.Sparsemax):
            for classes in (2, 3):
                model = tiny_model(encoder, proj=proj, num_classes=classes, double=True)
                out.append((f"flat-{name}-{proj.__name__}-{classes}", model, token_batch(SEQS, [0, 1, 1, 0, 1])))
    out.append(("pair-lstm", pair_model("lstm").requires_grad_(False), pair_batch()))
    docs = [[[3, 4, 5], [6, 7]], [[8, 9], [10, 11, 12], [13]], [[14, 15, 16, 17]]]
    out.append(("han-gru", han_model("gru", "softmax").double().requires_grad_(False), han_batch(docs)))
    return out


CASES = cases()


@pytest.mark.parametrize(("name", "model", "batch"), CASES, ids=[c[0] for c in CASES])
def test_decode_many_through_projected_states_equals_pooling(name, model, batch):
    enc = model.encode(batch)
    gen = torch.Generator().manual_seed(0)
    alphas = torch.rand((*enc.mask.shape[:1], 7, enc.mask.shape[1]), generator=gen, dtype=torch.double)
    alphas = alphas * enc.mask[:, None, :]
    alphas[:, 0] = 0.0  # the zero attention (everything erased) too
    fast = model.decode_many(enc, alphas)
    assert "value" in enc.projected  # the shortcut was taken
    with general_decoding():
        pooled = model.encode(batch)
        slow = model.decode_many(pooled, alphas)
    assert not pooled.projected  # the reference pooled every attention: no state was projected
    torch.testing.assert_close(fast, slow, atol=1e-12, rtol=0)


def test_the_shortcut_stays_off_where_it_would_be_wrong():
    model = tiny_model(FLAT["lstm"], double=True)
    batch = token_batch(SEQS)
    model.train()  # dropout is not the identity
    enc = model.encode(batch)
    model.decode_many(enc, torch.rand(5, 2, enc.mask.shape[1], dtype=torch.double))
    assert not enc.projected
    model.eval()

    class Gated(AttentionClassifier):  # a decoder the shortcut knows nothing about
        def combine(self, context, query):
            return torch.relu(context)

    torch.manual_seed(0)
    gated = Gated(25, 2, FLAT["lstm"], attention.AdditiveScorer, projection.Softmax(), embedding_dim=6).double().eval()
    enc = gated.encode(batch)
    alphas = torch.rand(5, 3, enc.mask.shape[1], dtype=torch.double)
    got = gated.decode_many(enc, alphas)
    assert not enc.projected
    pooled = torch.einsum("bkt,btm->bkm", alphas, enc.hidden)
    torch.testing.assert_close(got, gated.output(torch.relu(pooled)))
    # states changed in place after caching: projected again
    enc = model.encode(batch)
    model.decode_many(enc, alphas[:, :, : enc.mask.shape[1]])
    enc.hidden.mul_(2.0)
    again = model.decode_many(enc, alphas)
    with general_decoding():
        torch.testing.assert_close(again, model.decode_many(enc, alphas))


def family_frames(family, model, batch) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The family's per-instance frame with the shortcut and without it (same seeds)."""
    data = StubData(batch, model.num_classes)
    indices = np.arange(len(batch["lengths"]))
    frames = []
    for general in (False, True):
        with analysis_mode(model), general_decoding() if general else contextlib.nullcontext():
            frames.append(family.measure(model, data, "test", indices, list(family.tests)).frame)
    return frames[0], frames[1]


def assert_frames_equal(fast: pd.DataFrame, slow: pd.DataFrame) -> None:
    assert list(fast.columns) == list(slow.columns)
    for column in fast.columns:
        a, b = fast[column], slow[column]
        if pd.api.types.is_numeric_dtype(a):
            np.testing.assert_allclose(a.to_numpy(float), b.to_numpy(float), atol=1e-6, rtol=0, err_msg=column)
        else:
            assert a.tolist() == b.tolist(), column


@pytest.mark.parametrize(
    ("name", "model", "batch"),
    [c for c in CASES if "Sparsemax" not in c[0]],
    ids=[c[0] for c in CASES if "Sparsemax" not in c[0]],
)
def test_every_affected_statistic_is_unchanged(name, model, batch):
    families = [SerranoSmith(seed=1, batch_size=8)]
    if not name.startswith("han"):
        families += [JainWallace(seed=1, batch_size=8, steps=60, permutations=30)]
    if name.startswith("flat"):
        families += [Sparsity(batch_size=8, tests=["intermediate"])]
    for family in families:
        fast, slow = family_frames(family, model, batch)
        assert_frames_equal(fast, slow)
