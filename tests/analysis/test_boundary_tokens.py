"""Boundary tokens (<sos> … <eos>, Jain & Wallace's recipe) are read by the encoder and weighed by nothing:
α, every adversary, permutation and erasure is exactly 0 on them, and every statistic runs over the text's
tokens — each checked against the same statistic worked out over the text by hand."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from attn_study.analysis.erasure import erase_each
from attn_study.analysis.importance import leave_one_out, predict
from attn_study.analysis.measuring import analysis_mode
from attn_study.families.faithfulness.measures import removal_curves
from attn_study.families.jain_wallace.adversarial import adversarial_attention
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.jain_wallace.permutation import permute_among_real
from attn_study.families.sparsity.callback import Sparsity
from attn_study.job.run import run as run_job
from attn_study.layout import ATTENTION
from attn_study.models import attention, encoders, projection
from tests.helpers import StubData, compose_config, tiny_model, token_batch

TEXTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [15], [16, 17, 18, 19, 20, 4], [4, 9]]
PROJECTIONS = {
    "softmax": projection.Softmax,
    "sparsemax": projection.Sparsemax,
    "entmax15": projection.Entmax15,
    "sparsegen": partial(projection.SparsegenLin, lam=-1.0),
}


def inner(batch: dict, r: int) -> slice:
    """Row r's text positions: 1 … length − 2."""
    return slice(1, int(batch["lengths"][r]) - 1)


@pytest.mark.parametrize("name", [*PROJECTIONS, "uniform"])
def test_attention_is_exactly_zero_on_boundary_tokens_for_every_projection(name):
    scorer = attention.UniformScorer if name == "uniform" else attention.AdditiveScorer
    model = tiny_model(scorer=scorer, proj=PROJECTIONS.get(name, projection.Softmax), double=True)
    batch = token_batch(TEXTS, boundary=True)
    _, alpha, _ = predict(model, batch)
    for r, text in enumerate(TEXTS):
        n = int(batch["lengths"][r])
        assert alpha[r, 0] == 0 and alpha[r, n - 1] == 0 and torch.all(alpha[r, n:] == 0)
        torch.testing.assert_close(alpha[r].sum(), torch.tensor(1.0, dtype=torch.double))
        if name == "uniform":  # 1/n over the text's n tokens
            torch.testing.assert_close(
                alpha[r, inner(batch, r)], torch.full((len(text),), 1 / len(text), dtype=torch.double)
            )


def test_adversaries_permutations_and_erasures_never_weigh_a_boundary_token():
    model = tiny_model(num_classes=3, double=True)
    batch = token_batch(TEXTS, boundary=True)
    enc, alpha, probs = predict(model, batch)
    edges = ~batch["token_mask"]  # boundary tokens and padding
    adv, _, _ = adversarial_attention(
        model, enc, alpha, probs, k=3, steps=20, lr=0.1, generator=torch.Generator().manual_seed(0)
    )
    assert torch.all(adv[edges[:, None, :].expand_as(adv)] == 0)
    torch.testing.assert_close(adv.sum(-1), torch.ones(len(TEXTS), 3, dtype=torch.double))
    permuted = permute_among_real(alpha, enc.mask, torch.rand(len(TEXTS), 7, alpha.shape[1]))
    assert torch.all(permuted[edges[:, None, :].expand_as(permuted)] == 0)
    assert torch.all(erase_each(model, enc, alpha, probs)[edges] == 0)


def brute_force_correlations(model, texts: list[list[int]]) -> list[tuple[float, float]]:
    """(τ(α, g), τ(α, Δŷ)) of each text over its own tokens: gradients by autograd on the wrapped text alone,
    leave-one-out by deleting each text token from <sos> text <eos> and re-running the model."""
    out = []
    for text in texts:
        single = token_batch([text], boundary=True)
        _, alpha, probs = predict(model, single)
        emb = model.embed(single).detach().requires_grad_(True)
        enc = model.encode(single, embedded=emb)
        p = model.probabilities(model.decode(enc, model.attend(enc).detach()))[0]
        (grad,) = torch.autograd.grad(p.max(), emb)
        g = (grad[0] * emb[0]).sum(-1).abs()[1:-1]
        loo = []
        for t in range(len(text)):
            deleted = model.probabilities(model(token_batch([text[:t] + text[t + 1 :]], boundary=True))[0])[0]
            loo.append(0.5 * float((deleted - probs[0]).abs().sum()))
        a = alpha[0, 1:-1].numpy()
        out.append((stats.kendalltau(a, g.detach().numpy()).statistic, stats.kendalltau(a, loo).statistic))
    return out


