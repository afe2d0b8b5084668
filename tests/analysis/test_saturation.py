"""Confident predictions: in float32 σ(x) and softmax(z) round to exactly 1 once the predicted class's
margin passes ~17, and the gradient of ŷ vanishes (binary) or points the wrong way (multi-class). The
importance methods must give what float64 gives — the definition, computed where nothing saturates —
and no family may lose such an instance."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from attn_study.analysis.importance import (
    gradient_importance,
    gradient_norm_importance,
    hidden_gradient_importance,
    input_x_gradient,
    predict,
)
from attn_study.analysis.measuring import analysis_mode
from attn_study.families.faithfulness.callback import Faithfulness
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.families.serrano_smith.erasure import decision_gradient
from attn_study.families.sparsity.callback import Sparsity
from attn_study.models import encoders, outputs
from tests.helpers import StubData, tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3], [4, 9], [7, 7, 8, 3]]
MARGIN = 25.0  # float32 saturates (σ(25) == 1.0), float64 does not (1 − σ(25) ≈ 1.4e-11)


def confident(num_classes: int) -> tuple:
    """(float32 model, the same model in float64): the predicted class's margin ≈ MARGIN on every input."""
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=num_classes, seed=1)
    bias = torch.zeros_like(model.output.bias)
    bias[0] = MARGIN  # binary: one logit, x ≈ 25; multi-class: class 0 ahead by ≈ 25
    model.output.bias.copy_(bias)
    reference = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=num_classes, seed=1, double=True)
    reference.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    return model, reference


def definition(model, batch: dict, wrt: str = "embedded", detach_attention: bool = True) -> torch.Tensor:
    """∇ŷ_c of the predicted class's probability, straight from the definition: torch.sigmoid / softmax."""
    emb = model.embed(batch).detach().requires_grad_(True)
    enc = model.encode(batch, embedded=emb)
    if wrt == "hidden":
        enc.hidden = enc.hidden.detach().requires_grad_(True)
    alpha = model.attend(enc)
    logits = model.decode(enc, alpha.detach() if detach_attention else alpha)
    probs = torch.sigmoid(logits) if logits.shape[-1] == 1 else torch.softmax(logits, -1)
    top = probs.max(-1).values if logits.shape[-1] > 1 else torch.where(logits[:, 0] > 0, probs[:, 0], 1 - probs[:, 0])
    (grad,) = torch.autograd.grad(top.sum(), enc.hidden if wrt == "hidden" else emb)
    return grad


