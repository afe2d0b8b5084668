"""Gradient and leave-one-out importance against closed forms and brute force."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from attn_study.analysis.importance import (
    gradient_importance,
    gradient_norm_importance,
    leave_one_out,
    predict,
)
from attn_study.models import attention, encoders, projection
from tests.helpers import tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3], [4, 4]]


def test_gradient_importance_closed_form_noenc_linear_decoder():
    """noenc + dot attention + one sigmoid logit z = w·Σ α_t e_t + b, α held constant:
    ∂ŷ₁/∂e_t = σ'(z) α_t w, so g_t = Σ_c |∇ŷ_c·e_t| = 2 σ'(z) α_t |w·e_t|."""
    model = tiny_model(encoders.NoEncoder, scorer=attention.DotScorer, double=True)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    e = model.embed(batch).detach()
    w = model.output.weight[0].detach()
    p1 = probs[:, 1]
    expected = 2 * (p1 * (1 - p1))[:, None] * alpha * (e @ w).abs()
    got = gradient_importance(model, batch, normalise=False, classes="sum")
    torch.testing.assert_close(got, expected * batch["mask"])
    # the predicted class alone, through its log-odds: |∇ŷ_c·e_t| / (ŷ_c(1 − ŷ_c)) = α_t |w·e_t|, the
    # same once normalised
    torch.testing.assert_close(
        gradient_importance(model, batch, normalise=False), alpha * (e @ w).abs() * batch["mask"]
    )
    normalised = gradient_importance(model, batch)
    torch.testing.assert_close(normalised.sum(1), torch.ones(len(SEQS), dtype=torch.double))
    # with the attention not detached the gradient differs (α depends on e through the scores)
    assert not torch.allclose(
        gradient_importance(model, batch, detach_attention=False, normalise=False, classes="sum"), got
    )


def test_gradient_importance_multiclass_sums_over_outputs_when_asked():
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True)
    batch = token_batch(SEQS[:2])
    got = gradient_importance(model, batch, normalise=False, classes="sum")
    expected = torch.zeros_like(got)
    for c in range(3):
        emb = model.embed(batch).detach().requires_grad_(True)
        enc = model.encode(batch, embedded=emb)
        probs = model.probabilities(model.decode(enc, model.attend(enc).detach()))
        (grad,) = torch.autograd.grad(probs[:, c].sum(), emb)
        expected += (grad * emb).sum(-1).abs()
    torch.testing.assert_close(got, expected * batch["mask"])


def test_gradient_norm_importance_matches_per_instance_autograd():
    model = tiny_model(partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=4), double=True)
    batch = token_batch(SEQS)
    got = gradient_norm_importance(model, batch)
    for row, seq in enumerate(SEQS):
        single = token_batch([seq])
        emb = model.embed(single).detach().requires_grad_(True)
        enc = model.encode(single, embedded=emb)
        probs = model.probabilities(model.decode(enc, model.attend(enc)))
        probs[0, probs[0].argmax()].backward()
        norms = emb.grad[0].norm(dim=-1)
        torch.testing.assert_close(got[row, : len(seq)], norms / norms.sum())


def brute_force_loo(model, seqs):
    out = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.double)
    for row, seq in enumerate(seqs):
        base = model.probabilities(model(token_batch([seq]))[0])[0]
        if len(seq) == 1:
            out[row, 0] = float("nan")
            continue
        for t in range(len(seq)):
            deleted = model.probabilities(model(token_batch([seq[:t] + seq[t + 1 :]]))[0])[0]
            out[row, t] = 0.5 * (deleted - base).abs().sum()
    return out


ENCODERS = {
    "average": partial(encoders.AverageEncoder, hidden_size=5),
    "noenc": encoders.NoEncoder,
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(1, 3, 5, 7), filters=3),
    "conv": partial(encoders.CNNEncoder, kernel_sizes=(3, 5), filters=3),
    "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    "transformer": partial(encoders.TransformerEncoder, model_dim=4, num_heads=2, num_layers=1, ff_dim=8),
}


@pytest.mark.parametrize("name", list(ENCODERS))
@pytest.mark.parametrize("proj", [projection.Softmax, projection.Sparsemax])
def test_leave_one_out_equals_brute_force_deletion(name, proj):
    model = tiny_model(ENCODERS[name], proj=proj, num_classes=3, double=True)
    with torch.no_grad():
        expected = brute_force_loo(model, SEQS)
        got = leave_one_out(model, token_batch(SEQS), chunk_size=4)  # chunks cut across instances
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.isnan(got[2, 0]) and got[2, 1:].eq(0).all()  # length 1: NaN; padding: 0