def test_jain_wallace_correlations_run_over_the_text_alone():
    model = tiny_model(num_classes=2, double=True, seed=4)
    texts = [t for t in TEXTS if len(t) > 1]
    batch = token_batch(texts, boundary=True)
    analysis = JainWallace(tests=["correlation"])
    with analysis_mode(model):
        frame = analysis.measure(model, StubData(batch), "test", np.arange(len(texts)), ["correlation"]).frame
    assert frame["length"].tolist() == [len(t) for t in texts]
    expected = brute_force_correlations(model, texts)
    np.testing.assert_allclose(frame["tau_grad"], [e[0] for e in expected], atol=1e-9)
    np.testing.assert_allclose(frame["tau_loo"], [e[1] for e in expected], atol=1e-9)


def test_sparsity_normalises_by_the_texts_length():
    """H̃(α) = −Σ α log α / log n with n the text's tokens; g_ŷ(x) and D_ŷ(x) are distributions over them."""
    model = tiny_model(num_classes=2, double=True, seed=5)
    texts = [t for t in TEXTS if len(t) > 1]
    batch = token_batch(texts, boundary=True)
    analysis = Sparsity(tests=["input"])
    with analysis_mode(model):
        frame = analysis.measure(model, StubData(batch), "test", np.arange(len(texts)), ["input"]).frame
    _, alpha, probs = predict(model, batch)
    loo = leave_one_out(model, batch, probs=probs, predicted=True)
    for r, text in enumerate(texts):
        a, d = alpha[r, inner(batch, r)].numpy(), loo[r, inner(batch, r)].numpy()
        n = len(text)
        assert frame.at[r, "length"] == n
        assert frame.at[r, "entropy_attention"] == pytest.approx(-(a * np.log(a)).sum() / math.log(n))
        d = d / d.sum()
        assert frame.at[r, "entropy_loo_input"] == pytest.approx(-(d[d > 0] * np.log(d[d > 0])).sum() / math.log(n))
        assert frame.at[r, "tau_attn_loo_input"] == pytest.approx(stats.kendalltau(a, d).statistic)


def test_faithfulness_keeps_the_boundary_tokens_in_every_kept_sequence():
    """Comprehensiveness deletes the rationale, sufficiency keeps it alone — <sos> and <eos> stay in both."""
    model = tiny_model(encoders.RNNEncoder, num_classes=2, double=True, seed=6)
    texts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [12, 13, 14, 15, 16]]
    batch = token_batch(texts, boundary=True)
    _, alpha, probs = predict(model, batch)
    order = torch.tensor(
        [[k for k in [3, 7, 1, 9, 2, 4, 5, 6, 8, 10]] + [0, 11], [2, 5, 1, 3, 4] + [0, 6, 7, 8, 9, 10, 11]]
    )  # text positions first, by importance
    comp, suff = removal_curves(model, batch, probs, {"m": order}, (0.2, 0.5))["m"]
    top = probs.argmax(-1)
    for r, text in enumerate(texts):
        for j, fraction in enumerate((0.2, 0.5)):
            k = math.ceil(fraction * len(text))
            chosen = set(order[r, :k].tolist())
            wrapped = [2, *text, 3]
            deleted = [w for i, w in enumerate(wrapped) if i not in chosen]
            alone = [w for i, w in enumerate(wrapped) if i in chosen or i in (0, len(wrapped) - 1)]
            for ids, got in ((deleted, comp[r, j]), (alone, suff[r, j])):
                sub = token_batch([ids[1:-1]], boundary=True)
                q = model.probabilities(model(sub)[0])[0]
                assert float(got) == pytest.approx(float(probs[r, top[r]] - q[top[r]]), abs=1e-12)


@pytest.mark.parametrize("setting", [["dataset.preprocessing.boundary_tokens=true"], ["recipe=jain_wallace"]])
def test_every_recorded_attention_is_zero_at_the_first_and_last_position(tmp_path, setting):
    cfg = compose_config(
        "trainer=debug",
        "logger=none",
        "dataset.source.n_train=96",
        "dataset.source.n_dev=32",
        "dataset.source.n_test=32",
        "model.network.embedding_dim=16",
        "encoder.hidden_size=8",
        "analysis=[]",
        *setting,
        "training.select_from_epoch=0",
    )
    run = tmp_path / "run"
    run_job(cfg, run)
    recorded = pd.read_parquet(run / ATTENTION)
    assert len(recorded) == 32
    for weights in recorded["attention"]:
        assert weights[0] == 0 and weights[-1] == 0 and abs(sum(weights) - 1) < 1e-5 and min(weights[1:-1]) > 0