def normalised(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    x = x.double() * mask
    return x / x.sum(-1, keepdim=True)


@pytest.mark.parametrize("num_classes", [2, 3])
def test_the_definition_saturates_in_float32_and_not_in_float64(num_classes):
    """The premise of this file, checked: without care float32 loses every gradient (binary) or its
    direction (multi-class); float64 keeps them."""
    model, reference = confident(num_classes)
    batch = token_batch(SEQS)
    with torch.enable_grad():
        lost = definition(model, batch)
        kept = definition(reference, batch)
    if num_classes == 2:
        assert torch.all(lost == 0)
    else:
        cosine = torch.nn.functional.cosine_similarity(lost.double().flatten(1), kept.flatten(1), dim=1)
        assert cosine.min() < 0.99
    assert torch.all(kept.abs().flatten(1).amax(1) > 0)


@pytest.mark.parametrize("num_classes", [2, 3])
def test_importance_of_a_confident_model_equals_the_float64_definition(num_classes):
    model, reference = confident(num_classes)
    batch = token_batch(SEQS)
    mask = batch["mask"]
    emb64 = reference.embed(batch).detach()
    with torch.enable_grad():
        grad = definition(reference, batch)
        through = definition(reference, batch, detach_attention=False)
        hidden = definition(reference, batch, wrt="hidden", detach_attention=False)
    expected = {
        "gradient": normalised((grad * emb64).sum(-1).abs(), mask),
        "grad_norm": normalised(through.norm(dim=-1), mask),
        "hidden": normalised(hidden.norm(dim=-1), mask),
    }
    got = {
        "gradient": gradient_importance(model, batch),
        "grad_norm": gradient_norm_importance(model, batch),
        "hidden": normalised(hidden_gradient_importance(model, batch), mask),
    }
    for name in expected:
        assert not torch.isnan(got[name]).any(), name
        torch.testing.assert_close(got[name].double(), expected[name], rtol=2e-4, atol=1e-6, msg=name)
    # signed rankings: input × gradient and the decision gradient of the erasure tests
    ixg = input_x_gradient(model, batch, predict(model, batch)[2].argmax(-1))
    ixg_ref = (through * emb64).sum(-1) * mask
    for r, seq in enumerate(SEQS):
        n = len(seq)
        if n > 1:
            assert torch.equal(ixg[r, :n].argsort(), ixg_ref[r, :n].argsort())
    enc, alpha, _ = predict(model, batch)
    enc64, alpha64, probs64 = predict(reference, batch)
    with torch.enable_grad():
        leaf = alpha64.clone().requires_grad_(True)
        logits = reference.decode(enc64, leaf)
        probs = torch.sigmoid(logits) if num_classes == 2 else torch.softmax(logits, -1)
        top = torch.where(logits[:, 0] > 0, probs[:, 0], 1 - probs[:, 0]) if num_classes == 2 else probs.max(-1).values
        (d_ref,) = torch.autograd.grad(top.sum(), leaf)
    d = decision_gradient(model, enc, alpha)
    for r, seq in enumerate(SEQS):
        n = len(seq)
        if n > 1:
            assert torch.equal(d[r, :n].argsort(), d_ref[r, :n].argsort())
            assert torch.equal(d[r, :n].sign(), d_ref[r, :n].sign())


def test_probabilities_keep_their_gradient_in_float32():
    """ŷ = exp(log ŷ): its gradient at a margin of 25 equals float64's (σ's rounds to 0)."""
    for logits in (torch.tensor([[25.0], [-30.0], [0.3]]), torch.tensor([[25.0, 0.0, -2.0], [1.0, 30.0, 0.0]])):
        x = logits.clone().requires_grad_(True)
        x64 = logits.double().requires_grad_(True)
        for c in range(2):
            (g,) = torch.autograd.grad(outputs.probabilities(x)[:, c].sum(), x)
            ref = torch.sigmoid(x64) if logits.shape[1] == 1 else torch.softmax(x64, -1)
            if logits.shape[1] == 1:
                ref = torch.cat([1 - ref, ref], -1)
            (g64,) = torch.autograd.grad(ref[:, c].sum(), x64)
            torch.testing.assert_close(g.double(), g64, rtol=1e-5, atol=1e-30)
        odds = outputs.log_odds(logits)
        p = torch.sigmoid(logits.double()) if logits.shape[1] == 1 else torch.softmax(logits.double(), -1)
        p = torch.cat([1 - p, p], -1) if logits.shape[1] == 1 else p
        top = p.max(-1).values
        torch.testing.assert_close(odds.double(), torch.log(top) - torch.log1p(-top), rtol=1e-5, atol=1e-5)


FAMILIES = {
    "jain_wallace": partial(JainWallace, tests=["correlation"]),
    "sparsity": partial(Sparsity, tests=["input", "intermediate", "input_hidden"]),
    "faithfulness": partial(Faithfulness, tests=["removal"], ig_steps=8),
    "serrano_smith": partial(SerranoSmith, tests=["single", "multi"]),
}


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("num_classes", [2, 3])
def test_no_family_loses_a_confident_instance(family, num_classes):
    """Every instance with two tokens or more is measured (one-token instances are left out and counted as
    too short), and the drop counts say so."""
    model, _ = confident(num_classes)
    batch = token_batch(SEQS)
    data = StubData(batch, num_classes)
    analysis = FAMILIES[family](batch_size=4)
    with analysis_mode(model):
        measured = analysis.measure(model, data, "test", np.arange(len(SEQS)), list(analysis.tests))
    summary = analysis.summarise(measured, analysis.tests)
    short = sum(len(s) < 2 for s in SEQS)
    measurable = len(SEQS) - short
    if family == "jain_wallace":
        for name in ("tau_grad", "tau_loo", "tau_grad_loo"):
            assert summary[f"jw/{name}/n"] == measurable
            assert summary[f"jw/dropped/{name}/total"] == short == summary[f"jw/dropped/{name}/too_short"]
    elif family == "sparsity":
        for name in ("g_input", "loo_input", "g_intermediate", "loo_intermediate", "g_hidden"):
            assert summary[f"sp/entropy/{name}/n"] == measurable, name
            assert summary[f"sp/dropped/entropy_{name}/total"] == short
        assert summary["sp/dropped/entropy_g_hidden/rows"] == 0
        for name in ("attn_g_input", "attn_g_intermediate"):
            assert summary[f"sp/tau/{name}/n"] == measurable
    elif family == "faithfulness":
        assert summary["ff/dropped/too_short"] == short
        for method in ("gradient", "grad_norm", "input_x_gradient", "integrated_gradients"):
            assert summary[f"ff/{method}/constant_scores"] == 0, method
            assert summary[f"ff/{method}/comprehensiveness/aopc/n"] == measurable
    else:
        assert summary["ss/excluded"] == short
        assert summary["ss/constant_scores/gradient"] == 0
        assert summary["ss/constant_scores/grad_attention"] == 0
