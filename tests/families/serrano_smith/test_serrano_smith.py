"""Serrano & Smith erasure tests: erasure, rankings, batched first flips against brute force, end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.analysis.erasure import erased_probabilities, renormalise_erased, zero_vector_logits
from attn_study.analysis.importance import predict
from attn_study.analysis.measuring import Measured
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.families.serrano_smith.erasure import (
    decision_gradient,
    first_flips,
    random_other,
    rank_items,
    ranking_scores,
    single_weight,
)
from attn_study.families.serrano_smith.keys import RANKINGS, ss_rankings
from attn_study.job.run import run as run_job
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier
from tests.helpers import TINY, tiny_model, token_batch

# ------------------------------------------------------------------------------------------------
# erasure
# ------------------------------------------------------------------------------------------------


def uniform(mask: torch.Tensor, seed: int) -> torch.Tensor:
    """Uniform draws (B, T) as the random ranking and the random item use them."""
    return torch.rand(mask.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.double)


def test_erasure_renormalises_by_hand_and_erasing_everything_pools_zero():
    model = tiny_model(double=True, num_classes=3)
    with torch.no_grad():
        model.output.bias.copy_(torch.tensor([0.3, -0.2, 0.1], dtype=torch.double))
    batch = token_batch([[5, 6, 7], [8, 9]])
    enc, alpha, probs = predict(model, batch)
    a = alpha[0]
    removed = torch.zeros(2, 3, 3, dtype=torch.bool)
    removed[0, 0, 1] = True  # erase item 1
    removed[0, 1, [0, 1]] = True  # erase items 0 and 1
    removed[0, 2, :] = True  # erase everything
    removed[1, 0, 0] = True
    removed[1, 1, [0, 1]] = True  # everything (instance 1 has 2 items)
    erased, empty = renormalise_erased(alpha, removed)
    expected = torch.stack([a[0] / (a[0] + a[2]), torch.zeros(()), a[2] / (a[0] + a[2])])
    torch.testing.assert_close(erased[0, 0], expected)
    torch.testing.assert_close(erased[0, 1], torch.tensor([0.0, 0.0, 1.0], dtype=torch.double))
    torch.testing.assert_close(erased[1, 0], torch.tensor([0.0, 1.0, 0.0], dtype=torch.double))
    assert empty.tolist() == [[False, False, True], [False, True, False]]
    assert torch.all(erased[0, 2] == 0)

    q = erased_probabilities(model, enc, alpha, removed)
    w, b = model.output.weight, model.output.bias
    h = enc.hidden[0]
    by_hand = torch.softmax(w @ (expected[0] * h[0] + expected[2] * h[2]) + b, -1)
    torch.testing.assert_close(q[0, 0], by_hand)
    torch.testing.assert_close(q[0, 1], torch.softmax(w @ h[2] + b, -1))
    # all removed = the zero pooled vector: softmax(bias), and decode_pooled of zeros
    zero = model.probabilities(model.decode_pooled(torch.zeros(1, h.shape[-1], dtype=torch.double)))[0]
    torch.testing.assert_close(q[0, 2], torch.softmax(b, -1))
    torch.testing.assert_close(q[1, 1], zero)
    torch.testing.assert_close(model.probabilities(zero_vector_logits(model, enc)), torch.softmax(b, -1).expand(2, 3))
    assert not torch.allclose(q[0, 2], q[0, 1])
    # single-weight erasure: JS and flips of the erased outputs against p
    js, flip = single_weight(model, enc, alpha, probs, torch.tensor([[1, 0], [0, 1]]))
    p = probs[0]
    m = 0.5 * (p + q[0, 0])
    js_hand = 0.5 * (p * (p / m).log()).sum() + 0.5 * (q[0, 0] * (q[0, 0] / m).log()).sum()
    torch.testing.assert_close(js[0, 0], js_hand)
    assert flip[0, 0].item() == (q[0, 0].argmax() != p.argmax()).item()


# ------------------------------------------------------------------------------------------------
# a hand-built noenc model whose decoder is linear in the pooled vector
# ------------------------------------------------------------------------------------------------

# token id → (sentiment, salience): the decoder reads the sentiment z = Σ α_t s_t + b, the attention
# score is 3·tanh(salience)
TOKENS = {1: (1.0, 1.0), 2: (-1.0, 2.0), 3: (1.0, 2.0), 4: (-1.0, 0.0), 5: (1.0, 0.0), 6: (-1.0, 1.0)}
BIAS = -0.1


def hand_model():
    model = AttentionClassifier(
        vocab_size=7,
        num_classes=2,
        encoder=encoders.NoEncoder,
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=2,
    )
    with torch.no_grad():
        model.embedding.weight.zero_()
        for i, e in TOKENS.items():
            model.embedding.weight[i] = torch.tensor(e)
        model.scorer.w1.weight.copy_(torch.tensor([[0.0, 1.0]]))
        model.scorer.w1.bias.zero_()
        model.scorer.v.weight.fill_(3.0)
        model.output.weight.copy_(torch.tensor([[1.0, 0.0]]))
        model.output.bias.fill_(BIAS)
    return model.double().eval().requires_grad_(False)


def brute_force_flip(ids, order):
    """Number of items erased (in ``order``) at the first flip of sign(Σ α_t s_t + b), by hand."""
    sent = [TOKENS[i][0] for i in ids]
    weights = [math.exp(3 * math.tanh(TOKENS[i][1])) for i in ids]
    alpha = [w / sum(weights) for w in weights]

    def decide(z):  # class 1 iff the single sigmoid logit is positive
        return int(z > 0)

    pred = decide(sum(a * s for a, s in zip(alpha, sent)) + BIAS)
    for k in range(1, len(ids) + 1):
        kept = [t for t in range(len(ids)) if t not in order[:k]]
        mass = sum(alpha[t] for t in kept)
        z = BIAS if k == len(ids) else sum(alpha[t] / mass * sent[t] for t in kept) + BIAS
        if decide(z) != pred:
            return k, sum(alpha[t] for t in order[:k])
    return 0, 0.0


def hand_order(values):
    return sorted(range(len(values)), key=lambda t: (-values[t], t))


def test_the_reports_rankings_are_those_of_the_summary_with_a_never_flip_count():
    summary = {
        "ss/multi/gradient/never_flip": 3,
        "ss/multi/attention/frac_removed/median": 0.5,
        "ss/multi/attention/never_flip": 1,
        "ss/multi/random/frac_removed/median": 0.9,  # no never-flip count: not a ranking of this run's table
        "ss/multi/grad_faster_than_attn": 0.7,  # a statistic beside the rankings, not one
        "ss/single/yes_no/gradient": 0.2,
    }
    assert ss_rankings(summary) == ["attention", "gradient"]


def test_decision_flips_match_brute_force_on_a_linear_noenc_model():
    model = hand_model()
    rng = np.random.default_rng(0)
    seqs = [[2, 1, 1, 1], [2, 4, 5, 5, 5], [3, 3, 4, 4, 4]]
    seqs += [rng.integers(1, 7, rng.integers(1, 9)).tolist() for _ in range(40)]
    batch = token_batch(seqs)
    enc, alpha, probs = predict(model, batch)
    pred = probs.argmax(-1)
    grad = decision_gradient(model, enc, alpha)
    for name in RANKINGS:
        order = rank_items(ranking_scores(name, alpha, grad, uniform(batch["mask"], 1)), batch["mask"])
        removed, flipped, mass = first_flips(model, enc, alpha, order, pred, steps_per_call=2)
        for b, ids in enumerate(seqs):
            sent = [TOKENS[i][0] for i in ids]
            a = alpha[b, : len(ids)].tolist()
            sign = 1.0 if pred[b] == 1 else -1.0  # ∂d/∂α_t = ±σ'(z)·s_t
            by_hand = {
                "attention": hand_order(a),
                "gradient": hand_order([sign * s for s in sent]),
                "grad_attention": hand_order([sign * s * x for s, x in zip(sent, a)]),
                "random": order[b, : len(ids)].tolist(),
            }[name]
            assert order[b, : len(ids)].tolist() == by_hand, (name, ids)
            k, m = brute_force_flip(ids, by_hand)
            assert removed[b].item() == k and flipped[b].item() == (k > 0), (name, ids)
            assert mass[b].item() == pytest.approx(m, abs=1e-9)
    # the first example by hand: the opposing high-attention word goes first under attention, so the
    # decision only flips at the zero vector (z = b < 0); the gradient erases a supporting word first
    order_att = rank_items(alpha, batch["mask"])
    order_grad = rank_items(grad, batch["mask"])
    r_att, _, m_att = first_flips(model, enc, alpha, order_att, pred)
    r_grad, _, m_grad = first_flips(model, enc, alpha, order_grad, pred)
    assert pred[0] == 1 and r_att[0] == 4 and r_grad[0] == 1
    assert m_att[0].item() == pytest.approx(1.0)
    e1, e2 = math.exp(3 * math.tanh(1)), math.exp(3 * math.tanh(2))
    assert m_grad[0].item() == pytest.approx(e1 / (3 * e1 + e2))


# ------------------------------------------------------------------------------------------------
# gradient and rankings
# ------------------------------------------------------------------------------------------------


def test_decision_gradient_matches_finite_differences():
    model = tiny_model(double=True, num_classes=4, seed=3)
    batch = token_batch([[5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15]])
    enc, alpha, probs = predict(model, batch)
    grad = decision_gradient(model, enc, alpha)
    pred = probs.argmax(-1)
    h = 1e-6
    expected = torch.zeros_like(alpha)
    for b in range(3):
        for t in range(int(batch["lengths"][b])):
            step = torch.zeros_like(alpha)
            step[b, t] = h
            up = model.probabilities(model.decode(enc, alpha + step))[b, pred[b]]
            down = model.probabilities(model.decode(enc, alpha - step))[b, pred[b]]
            expected[b, t] = (up - down) / (2 * h)
    d = probs.max(-1).values[:, None]  # taken through d's log-odds: ∂d/∂α / (d (1 − d))
    torch.testing.assert_close(grad * d * (1 - d), expected, atol=1e-8, rtol=1e-5)
    assert torch.all(grad[~batch["mask"]] == 0) and grad.abs().max() > 1e-4


def test_rankings_never_select_padding_and_random_is_reproducible():
    mask = token_batch([[1] * 7, [1, 1, 1], [1], [1] * 5])["mask"]
    lengths = mask.sum(-1)
    alpha = torch.rand(mask.shape, dtype=torch.double)
    alpha = torch.where(mask, alpha, torch.full_like(alpha, 5.0))  # padding "wins" if not masked
    grad = torch.where(mask, torch.randn(mask.shape, dtype=torch.double), torch.full_like(alpha, 9.0))
    for name in RANKINGS:
        order = rank_items(ranking_scores(name, alpha, grad, uniform(mask, 0)), mask)
        for b in range(4):
            n = int(lengths[b])
            assert sorted(order[b, :n].tolist()) == list(range(n)), name
            assert all(not mask[b, t] for t in order[b, n:]), name
    # ties keep position order; NaN goes last among the real items
    scores = torch.tensor([[1.0, 2.0, 2.0, float("nan"), 2.0, 0.0]])
    assert rank_items(scores, torch.ones(1, 6, dtype=torch.bool)).tolist() == [[1, 2, 4, 0, 5, 3]]
    # random: same seed, same ranking; another seed, another
    orders = [rank_items(ranking_scores("random", alpha, None, uniform(mask, s)), mask) for s in (4, 4, 5)]
    assert torch.equal(orders[0], orders[1]) and not torch.equal(orders[0], orders[2])
    # the random other item: real, never the top item, uniform-ish, reproducible
    tops = torch.stack([rank_items(alpha, mask)[:, 0], rank_items(grad, mask)[:, 0]], 1)
    draws = torch.stack([random_other(tops, mask, uniform(mask, s)) for s in range(400)])  # (400, B, 2)
    for b in (0, 1, 3):
        for j in range(2):
            picked = draws[:, b, j]
            assert torch.all(mask[b, picked]) and torch.all(picked != tops[b, j])
            assert len(set(picked.tolist())) == int(lengths[b]) - 1  # every other item turns up
    again = torch.stack([random_other(tops, mask, uniform(mask, s)) for s in range(3)])
    assert torch.equal(again, draws[:3])


# ------------------------------------------------------------------------------------------------
# batched multi-weight test against a per-instance Python reference
# ------------------------------------------------------------------------------------------------


def reference_first_flip(model, enc, alpha, order, b, pred):
    """(removed, mass) for instance b: a Python loop over prefixes, one decode_pooled per prefix."""
    items = [t for t in order[b].tolist() if enc.mask[b, t]]
    n = len(items)
    for k in range(1, n + 1):
        kept = items[k:]
        mass = sum(alpha[b, t] for t in kept) if kept else torch.zeros((), dtype=alpha.dtype)
        context = torch.zeros(enc.hidden.shape[-1], dtype=alpha.dtype)
        if k < n and mass > 0:
            for t in kept:
                context = context + alpha[b, t] / mass * enc.hidden[b, t]
        out = model.probabilities(model.decode_pooled(context[None]))[0]
        if out.argmax() != pred[b]:
            return k, float(sum(alpha[b, t] for t in items[:k]))
    return 0, 0.0


@pytest.mark.parametrize("steps_per_call", [1, 3, 1000])
def test_batched_first_flips_equal_a_per_instance_reference(steps_per_call):
    model = tiny_model(double=True, num_classes=4, seed=2, dim=8)
    with torch.no_grad():
        model.output.weight.mul_(6.0)  # a decisive decoder: flips happen before the zero vector
    rng = np.random.default_rng(1)
    seqs = [rng.integers(1, 25, n).tolist() for n in [1, 2, 3, 6, 9, 12, 4, 7, 2, 10]]
    batch = token_batch(seqs)
    enc, _, _ = predict(model, batch)
    enc.mask = enc.mask.clone()
    enc.mask[3, 2] = enc.mask[5, 0] = False  # attended items ≠ the token mask (as sentences would be)
    alpha = model.attend(enc)
    pred = model.probabilities(model.decode(enc, alpha)).argmax(-1)
    grad = decision_gradient(model, enc, alpha)
    early = 0
    for name in RANKINGS:
        order = rank_items(ranking_scores(name, alpha, grad, uniform(enc.mask, 7)), enc.mask)
        removed, flipped, mass = first_flips(model, enc, alpha, order, pred, steps_per_call=steps_per_call)
        for b in range(len(seqs)):
            k, m = reference_first_flip(model, enc, alpha, order, b, pred)
            assert (removed[b].item(), flipped[b].item()) == (k, k > 0), (name, b)
            assert mass[b].item() == pytest.approx(m, abs=1e-9), (name, b)
            early += 0 < k < int(enc.mask[b].sum())
        assert not torch.any(order[3, :5] == 2) and not torch.any(order[5, :11] == 0)
    assert early >= 5  # the test exercises flips before the zero vector


def test_summary_tables_and_paired_comparison_from_a_frame():
    nan = float("nan")
    frame = pd.DataFrame(
        {
            "length": [1, 3, 4, 5, 6, 7],
            "delta_js": [nan, 0.2, -0.1, 0.3, 0.0, 0.1],
            "flip_top": [nan, 1, 1, 0, 0, 1],
            "flip_random": [nan, 1, 0, 1, 0, 0],
            "flip_top_grad": [nan, 0, 0, 0, 0, 0],
            "flip_random_grad": [nan, 0, 0, 0, 0, 1],
            "flip_top_grad_attention": [nan, 1, 1, 1, 1, 1],
            "flip_random_grad_attention": [nan, 0, 0, 0, 0, 0],
            "attention_removed": [nan, 2, 3, nan, 1, 4],
            "gradient_removed": [nan, 1, 3, 2, 2, nan],
            "grad_attention_removed": [nan, 1, 1, 1, nan, nan],
        }
    )
    for r in ("attention", "gradient", "grad_attention"):
        frame[f"{r}_frac"] = frame[f"{r}_removed"] / frame["length"]
        frame[f"{r}_mass"] = frame[f"{r}_frac"]
    s = SerranoSmith(rankings=["attention", "gradient", "grad_attention"]).summarise(
        Measured(frame, {"single": 1.0}), ["single", "multi"]
    )
    assert s["ss/single/excluded"] == 1 and s["ss/n_instances"] == 6
    assert [s[f"ss/single/flip_table/{c}"] for c in ("yes_yes", "yes_no", "no_yes", "no_no")] == pytest.approx(
        [20, 40, 20, 20]
    )
    assert s["ss/single_grad/flip_table/no_yes"] == pytest.approx(20)
    assert s["ss/single_grad_attention/flip_table/yes_no"] == pytest.approx(100)
    assert s["ss/single/neg_delta_js_frac"] == pytest.approx(0.2)
    # attention vs gradient: both flip on rows 1, 2, 4 → gradient faster once, attention once, one tie
    assert s["ss/multi/grad_faster_than_attn"] == pytest.approx(1 / 3)
    assert s["ss/multi/attn_faster_than_grad"] == pytest.approx(1 / 3)
    assert s["ss/multi/grad_vs_attn_ratio"] == 1.0
    assert (
        s["ss/multi/grad_attention_faster_than_attn"] == 1.0 and s["ss/multi/grad_attention_vs_attn_ratio"] == math.inf
    )
    assert s["ss/multi/attention/never_flip_frac"] == pytest.approx(0.2)
    assert s["ss/multi/gradient/frac_removed/median"] == pytest.approx(np.median([1 / 3, 3 / 4, 2 / 5, 2 / 6]))
    assert s["ss/seconds/single"] == 1.0


# ------------------------------------------------------------------------------------------------
# end to end
# ------------------------------------------------------------------------------------------------


def test_serrano_smith_after_training(make_cfg, tmp_path):
    cfg = make_cfg(
        *TINY,
        "logger=csv",
        "encoder=gru",
        "encoder.hidden_size=8",
        "analysis=[serrano_smith]",
        "analysis.serrano_smith.max_instances=24",
        "analysis.serrano_smith.batch_size=10",
        "analysis.serrano_smith.perturbations_per_eval=6",
    )
    run = tmp_path / "run"
    summary = run_job(cfg, run)
    folder = run / "analysis" / "serrano_smith"
    for name in (
        "instances.parquet",
        "summary.json",
        "fig3_delta_js_vs_delta_alpha.png",
        "fig4_negative_delta_js.png",
        "fig5_frac_removed.png",
        "fig11_mass_removed.png",
    ):
        assert (folder / name).is_file(), name
    frame = pd.read_parquet(folder / "instances.parquet")
    assert len(frame) == 24 and frame["uid"].is_unique
    columns = [
        "index",
        "uid",
        "length",
        "label",
        "prediction",
        "max_attention",
        "delta_js",
        "delta_alpha",
        "flip_top",
        "flip_random",
    ] + [f"{r}_{w}" for r in RANKINGS for w in ("removed", "frac", "mass")]
    assert all(c in frame for c in columns)
    keys = [
        f"ss/{t}/flip_table/{c}"
        for t in ("single", "single_grad", "single_grad_attention")
        for c in ("yes_yes", "yes_no", "no_yes", "no_no")
    ]
    keys += [
        "ss/single/neg_delta_js_frac",
        "ss/single/excluded",
        "ss/n_instances",
        "ss/seconds/single",
        "ss/seconds/multi",
        "ss/multi/grad_faster_than_attn",
        "ss/multi/attn_faster_than_grad",
        "ss/multi/grad_vs_attn_ratio",
        "ss/multi/grad_attention_faster_than_attn",
        "ss/multi/attn_faster_than_grad_attention",
    ]
    keys += [
        f"ss/multi/{r}/{w}/{s}" for r in RANKINGS for w in ("frac_removed", "mass_removed") for s in ("median", "mean")
    ] + [f"ss/multi/{r}/never_flip_frac" for r in RANKINGS]
    on_disk = json.loads((run / "summary.json").read_text())
    for key in keys:
        assert key in summary and key in on_disk, key
    table = sum(summary[f"ss/single/flip_table/{c}"] for c in ("yes_yes", "yes_no", "no_yes", "no_no"))
    assert table == pytest.approx(100.0)
    ok = frame.length >= 2
    assert summary["ss/single/excluded"] == int((~ok).sum())
    assert frame.loc[ok, "delta_js"].notna().all() and (frame.loc[ok, "delta_alpha"] >= 0).all()
    frac = frame["attention_frac"].dropna()
    assert ((frac > 0) & (frac <= 1)).all()
    assert not list((run / "analysis").glob(".*partial"))


def test_a_two_item_text_is_erased_and_a_one_item_text_is_not():
    """§4 on a text of two items, by hand: erasing the top-attended item leaves all the attention on the other
    (and the random other item is that other one), so js_top = JS(p, output of α one-hot on the other item),
    js_random = JS(p, output of α one-hot on the top item), Δα = |α₀ − α₁|. A one-item text has no other item:
    its single-erasure columns are NaN."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.stats import jsd
    from tests.helpers import StubData

    model = tiny_model(double=True, num_classes=3, seed=2)
    texts = [[8, 9], [7], [5, 6, 7]]
    family = SerranoSmith(batch_size=3, tests=["single"])
    with analysis_mode(model):
        frame = family.measure(model, StubData(token_batch(texts), num_classes=3), "test", np.arange(3), ["single"])
        frame = frame.frame.set_index("index")
        enc, alpha, probs = predict(model, token_batch([texts[0]]))
        top = int(alpha[0].argmax())
        one_hot = torch.eye(2, dtype=torch.double)
        on_other, on_top = (model.probabilities(model.decode(enc, one_hot[[k]])) for k in (1 - top, top))
    assert frame.loc[0, "js_top"] == pytest.approx(float(jsd(probs, on_other)[0]), abs=1e-12)
    assert frame.loc[0, "js_random"] == pytest.approx(float(jsd(probs, on_top)[0]), abs=1e-12)
    assert frame.loc[0, "delta_alpha"] == pytest.approx(abs(float(alpha[0, 0] - alpha[0, 1])), abs=1e-12)
    assert frame.loc[0, "flip_top"] == float(on_other.argmax() != probs.argmax())
    assert frame.loc[1, ["delta_js", "delta_alpha", "js_top", "js_random", "flip_top", "flip_random"]].isna().all()
    assert frame.loc[2, ["delta_js", "js_top"]].notna().all()
