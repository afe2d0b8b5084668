"""ERASER faithfulness metrics against closed forms and brute force; integrated gradients' completeness;
the family end to end on the synthetic task with its known rationales."""

from __future__ import annotations

import itertools
import json
import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from attn_study.analysis.importance import integrated_gradients, kept_probabilities, kept_sub_batch, predict
from attn_study.families.faithfulness.callback import Faithfulness
from attn_study.families.faithfulness.measures import (
    chance_areas,
    hard_rationale_scores,
    harmonic_f1,
    paired_with_attention,
    precision_recall_areas,
    rank_of,
    ranking,
    removal_curves,
    top_counts,
)
from attn_study.models import attention, encoders
from attn_study.stats import bootstrap_ci_of
from tests import reference as ref
from tests.helpers import TINY, tiny_model, token_batch

#: the family's streams of the tie-breaking keys and the soft metrics' masks (analysis.seeding)
TIES, SOFT = Faithfulness.STREAMS["ties"], Faithfulness.STREAMS["soft"]

FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.5)
SIGNAL = 7  # the one token the closed-form model's output depends on


def one_token_model(s: float = 4.0, b: float = -1.0):
    """noenc, uniform attention (a zero dot-scorer query), e_7 = (1, 0, …), every other embedding 0,
    one logit z = b + s · (#7 among the kept tokens) / (number of kept tokens): only token 7 matters."""
    model = tiny_model(encoders.NoEncoder, scorer=attention.DotScorer, double=True)
    model.scorer.query.zero_()
    model.embedding.weight.zero_()
    model.embedding.weight[SIGNAL, 0] = 1.0
    model.output.weight.zero_()
    model.output.weight[0, 0] = s
    model.output.bias.fill_(b)
    return model


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_comprehensiveness_and_sufficiency_closed_form():
    s, b = 4.0, -0.2
    model = one_token_model(s, b)
    seqs = [[3, 4, SIGNAL, 5, 6, 8, 9, 10, 11, 12], [SIGNAL, 3, 4]]
    batch = token_batch(seqs)
    _, _, probs = predict(model, batch)
    first = torch.tensor([[2, 0, 1, 3, 4, 5, 6, 7, 8, 9], [0, 1, 2, 0, 0, 0, 0, 0, 0, 0]])  # token 7 ranked first
    last = torch.tensor([[0, 1, 3, 4, 5, 6, 7, 8, 9, 2], [1, 2, 0, 0, 0, 0, 0, 0, 0, 0]])  # token 7 ranked last
    last[1, 3:] = torch.arange(3, 10)
    first[1, 3:] = torch.arange(3, 10)
    curves = removal_curves(model, batch, probs, {"first": first, "last": last}, FRACTIONS, chunk_size=3)
    for r, seq in enumerate(seqs):
        n = len(seq)
        full = sigmoid(b + s / n)
        assert probs[r, 1].item() == pytest.approx(full) and full > 0.5  # ŷ = 1
        for j, k in enumerate(FRACTIONS):
            size = math.ceil(k * n)
            # signal removed first: nothing of it is left / the rationale holds it alone with size-1 others
            assert curves["first"][0][r, j].item() == pytest.approx(full - sigmoid(b))
            assert curves["first"][1][r, j].item() == pytest.approx(full - sigmoid(b + s / size))
            # signal ranked last: never in r_k (size < n), it stays among the n - size kept tokens
            assert curves["last"][0][r, j].item() == pytest.approx(full - sigmoid(b + s / (n - size)))
            assert curves["last"][1][r, j].item() == pytest.approx(full - sigmoid(b))


def test_one_token_instances_have_nothing_to_remove():
    model = one_token_model()
    batch = token_batch([[SIGNAL], [SIGNAL, 3]])
    probs = predict(model, batch)[2]
    order = torch.tensor([[0, 1], [0, 1]])
    comp, suff = removal_curves(model, batch, probs, {"m": order}, FRACTIONS)["m"]
    assert torch.isnan(comp[0]).all() and torch.isnan(suff[0]).all()
    assert not torch.isnan(comp[1]).any()


def test_top_counts_are_exact_ceilings():
    lengths = torch.arange(1, 301)
    for k in FRACTIONS:
        expected = torch.tensor([math.ceil(round(k * 100) * n / 100) for n in lengths.tolist()])
        assert torch.equal(top_counts(lengths, k), expected), k
    assert top_counts(torch.tensor([30]), 0.1).item() == 3  # 0.1 * 30 = 3.0000000000000004 in floats


@pytest.mark.parametrize(
    "encoder",
    [
        encoders.NoEncoder,
        partial(encoders.RNNEncoder, hidden_size=4),
        partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=4),
    ],
)
def test_kept_probabilities_equal_running_each_shortened_text(encoder):
    model = tiny_model(encoder, double=True)
    seqs = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]
    batch = token_batch(seqs)
    gen = torch.Generator().manual_seed(0)
    inst = torch.tensor([0, 0, 1, 2, 2, 1, 0])
    keep = (torch.rand(len(inst), 6, generator=gen) < 0.6) & batch["mask"][inst]
    keep[:, 0] |= batch["mask"][inst, 0]  # every row keeps at least one token
    got = kept_probabilities(model, batch, inst, keep, chunk_size=2)
    for n, i in enumerate(inst.tolist()):
        kept_ids = [t for t, k in zip(seqs[i], keep[n].tolist()) if k]
        expected = model.probabilities(model(token_batch([kept_ids]))[0])[0]
        torch.testing.assert_close(got[n], expected)
    sub = kept_sub_batch(batch, inst, keep)
    assert sub["ids"][0].tolist()[: int(sub["lengths"][0])] == [t for t, k in zip(seqs[0], keep[0].tolist()) if k]


def test_ranking_orders_by_score_then_tiebreak_and_puts_non_text_last():
    scores = torch.tensor([[0.1, 0.5, 0.5, 0.2, 9.0]])
    text = torch.tensor([[True, True, True, True, False]])
    tiebreak = torch.tensor([[0.3, 0.1, 0.9, 0.5, 0.7]], dtype=torch.float64)
    order = ranking(scores, text, tiebreak)
    assert order.tolist() == [[2, 1, 3, 0, 4]]
    assert rank_of(order).tolist() == [[3, 1, 0, 2, 4]]


def pr_curve_by_hand(scores: list[float], truth: list[bool]) -> tuple[float, float]:
    """(AUPRC, AP) as ERASER's scorer gets them from scikit-learn, written out threshold by threshold:
    every distinct score is a threshold (descending); the curve starts at (recall, precision) = (0, 1)."""
    positives = sum(truth)
    points = [(0.0, 1.0)]
    for threshold in sorted(set(scores), reverse=True):
        tp = sum(1 for s, y in zip(scores, truth) if s >= threshold and y)
        fp = sum(1 for s, y in zip(scores, truth) if s >= threshold and not y)
        points.append((tp / positives, tp / (tp + fp)))
    auprc = sum((r1 - r0) * (p1 + p0) / 2 for (r0, p0), (r1, p1) in zip(points, points[1:]))
    ap = sum((r1 - r0) * p1 for (r0, _), (r1, p1) in zip(points, points[1:]))
    return auprc, ap


def test_auprc_and_ap_with_tied_scores_worked_by_hand():
    """Scores (0.9, 0.8, 0.8, 0.1, 0.5), truth (no, yes, no, no, yes): thresholds 0.9 → (R, P) = (0, 0);
    0.8 (two tied tokens enter together) → (1/2, 1/3); 0.5 → (1, 1/2); 0.1 → (1, 2/5). From (0, 1):
    AUPRC = ½·(0 + ⅓)/2 + ½·(⅓ + ½)/2 = 7/24; AP = ½·⅓ + ½·½ = 5/12 (scikit-learn gives the same)."""
    scores = torch.tensor([[0.9, 0.8, 0.8, 0.1, 0.5]], dtype=torch.double)
    truth = torch.tensor([[False, True, False, False, True]])
    auprc, ap = precision_recall_areas(scores, truth, torch.ones_like(truth))
    assert auprc.item() == pytest.approx(7 / 24) and ap.item() == pytest.approx(5 / 12)


def test_auprc_and_ap_equal_the_threshold_by_threshold_definition():
    gen = torch.Generator().manual_seed(1)
    truth = torch.rand(60, 12, generator=gen) < 0.3
    truth[1:, 0] = True
    truth[0] = False
    text = torch.ones_like(truth)
    text[5:, 10:] = False  # shorter texts: the rest is never scored
    scores = torch.randint(0, 4, (60, 12), generator=gen).double()  # many ties
    scores[30:] = torch.rand(30, 12, generator=gen, dtype=torch.double)  # none
    auprc, ap = precision_recall_areas(scores, truth, text)
    assert math.isnan(auprc[0]) and math.isnan(ap[0])
    for r in range(1, 60):
        n = int(text[r].sum())
        if not truth[r, :n].any():
            assert math.isnan(auprc[r])
            continue
        expected = pr_curve_by_hand(scores[r, :n].tolist(), truth[r, :n].tolist())
        assert (auprc[r].item(), ap[r].item()) == pytest.approx(expected)


@pytest.mark.parametrize(("length", "positives"), [(1, 1), (2, 1), (2, 2), (5, 2), (6, 3), (7, 1), (6, 6)])
def test_chance_levels_are_the_means_over_every_permutation(length, positives):
    truth = [True] * positives + [False] * (length - positives)
    ranks = [float(length - i) for i in range(length)]  # distinct scores: a ranking
    every = np.array([pr_curve_by_hand(ranks, list(p)) for p in itertools.permutations(truth)])
    auprc, ap = chance_areas(torch.tensor([length]), torch.tensor([positives]))
    assert (auprc.item(), ap.item()) == pytest.approx(tuple(every.mean(0)))
    assert all(math.isnan(x.item()) for x in chance_areas(torch.tensor([4]), torch.tensor([0])))


def test_hard_rationale_scores_worked_by_hand():
    """Text of 8 tokens, truth {1, 2, 3, 6}; the ranking's top 4 are {2, 3, 4, 7}. Token F1: 2 of 4 = ½.
    Spans: selected [2–4], [7]; true [1–3], [6]. IOU([2–4], [1–3]) = 2/4 ≥ 0.5 (a match), [7] matches
    nothing: IOU precision ½ (1 of 2 selected spans), IOU recall ½ (1 of 2 true spans)."""
    truth = torch.zeros(2, 8, dtype=torch.bool)
    truth[0, [1, 2, 3, 6]] = True
    order = torch.tensor([[2, 3, 4, 7, 0, 1, 5, 6], list(range(8))])
    f1, precision, recall = hard_rationale_scores(order, truth, torch.ones_like(truth))
    assert (f1[0].item(), precision[0].item(), recall[0].item()) == (0.5, 0.5, 0.5)
    assert all(math.isnan(x[1].item()) for x in (f1, precision, recall))  # no truth
    strict = hard_rationale_scores(order, truth, torch.ones_like(truth), threshold=0.6)
    assert (strict[1][0].item(), strict[2][0].item()) == (0.0, 0.0)


def test_iou_f1_is_the_f1_of_the_mean_precision_and_recall():
    """ERASER's macro IOU F1: F1(mean P, mean R), not the mean of per-instance F1s."""
    frame_p, frame_r = np.array([1.0, 0.0, 0.5]), np.array([0.5, 0.0, 1.0])
    value, low, high = bootstrap_ci_of(lambda m: harmonic_f1(m[..., 0], m[..., 1]), np.stack([frame_p, frame_r], 1))
    p, r = frame_p.mean(), frame_r.mean()
    assert value == pytest.approx(2 * p * r / (p + r)) and low <= value <= high
    assert value != pytest.approx(np.mean(harmonic_f1(frame_p, frame_r)))


def test_integrated_gradients_completeness():
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), double=True)
    batch = token_batch([[5, 6, 7, 8, 9], [10, 11, 12]])
    probs = predict(model, batch)[2]
    target = probs.argmax(-1)
    scores, gap = integrated_gradients(model, batch, target, steps=300)
    baseline = {**batch}
    enc = model.encode(baseline, embedded=torch.zeros_like(model.embed(batch)))
    at_baseline = model.probabilities(model.decode(enc, model.attend(enc))).gather(1, target[:, None]).squeeze(1)
    at_input = probs.gather(1, target[:, None]).squeeze(1)
    torch.testing.assert_close(scores.sum(1), at_input - at_baseline, atol=1e-6, rtol=0)
    assert gap.abs().max().item() < 1e-6
    assert (scores[1, 3:] == 0).all()  # padding gets nothing


def test_paired_comparison_is_scipys_wilcoxon():
    rng = np.random.default_rng(0)
    a = rng.normal(size=200)
    b = a + rng.normal(0.1, 0.5, size=200)
    b[:5] = np.nan
    out = paired_with_attention(b, a, "ff/m/auprc")
    keep = ~np.isnan(b)
    assert out["ff/m/auprc/vs_attention_p"] == pytest.approx(stats.wilcoxon(b[keep] - a[keep]).pvalue)
    assert out["ff/m/auprc/vs_attention_diff"] == pytest.approx(np.mean(b[keep] - a[keep]))
    assert math.isnan(paired_with_attention(a, a, "x")["x/vs_attention_p"])


# ------------------------------------------------------------------------------------------------
# end to end: a BiLSTM trained on the synthetic task, scored against its known rationales
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(trained_runs):
    """The run (trained once for the whole pytest run: read, never changed) and its summary."""
    overrides = [
        *TINY,
        "encoder=lstm",
        "encoder.hidden_size=16",
        "dataset.source.n_train=3000",
        "dataset.source.n_test=120",
        "trainer.max_epochs=6",
        "trainer.limit_train_batches=1.0",
        "analysis_max_instances=null",  # every test instance (trainer=debug's bound is 32)
        "model.optimizer.lr=0.01",
        "analysis=[faithfulness]",
        "analysis.faithfulness.ig_steps=8",
        "analysis.faithfulness.tests=[removal,rationale,soft,auc_tp]",
        "analysis.faithfulness.auc_tp_classes=predicted",  # the signed methods' class sums are 0 (issue 38 §7)
        "logger=csv",
    ]
    return trained_runs.get(*overrides), trained_runs.summary(*overrides)


def test_known_rationales_rank_above_chance(trained):
    run, summary = trained
    assert summary["test/acc"] > 0.8
    chance = summary["ff/rationale/chance_auprc/mean"]
    assert chance > summary["ff/rationale/base_rate/mean"]
    # the random ranking sits at chance (its interval holds the exact expectation) ...
    assert summary["ff/random/auprc/ci_low"] <= chance <= summary["ff/random/auprc/ci_high"]
    chance_ap = summary["ff/rationale/chance_ap/mean"]
    assert summary["ff/random/ap/ci_low"] <= chance_ap <= summary["ff/random/ap/ci_high"]
    # ... and gradient and leave-one-out clearly above it
    for method in ("gradient", "loo"):
        assert summary[f"ff/{method}/auprc/ci_low"] > summary["ff/random/auprc/ci_high"] + 0.05, method
        assert summary[f"ff/{method}/token_f1/mean"] > summary["ff/random/token_f1/mean"] + 0.1
    assert summary["ff/loo/comprehensiveness/aopc/mean"] >= summary["ff/random/comprehensiveness/aopc/mean"]
    assert summary["ff/loo/sufficiency/aopc/mean"] <= summary["ff/random/sufficiency/aopc/mean"]


def test_the_trained_runs_curves_are_its_models(trained):
    """The end-to-end run's comprehensiveness and sufficiency of leave-one-out and attention at 20 % and 50 %,
    recomputed from the saved model instance by instance (tests/reference.py)."""
    from attn_study.job.plan import load_run

    run, _ = trained
    loaded = load_run(run)
    model, split = loaded.model.double(), loaded.datamodule.split("test")
    frame = pd.read_parquet(run / "analysis" / "faithfulness" / "instances.parquet").set_index("index")
    for i in frame.index[:5]:
        text = split.ids[i].tolist()
        for method, scores in (
            ("attention", ref.attention(model, text)),
            ("loo", ref.signed_leave_one_out(model, text)),
        ):
            for fraction, part in ((0.2, "k20"), (0.5, "k50")):
                comp, suff = ref.removal(model, text, scores, fraction)
                assert frame.loc[i, f"{method}_comp_{part}"] == pytest.approx(comp, abs=1e-5), (i, method, part)
                assert frame.loc[i, f"{method}_suff_{part}"] == pytest.approx(suff, abs=1e-5), (i, method, part)


def test_faithfulness_outputs(trained):
    """The run's files, and its summary from its per-instance frame by independent arithmetic: each mean, the
    paired Wilcoxon p-value against attention (scipy), ERASER's IOU F1 = F1(mean P, mean R), AOPC = the mean of the
    five sizes; every interval holds its mean. (The frame itself is checked against the saved model in
    test_the_trained_runs_curves_are_its_models.)"""
    run, summary = trained
    folder = run / "analysis" / "faithfulness"
    frame = pd.read_parquet(folder / "instances.parquet")
    assert len(frame) == 120 and frame["uid"].is_unique and (folder / "curves.png").is_file()
    for method in ("attention", "gradient", "grad_norm", "input_x_gradient", "integrated_gradients", "loo", "random"):
        for short in ("comp", "suff"):  # each instance's AOPC: the mean over the five sizes
            sizes = frame[[f"{method}_{short}_k{k}" for k in (1, 5, 10, 20, 50)]].to_numpy(float)
            np.testing.assert_allclose(frame[f"{method}_{short}_aopc"], sizes.mean(1), rtol=0, atol=1e-6)  # float32
    for method in ("attention", "gradient", "grad_norm", "input_x_gradient", "integrated_gradients", "loo", "random"):
        for path, column in (
            ("comprehensiveness/aopc", "comp_aopc"),
            ("sufficiency/aopc", "suff_aopc"),
            ("auprc", "auprc"),
            ("ap", "ap"),
            ("token_f1", "token_f1"),
        ):
            values = frame[f"{method}_{column}"].to_numpy(float)
            assert summary[f"ff/{method}/{path}/mean"] == pytest.approx(np.nanmean(values), abs=1e-12)
            assert summary[f"ff/{method}/{path}/n"] == np.isfinite(values).sum() > 100
            low, mean, high = (summary[f"ff/{method}/{path}/{s}"] for s in ("ci_low", "mean", "ci_high"))
            assert low <= mean <= high and low < high
            if method != "attention":
                base = frame[f"attention_{column}"].to_numpy(float)
                both = np.isfinite(values) & np.isfinite(base)
                diff = values[both] - base[both]
                assert summary[f"ff/{method}/{path}/vs_attention_diff"] == pytest.approx(diff.mean(), abs=1e-12)
                assert summary[f"ff/{method}/{path}/vs_attention_p"] == pytest.approx(
                    stats.wilcoxon(diff[diff != 0]).pvalue, rel=1e-9
                ), (method, path)
        assert summary[f"ff/{method}/comprehensiveness/k50/mean"] == pytest.approx(frame[f"{method}_comp_k50"].mean())
        p, r = frame[f"{method}_iou_precision"].mean(), frame[f"{method}_iou_recall"].mean()
        assert summary[f"ff/{method}/iou_f1/value"] == pytest.approx(2 * p * r / (p + r) if p + r else 0.0)
    # AOPC is the mean of the five sizes, per instance
    k_columns = [f"loo_comp_k{k}" for k in (1, 5, 10, 20, 50)]
    np.testing.assert_allclose(frame[k_columns].mean(1), frame["loo_comp_aopc"], atol=1e-6)
    # the known rationale's base rate and the attention's mass on it, from the frame's columns
    rate = (frame["rationale_size"] / frame["length"]).mean()
    assert summary["ff/rationale/base_rate/mean"] == pytest.approx(rate)
    assert summary["ff/attention/rationale_mass/mean"] == pytest.approx(frame["attention_rationale_mass"].mean())
    assert summary["ff/seconds/integrated_gradients"] > 0
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk["ff/loo/auprc/mean"] == summary["ff/loo/auprc/mean"]
    # a final statistic: in the run summary, not in the per-epoch history of csv/metrics.csv
    assert "ff/loo/auprc/mean" not in (run / "csv" / "metrics.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("boundary", [False, True])
def test_every_curve_and_rationale_score_equals_its_definition_instance_by_instance(boundary):
    """Comprehensiveness and sufficiency at every k, and AUPRC / AP / token F1 against known rationales, in the
    family's frame — batches of 2 whose rows are not the split's order — equal ERASER's definitions worked out
    for each instance alone, for the methods whose scores have no ties (tests/reference.py); each method's τ-b
    with attention is scipy's, and the summary's ``ff/<method>/tau_attention`` their mean and median over the texts
    of two tokens or more (a one-token text has no τ)."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.data.datamodule import collate
    from attn_study.families.faithfulness.callback import Faithfulness
    from tests.helpers import EOS_ID, SOS_ID, StubData

    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True, seed=5)
    texts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 2], [4, 9], [7]]
    truths = [(1, 4), (0,), (2, 3, 5), (1,), (0,)]
    shift = 1 if boundary else 0
    items = [
        {
            "index": i,
            "ids": ([SOS_ID, *t, EOS_ID] if boundary else t),
            "label": i % 3,
            "boundary": boundary,
            "rationale": tuple(p + shift for p in truth),
        }
        for i, (t, truth) in enumerate(zip(texts, truths))
    ]
    batch = collate(items, num_classes=3)
    data = StubData(batch, 3, serve_order=[3, 0, 4, 2, 1])
    methods = ["attention", "gradient", "input_x_gradient", "loo"]
    analysis = Faithfulness(batch_size=2, methods=methods, hard_rationale_k="oracle")
    with analysis_mode(model):
        measured = analysis.measure(model, data, "test", np.arange(len(texts)), ["removal", "rationale"])
    frame = measured.frame.set_index("index")
    taus = {method: [] for method in methods[1:]}  # scipy's τ-b with attention, texts of two tokens or more
    for i, text in enumerate(texts):
        row = frame.loc[i]
        scores = {
            "attention": ref.attention(model, text, boundary),
            "gradient": ref.gradient_jw(model, text, boundary),
            "input_x_gradient": ref.input_x_gradient(model, text, boundary),
            "loo": ref.signed_leave_one_out(model, text, boundary),
        }
        truth = [t in truths[i] for t in range(len(text))]
        for method, values in scores.items():
            for fraction in FRACTIONS:
                comp, suff = ref.removal(model, text, values, fraction, boundary)
                percent = f"k{round(fraction * 100, 6):g}"
                assert row[f"{method}_comp_{percent}"] == pytest.approx(comp, abs=1e-9, nan_ok=True), (
                    i,
                    method,
                    fraction,
                )
                assert row[f"{method}_suff_{percent}"] == pytest.approx(suff, abs=1e-9, nan_ok=True), (
                    i,
                    method,
                    fraction,
                )
            auprc, ap = pr_curve_by_hand(list(values), truth)
            assert (row[f"{method}_auprc"], row[f"{method}_ap"]) == pytest.approx((auprc, ap)), (i, method)
            top = set(np.argsort(-values, kind="stable")[: sum(truth)].tolist())
            assert row[f"{method}_token_f1"] == pytest.approx(sum(truth[t] for t in top) / sum(truth)), (i, method)
            if method != "attention":  # agreement with attention: scipy's τ-b over the text's tokens
                expected = stats.kendalltau(scores["attention"], values).statistic if len(text) > 1 else np.nan
                assert row[f"{method}_tau_attention"] == pytest.approx(expected, abs=1e-9, nan_ok=True), (i, method)
                if len(text) > 1:
                    taus[method].append(expected)
        mass = sum(a for a, t in zip(scores["attention"], truth) if t)
        assert row["attention_rationale_mass"] == pytest.approx(mass, abs=1e-12), i
    summary = analysis.summarise(measured, ["removal", "rationale"])
    for method, values in taus.items():
        assert summary[f"ff/{method}/tau_attention/n"] == len(values) == 4, method
        assert summary[f"ff/{method}/tau_attention/mean"] == pytest.approx(np.mean(values), abs=1e-9), method
        assert summary[f"ff/{method}/tau_attention/median"] == pytest.approx(np.median(values), abs=1e-9), method


def test_rankings_left_to_the_tie_break_are_counted_and_iou_f1_has_its_interval():
    """Uniform attention scores every token alike: each instance of two tokens or more has its attention ranking
    decided by the random tie-break alone, and the summary counts them all (one-token texts are too short);
    IOU F1 is the F1 of the mean IOU precision and recall, inside its bootstrap interval."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.data.datamodule import collate
    from attn_study.families.faithfulness.callback import Faithfulness
    from tests.helpers import StubData

    model = tiny_model(scorer=attention.UniformScorer, double=True)
    texts = [[5, 6, 7, 8], [9, 10], [11], [12, 13, 14, 15, 16]]
    batch = collate([{"index": i, "ids": t, "label": 0, "rationale": (0,)} for i, t in enumerate(texts)], num_classes=2)
    analysis = Faithfulness(methods=["attention", "gradient"], fractions=[0.5], hard_rationale_k="oracle")
    with analysis_mode(model):
        measured = analysis.measure(model, StubData(batch), "test", np.arange(4), ["removal", "rationale"])
    summary = analysis.summarise(measured, ["removal", "rationale"])
    assert summary["ff/attention/constant_scores"] == 3 and summary["ff/gradient/constant_scores"] == 0
    assert summary["ff/dropped/too_short"] == 1
    frame = measured.frame
    p, r = frame["attention_iou_precision"].mean(), frame["attention_iou_recall"].mean()
    value = summary["ff/attention/iou_f1/value"]
    assert value == pytest.approx(2 * p * r / (p + r) if p + r else 0.0)
    assert summary["ff/attention/iou_f1/ci_low"] <= value <= summary["ff/attention/iou_f1/ci_high"]


# -- soft comprehensiveness / sufficiency (Zhao & Aletras 2023) and AUC-TP (Atanasova et al. 2020) ----------------


def test_soft_metrics_worked_by_hand_from_the_drawn_masks():
    """The closed-form model's output moves only with dimension 0 of token 7: x' predicts p(ŷ|x) when the mask
    keeps it and p(ŷ|∅) when it drops it, so per sample Soft-NC = [dropped] and Soft-NS = 1 − [dropped], with the
    dimension kept where the instance's draw u < 1 − a (comprehensiveness) or u < a (sufficiency), a the signal's
    min-max scaled importance. The mean over many masks is a for both."""
    from attn_study.analysis.seeding import instance_draws
    from attn_study.families.faithfulness.measures import soft_scores, unit_importance

    s, b = 4.0, -0.2
    model = one_token_model(s, b)
    seqs = [[3, 4, SIGNAL, 5, 6], [SIGNAL, 3, 4, 5]]
    batch = token_batch(seqs)
    _, _, probs = predict(model, batch)
    # raw scores: min 0 and max 1 among the other tokens, the signal at 0.2 / 0.7 (a = 0.2, 0.7 after scaling)
    raw = torch.tensor([[1.0, 0.0, 0.2, 0.5, 0.5], [0.7, 0.0, 1.0, 0.3, 0.0]], dtype=torch.float64)
    a = torch.tensor([0.2, 0.7], dtype=torch.float64)
    text = batch["mask"]
    assert unit_importance(raw, text)[[0, 1], [2, 0]].tolist() == pytest.approx(a.tolist())
    samples, seed = 6, 3
    soft, empty = soft_scores(model, batch, probs, {"m": raw}, seed, SOFT, samples, chunk_size=5)
    u = instance_draws(batch["index"], batch["mask"], seed, SOFT, leading=(samples, 6))
    signal_u = u[[0, 1], :, 0, [2, 0]]  # (B, S): the draw of dimension 0 of the signal token
    for r, n in enumerate(len(q) for q in seqs):
        assert empty[r].item() == pytest.approx(sigmoid(b + s / n) - sigmoid(b))
        dropped_comp = (signal_u[r] >= 1 - a[r]).double().mean().item()
        dropped_suff = (signal_u[r] >= a[r]).double().mean().item()
        assert soft["m"][0][r].item() == pytest.approx(dropped_comp, abs=1e-12)
        assert soft["m"][1][r].item() == pytest.approx(1 - dropped_suff, abs=1e-12)
    many, _ = soft_scores(model, batch, probs, {"m": raw}, seed, SOFT, 4000, chunk_size=4000)
    np.testing.assert_allclose(many["m"][0].numpy(), a.numpy(), atol=0.03)
    np.testing.assert_allclose(many["m"][1].numpy(), a.numpy(), atol=0.03)


def test_soft_metrics_are_undefined_where_the_empty_text_is_as_confident_and_clipped_otherwise():
    """z = b + s·[signal kept]/n with s < 0 < b: the prediction is class 1 and the empty text predicts it more
    confidently (d < 0): NaN, counted in the summary. A perturbation that lowers p(ŷ) below p(ŷ|∅) gives
    Soft-NC > 1 unclipped, 1 clipped."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.families.faithfulness.callback import Faithfulness
    from attn_study.families.faithfulness.measures import soft_scores
    from tests.helpers import StubData

    model = one_token_model(-2.0, 3.0)
    batch = token_batch([[3, SIGNAL, 4], [SIGNAL, 5]])
    _, _, probs = predict(model, batch)
    assert probs.argmax(-1).tolist() == [1, 1]
    soft, empty = soft_scores(model, batch, probs, {"m": torch.rand(2, 3, dtype=torch.float64)}, 0, SOFT, 2)
    assert (empty < 0).all() and torch.isnan(soft["m"][0]).all() and torch.isnan(soft["m"][1]).all()
    analysis = Faithfulness(methods=["attention", "random"])
    with analysis_mode(model):
        measured = analysis.measure(model, StubData(batch), "test", np.arange(2), ["soft"])
    summary = analysis.summarise(measured, ["soft"])
    assert summary["ff/dropped/empty_as_confident"] == 2 and summary["ff/random/soft_comprehensiveness/n"] == 0
    # x' further from ŷ than the empty text: the two signal tokens erased for sure (a = 1), token 8 (e_8 = −e_7)
    # kept for sure (a = 0): z = b − s/3 < b, so the drop exceeds d = p(ŷ|x) − p(ŷ|∅)
    s, b = 4.0, -1.0
    model = one_token_model(s, b)
    model.embedding.weight[8, 0] = -1.0
    batch = token_batch([[SIGNAL, SIGNAL, 8]])
    _, _, probs = predict(model, batch)
    scores = {"m": torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)}
    clipped, _ = soft_scores(model, batch, probs, scores, 0, SOFT, 3, clip=True)
    free, _ = soft_scores(model, batch, probs, scores, 0, SOFT, 3, clip=False)
    full = sigmoid(b + s / 3)
    assert free["m"][0].item() == pytest.approx((full - sigmoid(b - s / 3)) / (full - sigmoid(b)))
    assert free["m"][0].item() > 1 and clipped["m"][0].item() == 1.0


def test_auc_tp_worked_by_hand():
    """Four texts of ten tokens predicted 1 only through the signal token (gold 1) and one without it (predicted
    and gold 0). Masking the signal first: macro F1 1 at k = 0, then 1/6 (class 0: 2/(2+4); class 1: 0) — area
    0.1·(1 + 1/6)/2 + 0.9/6; ranking it last masks it only at k = 1: 0.9 + 0.1·(1 + 1/6)/2. Accuracy: 1 then 0.2."""
    from attn_study.families.faithfulness.measures import area_under_threshold_performance, threshold_predictions

    model = one_token_model(20.0, -1.0)
    seqs = [[SIGNAL, 3, 4, 5, 6, 8, 9, 10, 11, 12]] * 4 + [[3, 4, 5, 6, 8, 9, 10, 11, 12, 13]]
    batch = token_batch(seqs, labels=[1, 1, 1, 1, 0])
    first = torch.arange(10).repeat(5, 1)
    last = torch.cat([torch.arange(1, 10), torch.tensor([0])]).repeat(5, 1)
    fractions = [round(0.1 * k, 1) for k in range(11)]
    predicted = threshold_predictions(model, batch, {"first": first, "last": last}, fractions, chunk_size=7)
    assert (
        predicted["first"][:4].tolist() == [[1] + [0] * 10] * 4
        and predicted["last"][:4].tolist() == [[1] * 10 + [0]] * 4
    )
    assert predicted["first"][4].tolist() == [0] * 11
    labels = np.array([1, 1, 1, 1, 0])
    expected = {
        ("first", "macro_f1"): 0.1 * (1 + 1 / 6) / 2 + 0.9 / 6,
        ("last", "macro_f1"): 0.9 + 0.1 * (1 + 1 / 6) / 2,
        ("first", "accuracy"): 0.1 * 1.2 / 2 + 0.9 * 0.2,
        ("last", "accuracy"): 0.9 + 0.1 * 1.2 / 2,
    }
    for (name, measure), area in expected.items():
        (value, low, high), curve = area_under_threshold_performance(
            predicted[name].numpy(), labels, fractions, measure, 2
        )
        assert value == pytest.approx(area) and low <= value <= high, (name, measure)
        assert curve[0] == 1.0


def test_threshold_performance_is_scikit_learns_macro_f1_and_accuracy():
    """At every threshold, from the means of the per-instance indicators: macro F1 as scikit-learn's
    ``f1_score(average='macro')`` defines it (per class present in the gold labels or the predictions, F1 = 2PR /
    (P + R), 0 where P + R = 0; worked out class by class here) and accuracy, with a class absent from both."""
    from attn_study.families.faithfulness.measures import performance, performance_columns

    def f1_score(gold, pred, average):
        scores = []
        for c in sorted(set(gold) | set(pred)):
            tp = sum(g == c and p == c for g, p in zip(gold, pred))
            precision = tp / max(sum(p == c for p in pred), 1)
            recall = tp / max(sum(g == c for g in gold), 1)
            scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
        return sum(scores) / len(scores)

    def accuracy_score(gold, pred):
        return float(np.mean(np.asarray(gold) == np.asarray(pred)))

    rng = np.random.default_rng(0)
    labels = rng.choice([0, 1, 3], size=40)
    predictions = rng.choice([0, 1, 2, 3], size=(40, 4), p=[0.3, 0.3, 0.1, 0.3])
    predictions[:, 0] = labels  # k = 0: perfect
    for measure, reference in (
        ("macro_f1", lambda y, p: f1_score(y, p, average="macro")),
        ("accuracy", accuracy_score),
    ):
        columns = performance_columns(predictions, labels, measure, 5)
        values = performance(columns.mean(0), measure, 5, 4)
        expected = [reference(labels, predictions[:, k]) for k in range(4)]
        np.testing.assert_allclose(values, expected, atol=1e-12, err_msg=measure)


def test_soft_and_auc_tp_columns_do_not_depend_on_the_batch():
    """Batches of 5, 2 and 1 rows (served out of order): the same per-instance soft metrics and predictions."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.data.datamodule import collate
    from attn_study.families.faithfulness.callback import Faithfulness
    from tests.helpers import StubData

    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True, seed=5)
    texts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 2], [4, 9], [7]]
    batch = collate([{"index": i, "ids": t, "label": i % 3} for i, t in enumerate(texts)], num_classes=3)
    frames = []
    for size in (5, 2, 1):
        analysis = Faithfulness(
            batch_size=size, soft_samples=3, methods=["attention", "loo", "random"], auc_tp_classes="predicted"
        )
        with analysis_mode(model):
            data = StubData(batch, 3, serve_order=[3, 0, 4, 2, 1])
            frames.append(
                analysis.measure(model, data, "test", np.arange(5), ["soft", "auc_tp"]).frame.set_index("index")
            )
    columns = [c for c in frames[0] if "soft" in c or "_tp_" in c or c == "empty_drop"]
    assert len(columns) == 3 * 2 + 3 * 11 + 1
    for other in frames[1:]:
        np.testing.assert_allclose(other.loc[range(5), columns], frames[0].loc[range(5), columns], atol=1e-12)


def soft_by_hand(model, text: list[int], scores: np.ndarray, index: int, seed: int) -> tuple[float, float]:
    """Zhao & Aletras's (Soft-NC, Soft-NS) of one instance alone, one mask (``soft_samples=1``): a = min-max scaled
    scores; dimension j of token t kept where u[j, t] < 1 − a_t (NC) or < a_t (NS), u the instance's uniform draws
    ``default_rng([seed, index, stream]).random((1, d, n))``; over d = p(ŷ|x) − p(ŷ|∅), clipped to [0, 1]."""
    with torch.no_grad():
        embedded = model.embed(token_batch([text]))[0]
        probs = ref.forward(model, text)[3]
        c = int(probs.argmax())
        empty = float(probs[c] - ref.forward(model, text, embedded=torch.zeros_like(embedded)[None])[3][c])
        a = (scores - scores.min()) / (scores.max() - scores.min())
        u = np.random.default_rng([seed, index, SOFT]).random((1, embedded.shape[1], len(text)))
        out = []
        for q in (1 - a, a):
            kept = torch.from_numpy(u[0].T < q[:, None])
            drop = float(probs[c] - ref.forward(model, text, embedded=(embedded * kept)[None])[3][c])
            out.append(min(max(max(drop, 0.0) / empty, 0.0), 1.0))
    return out[0], 1 - out[1]


def masked_prediction(model, text: list[int], scores: np.ndarray, fraction: float) -> int:
    """The class predicted for the text alone (no boundary tokens) with the embeddings of its top ⌊k·L⌋ tokens by
    ``scores`` set to 0 (Atanasova et al.'s count, the default ``auc_tp_count=floor_all``)."""
    top = np.argsort(-scores, kind="stable")[: math.floor(round(fraction * len(text), 9))]
    with torch.no_grad():
        embedded = model.embed(token_batch([text]))[0].clone()
        embedded[torch.as_tensor(top, dtype=torch.long)] = 0
        return int(ref.forward(model, text, embedded=embedded[None])[3].argmax())


def macro_f1_by_hand(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Per class present in either, 2TP / (2TP + FP + FN), averaged (scikit-learn's ``average='macro'``)."""
    scores = []
    for c in sorted(set(gold.tolist()) | set(predicted.tolist())):
        tp = np.sum((gold == c) & (predicted == c))
        scores.append(
            2 * tp / (2 * tp + np.sum((gold != c) & (predicted == c)) + np.sum((gold == c) & (predicted != c)))
        )
    return float(np.mean(scores))


def test_soft_metrics_and_auc_tp_end_to_end(trained):
    """On the synthetic task: the run's Soft-NC / Soft-NS and masked predictions of attention and leave-one-out equal
    their definitions worked out instance by instance from the saved model; AUC-TP is the trapezoid under macro F1
    (worked out class by class) of the frame's predictions; leave-one-out finds the signal words — masking its top
    tokens costs more performance than masking random ones (a smaller AUC-TP) and its soft comprehensiveness is
    higher."""
    from attn_study.job.plan import load_run

    run, summary = trained
    loaded = load_run(run)
    model, split = loaded.model.double(), loaded.datamodule.split("test")
    seed = int(loaded.cfg.analysis.faithfulness.seed)
    frame = pd.read_parquet(run / "analysis" / "faithfulness" / "instances.parquet").set_index("index")
    fractions = [round(0.1 * k, 1) for k in range(11)]
    assert not split.boundary  # n = L: no <sos>/<eos> to count
    for i in frame.index[:4]:
        text = split.ids[i].tolist()
        for method, scores in (
            ("attention", ref.attention(model, text)),
            ("loo", ref.signed_leave_one_out(model, text)),
        ):
            comp, suff = soft_by_hand(model, text, scores, int(i), seed)
            assert frame.loc[i, f"{method}_soft_comp"] == pytest.approx(comp, abs=1e-4), (i, method)
            assert frame.loc[i, f"{method}_soft_suff"] == pytest.approx(suff, abs=1e-4), (i, method)
            predicted = [masked_prediction(model, text, scores, k) for k in fractions]
            assert frame.loc[i, [f"{method}_tp_k{round(k * 100):g}" for k in fractions]].tolist() == predicted
    gold = frame["label"].to_numpy(int)
    for method in ("attention", "gradient", "loo", "random"):
        curve = [macro_f1_by_hand(gold, frame[f"{method}_tp_k{round(k * 100):g}"].to_numpy(int)) for k in fractions]
        area = sum((curve[j] + curve[j + 1]) / 2 * 10 for j in range(10))  # k in percent: Atanasova et al.'s scale
        assert summary[f"ff/{method}/auc_tp/value"] == pytest.approx(area, abs=1e-12), method
        assert summary[f"ff/{method}/auc_tp/ci_low"] < area < summary[f"ff/{method}/auc_tp/ci_high"]
        for k, value in zip(fractions, curve):
            assert summary[f"ff/{method}/auc_tp/k{round(k * 100):g}"] == pytest.approx(value, abs=1e-12)
        for name, column in (("soft_comprehensiveness", "soft_comp"), ("soft_sufficiency", "soft_suff")):
            assert summary[f"ff/{method}/{name}/mean"] == pytest.approx(frame[f"{method}_{column}"].mean(), abs=1e-12)
    # nothing masked: the model's own macro F1 (the run's test/f1 is the F1 of the positive class, not this)
    assert summary["ff/loo/auc_tp/k0"] == pytest.approx(macro_f1_by_hand(gold, frame["prediction"].to_numpy(int)))
    assert summary["ff/loo/auc_tp/ci_high"] < summary["ff/random/auc_tp/ci_low"]
    assert summary["ff/loo/soft_comprehensiveness/mean"] > summary["ff/random/soft_comprehensiveness/mean"]
    assert summary["ff/seconds/soft"] > 0 and summary["ff/seconds/auc_tp"] > 0


def test_the_report_ranks_soft_metrics_up_and_auc_tp_down(tmp_path):
    """A run with only the soft and AUC-TP keys is in the methods table: Soft-NC ranks the highest first, AUC-TP
    the lowest first."""
    from attn_study.report.cli import build_report
    from tests.report.test_report import make_run

    summary = {"ff/n_instances": 50, "test/acc": 0.9}
    for i, method in enumerate(("attention", "loo", "random")):
        for path, value in (("soft_comprehensiveness", 0.2 + 0.1 * i), ("soft_sufficiency", 0.5)):
            summary.update({f"ff/{method}/{path}/{s}": value for s in ("mean", "ci_low", "ci_high")})
        summary.update({f"ff/{method}/auc_tp/{s}": 0.3 + 0.1 * i for s in ("value", "ci_low", "ci_high")})
    make_run(tmp_path, "one", dataset="synthetic", encoder="lstm", summary=summary, family="faithfulness")
    out = build_report(tmp_path)
    numbers = pd.read_csv(out / "ff_methods.csv").set_index("method")
    assert numbers.loc["loo", "auc_tp/mean"] == pytest.approx(0.4)
    shown = [r for r in (out / "ff_methods.md").read_text().splitlines() if "| random |" in r or "| attention |" in r]
    header = next(r for r in (out / "ff_methods.md").read_text().splitlines() if "rank (AUC-TP)" in r)
    columns = [c.strip() for c in header.split("|")]
    for row in shown:
        cells = dict(zip(columns, (c.strip() for c in row.split("|"))))
        best = cells["method"] == "attention"  # the lowest AUC-TP and the lowest Soft-NC
        assert cells["rank (AUC-TP)"] == ("1" if best else "3") and cells["rank (Soft-NC)"] == ("3" if best else "1")


def test_a_method_measured_by_auc_tp_alone_is_in_the_table():
    """``analysis.faithfulness`` with AUC-TP only: its methods are found by their ``auc_tp/value`` key."""
    from pathlib import Path

    from attn_study.families.faithfulness.report import methods
    from attn_study.report.runs import Run

    summary = {"ff/n_instances": 5, "ff/gradient/auc_tp/value": 0.3, "ff/attention/auc_tp/value": 0.4}
    assert methods(Run(Path("/r"), "complete", summary=summary)) == ["attention", "gradient"]  # the registry's order


def test_two_seeds_of_a_method_are_compared_with_attentions_two():
    """With 2 seeds each, a method's comprehensiveness and AUPRC are set against attention's by the exact
    permutation criterion: every seed above every seed of attention, p = 2 / C(4, 2) = 0.33 (rounded)."""
    from pathlib import Path

    from attn_study.families.faithfulness.report import display, table
    from attn_study.report.runs import Run

    config = {"dataset": "sst", "encoder": "lstm", "attention": "additive", "projection": "softmax"}
    runs = []
    for seed, (of_attention, of_gradient) in enumerate(((0.2, 0.5), (0.3, 0.6)), start=1):
        summary = {"ff/n_instances": 5}
        for method, value in (("attention", of_attention), ("gradient", of_gradient)):
            summary.update({f"ff/{method}/comprehensiveness/aopc/{s}": value for s in ("mean", "ci_low", "ci_high")})
        runs.append(Run(Path(f"/r{seed}"), "complete", config=config | {"seed": seed}, summary=summary))
    shown = display(table(runs)).set_index("method")
    assert shown.loc["gradient", "vs attention: comprehensiveness"] == "Δ +0.300, beyond seed spread (p = 0.33)"
    assert shown.loc["gradient", "comprehensiveness AOPC ↑"] == "0.550 ± 0.050"  # mean, std (ddof 0) of 0.5, 0.6
    assert np.isnan(shown.loc["attention", "vs attention: comprehensiveness"])  # attention itself: no comparison
    assert not [c for c in display(table(runs[:1])).columns if c.startswith("vs")]  # one seed: no spread to compare


# -- issue 38 §7: the references' conventions (AUC-TP: Atanasova et al.'s code; ERASER's hard rationales) ----------


def test_auc_tp_masks_floor_k_n_tokens_counting_the_boundary_tokens():
    """Atanasova et al. mask int(k · n) of the n tokens, [CLS] and [SEP] counted: with <sos> … <eos> around ten text
    tokens n = 12, so k = 0.5 masks 6 (⌈k·L⌉: 5) and k = 0.9 masks 10 (⌈k·L⌉: 9), never more than the text; seven
    tokens without boundary tokens: k = 0.1 masks 0 (⌈k·L⌉: 1), 0.3 masks 2 (3)."""
    from attn_study.families.faithfulness.measures import masked_counts

    wrapped = token_batch([list(range(4, 14))], boundary=True)
    plain = token_batch([list(range(4, 11))])
    for batch, fraction, floor_all, ceil_text in (
        (wrapped, 0.5, 6, 5),
        (wrapped, 0.9, 10, 9),
        (wrapped, 1.0, 10, 10),
        (wrapped, 0.1, 1, 1),
        (plain, 0.1, 0, 1),
        (plain, 0.3, 2, 3),
        (plain, 0.7, 4, 5),
    ):
        assert masked_counts(batch, fraction, "floor_all").item() == floor_all, fraction
        assert masked_counts(batch, fraction, "ceil_text").item() == ceil_text, fraction


def test_auc_tp_with_atanasovas_counts_worked_by_hand():
    """The closed-form model (only token 7 matters, predicted 1 with it, 0 without): ten text tokens between <sos>
    and <eos>, the signal ranked last among them, is masked once ⌊k · 12⌋ ≥ 10 — at k = 0.9 and 1 — where ⌈k · 10⌉
    masks it at k = 1 only; seven tokens, the signal ranked first: ⌊0.1 · 7⌋ = 0 keeps it at k = 0.1."""
    from attn_study.families.faithfulness.measures import threshold_predictions

    model = one_token_model(20.0, -1.0)
    fractions = [round(0.1 * k, 1) for k in range(11)]
    wrapped = token_batch([[3, 4, 5, 6, 8, 9, 10, 11, 12, SIGNAL]], boundary=True)
    last = {"last": torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 11]])}  # text positions 1..10, the signal at 10
    floor = threshold_predictions(model, wrapped, last, fractions, count="floor_all")["last"]
    ceil = threshold_predictions(model, wrapped, last, fractions, count="ceil_text")["last"]
    assert floor[0].tolist() == [1] * 9 + [0, 0] and ceil[0].tolist() == [1] * 10 + [0]
    plain = token_batch([[SIGNAL, 3, 4, 5, 6, 8, 9]])
    first = {"first": torch.arange(7)[None]}
    assert threshold_predictions(model, plain, first, [0.1], count="floor_all")["first"].tolist() == [[1]]
    assert threshold_predictions(model, plain, first, [0.1], count="ceil_text")["first"].tolist() == [[0]]


def test_auc_tp_is_the_area_with_k_in_percent():
    """Atanasova et al.'s ``auc(thresholds, scores)`` has the thresholds 0, 10, …, 100: the summary's AUC-TP is 100
    times the area over k in [0, 1] — here the hand-worked 0.1·(1 + 1/6)/2 + 0.9/6 of ``test_auc_tp_worked_by_hand``
    (four instances of class 1 predicted 0 from k = 0.1 on, one of class 0 always predicted 0)."""
    from attn_study.families.faithfulness.callback import Faithfulness

    analysis = Faithfulness(methods=["attention"], tests=["auc_tp"], auc_tp_classes="predicted")
    columns = {f"attention_tp_k{10 * j}": [1 if j == 0 else 0] * 4 + [0] for j in range(11)}
    frame = pd.DataFrame({"label": [1, 1, 1, 1, 0], **columns})
    out = analysis._auc_tp(frame)
    assert out["ff/attention/auc_tp/value"] == pytest.approx(100 * (0.1 * (1 + 1 / 6) / 2 + 0.9 / 6))
    assert out["ff/attention/auc_tp/k10"] == pytest.approx(1 / 6)  # the curve stays a macro F1 in [0, 1]


def linear_three_class_model():
    """noenc, uniform attention (no attention parameters), three classes: z = W ē + b, ē the mean embedding, so
    ∂p_c/∂e_t = p_c (W_c − Σ_k p_k W_k) / n."""
    return tiny_model(encoders.NoEncoder, scorer=attention.UniformScorer, num_classes=3, double=True, seed=3)


def test_class_summed_scores_are_each_classs_scores_summed():
    """Σ_c |∂p_c/∂e_t · e_t| (gradient) and Σ_c ‖∂p_c/∂e_t‖₂ (grad_norm) against the closed form of the linear
    three-class model; for two classes, twice the class-1 score; attention explains no class: its own scores."""
    from attn_study.analysis import importance
    from attn_study.families.faithfulness.measures import class_summed_scores

    model = linear_three_class_model()
    text = [4, 9, 13, 17, 21]
    batch = token_batch([text])
    emb, n = model.embedding.weight[text], len(text)
    w, b = model.output.weight, model.output.bias
    p = torch.softmax(w @ emb.mean(0) + b, 0)
    directions = [p[c] * (w[c] - (p[:, None] * w).sum(0)) / n for c in range(3)]  # ∂p_c/∂e_t, the same for every t
    gradient = sum((emb @ d).abs() for d in directions)
    norms = sum(d.norm() for d in directions).expand(n)
    got = class_summed_scores("gradient", model, batch, None)[0]
    np.testing.assert_allclose(got.numpy(), gradient.numpy(), rtol=1e-10)
    np.testing.assert_allclose(class_summed_scores("grad_norm", model, batch, None)[0].numpy(), norms, rtol=1e-10)
    alpha = torch.full((1, n), 1 / n, dtype=torch.float64)
    assert class_summed_scores("attention", model, batch, alpha) is alpha
    binary = tiny_model(num_classes=2, double=True, seed=2)
    predicted = importance.gradient_norm_importance(binary, batch, normalise=False)  # of the predicted log-odds
    summed = class_summed_scores("grad_norm", binary, batch, None)
    prob = float(predict(binary, batch)[2].max())
    np.testing.assert_allclose(summed.numpy(), 2 * prob * (1 - prob) * predicted.numpy(), rtol=1e-9)


def test_auc_tp_ranks_by_the_class_summed_scores_and_refuses_signed_methods():
    """With ``auc_tp_classes=sum`` (the default) the AUC-TP predictions are those of the class-summed ranking (here
    it differs from the predicted class's on a three-class model); a signed method, whose classes' scores sum to 0,
    is refused in one line."""
    from attn_study.analysis import importance
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.analysis.seeding import instance_draws
    from attn_study.errors import UserError
    from attn_study.families.faithfulness.callback import Faithfulness
    from attn_study.families.faithfulness.measures import class_summed_scores, threshold_predictions
    from tests.helpers import StubData

    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True, seed=6)
    model.output.weight.mul_(3.0)  # confident enough that masking changes predictions
    model.embedding.weight.mul_(2.0)
    texts = [
        [5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
        [12, 13, 14, 15, 16, 17],
        [16, 17, 18, 19, 20, 21, 2],
        [4, 9, 5, 11, 3],
    ]
    batch = token_batch(texts, labels=[0, 1, 2, 1])
    fractions = [round(0.1 * k, 1) for k in range(11)]
    frames = {}
    for classes in ("sum", "predicted"):
        analysis = Faithfulness(methods=["grad_norm"], tests=["auc_tp"], auc_tp_classes=classes)
        with analysis_mode(model):
            frames[classes] = analysis.measure(model, StubData(batch, 3), "test", np.arange(4), ["auc_tp"]).frame
    text = importance.token_mask(batch)
    tiebreak = instance_draws(batch["index"], batch["mask"], 0, TIES)
    order = ranking(class_summed_scores("grad_norm", model, batch, None).double(), text, tiebreak)
    expected = threshold_predictions(model, batch, {"grad_norm": order}, fractions)["grad_norm"]
    columns = [f"grad_norm_tp_k{10 * j}" for j in range(11)]
    np.testing.assert_array_equal(frames["sum"][columns].to_numpy(), expected.numpy())
    assert not np.array_equal(frames["predicted"][columns].to_numpy(), expected.numpy())
    signed = Faithfulness(methods=["attention", "loo", "integrated_gradients"], tests=["removal", "auc_tp"])
    with pytest.raises(UserError, match="auc_tp_classes=sum: integrated_gradients, loo score") as err:
        signed.check_model(model)  # before training
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="auc_tp_classes=sum"):
        signed.measure(model, StubData(batch, 3), "test", np.arange(4), ["auc_tp"])
    Faithfulness(methods=["attention", "loo"], tests=["removal"]).check_model(model)  # no auc_tp: nothing summed


def test_hard_rationale_of_another_size_than_the_truth_worked_by_hand():
    """Truth {0, 3} of six tokens, the ranking 0, 1, 2, …: the top 3 select {0, 1, 2}, one hit — precision 1/3,
    recall 1/2, token F1 2·1/(3 + 2) = 0.4 (ERASER's instance F1); one selected span [0, 3) against the true spans
    [0, 1) (IOU 1/3) and [3, 4) (0): no match at 0.5. The top 2 ({0, 1}): F1 1/2, the span [0, 2) matches [0, 1) at
    IOU 1/2: IOU precision 1, recall 1/2."""
    truth = torch.tensor([[True, False, False, True, False, False]])
    text, order = torch.ones_like(truth), torch.arange(6)[None]
    f1, precision, recall = hard_rationale_scores(order, truth, text, sizes=torch.tensor([3]))
    assert (f1.item(), precision.item(), recall.item()) == pytest.approx((0.4, 0.0, 0.0))
    f1, precision, recall = hard_rationale_scores(order, truth, text, sizes=torch.tensor([2]))
    assert (f1.item(), precision.item(), recall.item()) == pytest.approx((0.5, 1.0, 0.5))
    assert hard_rationale_scores(order, truth, text)[0].item() == pytest.approx(0.5)  # the oracle: top |truth| = 2


def test_the_datasets_k_is_the_train_splits_mean_rationale_share():
    """Texts of 4 and 10 tokens whose rationales cover 1 and 5 (shares 1/4 and 1/2), one without a rationale and one
    with an empty one (left out): k_d = 3/8, whether or not <sos>/<eos> wrap the texts; sizes ⌈k_d · L⌉, a count,
    the oracle."""
    from types import SimpleNamespace

    from attn_study.families.faithfulness.measures import dataset_rationale_share, hard_rationale_sizes

    for boundary in (False, True):
        extra = 2 if boundary else 0
        split = SimpleNamespace(
            ids=[np.zeros(4 + extra), np.zeros(10 + extra), np.zeros(6 + extra), np.zeros(5 + extra)],
            rationales=[(1,), (0, 2, 4, 6, 8), None, ()],
            boundary=boundary,
        )
        assert dataset_rationale_share(split) == pytest.approx(3 / 8)
    assert math.isnan(dataset_rationale_share(SimpleNamespace(ids=[np.zeros(3)], rationales=None, boundary=False)))
    text = torch.arange(10)[None, :] < torch.tensor([4, 10])[:, None]
    truth = torch.zeros(2, 10, dtype=torch.bool)
    truth[0, 1], truth[1, :5] = True, True
    assert hard_rationale_sizes(text, truth, 3 / 8).tolist() == [2, 4]  # ⌈1.5⌉, ⌈3.75⌉
    assert hard_rationale_sizes(text, truth, 6).tolist() == [4, 6]
    assert hard_rationale_sizes(text, truth, "oracle").tolist() == [1, 5]


@pytest.mark.parametrize("value", [1.0, 0, -2, "truth", 1.5, True])
def test_hard_rationale_k_is_checked_in_one_line(value):
    from attn_study.errors import UserError
    from attn_study.families.faithfulness.callback import Faithfulness

    with pytest.raises(UserError, match="hard_rationale_k") as err:
        Faithfulness(hard_rationale_k=value)
    assert "\n" not in str(err.value)
    assert Faithfulness(hard_rationale_k=2).hard_rationale_k == 2 and Faithfulness().hard_rationale_k == "dataset"


def test_hard_rationales_at_a_fixed_fraction_instance_by_instance():
    """``hard_rationale_k=0.5``: each instance's hard rationale is its top ⌈L/2⌉ tokens, token F1 2·hits / (⌈L/2⌉ +
    |truth|), worked out from each method's scores (tests/reference.py), instance by instance."""
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.data.datamodule import collate
    from attn_study.families.faithfulness.callback import Faithfulness
    from tests import reference as ref
    from tests.helpers import StubData

    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True, seed=5)
    texts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 2]]
    truths = [(1, 4), (0,), (2, 3, 5)]
    items = [{"index": i, "ids": t, "label": i % 3, "rationale": r} for i, (t, r) in enumerate(zip(texts, truths))]
    batch = collate(items, num_classes=3)
    with analysis_mode(model):
        frame = (
            Faithfulness(methods=["attention", "loo"], hard_rationale_k=0.5)
            .measure(model, StubData(batch, 3), "test", np.arange(3), ["rationale"])
            .frame.set_index("index")
        )
    for i, text in enumerate(texts):
        size = math.ceil(len(text) / 2)
        assert frame.loc[i, "hard_size"] == size
        for method, values in (
            ("attention", ref.attention(model, text)),
            ("loo", ref.signed_leave_one_out(model, text)),
        ):
            hits = len(set(np.argsort(-values, kind="stable")[:size].tolist()) & set(truths[i]))
            assert frame.loc[i, f"{method}_token_f1"] == pytest.approx(2 * hits / (size + len(truths[i]))), (i, method)


def test_the_default_hard_rationale_k_is_the_synthetic_train_splits_share(trained):
    """End to end (the default ``hard_rationale_k=dataset``): the k recorded is the train split's mean rationale
    share, and each instance's hard rationale has ⌈k·L⌉ tokens."""
    from attn_study.families.faithfulness.measures import dataset_rationale_share
    from attn_study.job.plan import load_run

    run, summary = trained
    share = dataset_rationale_share(load_run(run).datamodule.split("train"))
    assert 0 < share < 0.5 and summary["ff/rationale/hard_k"] == pytest.approx(share)
    frame = pd.read_parquet(run / "analysis" / "faithfulness" / "instances.parquet")
    np.testing.assert_array_equal(frame["hard_size"], np.ceil(frame["length"] * share - 1e-9))
    assert summary["ff/rationale/hard_size/mean"] == pytest.approx(frame["hard_size"].mean())


def test_the_references_conventions_are_the_defaults(make_cfg):
    """``analysis=[faithfulness]`` ranks AUC-TP by class-summed scores and masks ⌊k·n⌋ tokens (Atanasova et al.'s
    code), and cuts hard rationales at the dataset's k (ERASER); the callback built from it says the same."""
    from hydra.utils import instantiate

    node = make_cfg("analysis=[faithfulness]").analysis.faithfulness
    assert (node.auc_tp_classes, node.auc_tp_count, node.hard_rationale_k) == ("sum", "floor_all", "dataset")
    built = instantiate(node)
    assert (built.auc_tp_classes, built.auc_tp_count, built.hard_rationale_k) == ("sum", "floor_all", "dataset")


# -- signed importance in the soft metrics; IOU precision against recall (issue 41) -------------------------------


def test_soft_metrics_scale_signed_importance_between_its_min_and_max():
    """Signed scores (the row's minimum is not 0): a = (s − min)/(max − min). Row (−2, 0, 2, −1) → (0, ½, 1, ¼);
    through the soft metrics, the signal token of (−3, 1, −1, 1) has a = (−1 + 3)/(1 + 3) = ½, so its dimension 0 is
    dropped where the draw u ≥ 1 − ½ (comprehensiveness) or u ≥ ½ (sufficiency), as worked out from the draws."""
    from attn_study.analysis.seeding import instance_draws
    from attn_study.families.faithfulness.measures import soft_scores, unit_importance

    signed = torch.tensor([[-2.0, 0.0, 2.0, -1.0, 7.0]], dtype=torch.float64)
    text = torch.tensor([[True, True, True, True, False]])
    assert unit_importance(signed, text)[0].tolist() == [0.0, 0.5, 1.0, 0.25, 0.0]
    s, b = 4.0, -0.2
    model = one_token_model(s, b)
    batch = token_batch([[3, 4, SIGNAL, 5]])
    _, _, probs = predict(model, batch)
    raw = torch.tensor([[-3.0, 1.0, -1.0, 1.0]], dtype=torch.float64)
    samples, seed = 40, 1
    soft, _ = soft_scores(model, batch, probs, {"m": raw}, seed, SOFT, samples, chunk_size=50)
    u = instance_draws(batch["index"], batch["mask"], seed, SOFT, leading=(samples, 6))[0, :, 0, 2]
    assert soft["m"][0].item() == pytest.approx((u >= 0.5).double().mean().item(), abs=1e-12)
    assert soft["m"][1].item() == pytest.approx(1 - (u >= 0.5).double().mean().item(), abs=1e-12)
    assert 0 < (u >= 0.5).double().mean().item() < 1  # both outcomes drawn: a = ½ is what decides


def test_iou_precision_and_recall_when_the_spans_differ_in_number_worked_by_hand():
    """Truth {1, 2, 3}: one true span. The ranking's top 3 are {1, 2, 5}: two selected spans, [1–2] (IOU 2/3 with
    [1–3]: a match) and [5] (none). IOU precision = 1 of 2 selected spans = ½; IOU recall = 1 of 1 true span = 1.
    And the other way: truth {1, 5} (two spans), top 2 = {1, 2} (one span, IOU ½ with [1]): precision 1, recall ½."""
    truth = torch.zeros(2, 8, dtype=torch.bool)
    truth[0, [1, 2, 3]] = True
    truth[1, [1, 5]] = True
    order = torch.tensor([[1, 2, 5, 0, 3, 4, 6, 7], [1, 2, 0, 3, 4, 5, 6, 7]])
    f1, precision, recall = hard_rationale_scores(order, truth, torch.ones_like(truth))
    assert precision.tolist() == [0.5, 1.0] and recall.tolist() == [1.0, 0.5]
    assert f1.tolist() == [2 / 3, 0.5]  # token F1: 2 of 3, 1 of 2


# -- from mutation survivors (issue 41) -----------------------------------------------------------------------------


def test_unit_importance_of_constant_and_nan_scores():
    """All equal (or all NaN): ½ on every text token; a NaN among others counts as 0: (NaN, 1, 2) → (0, ½, 1)."""
    from attn_study.families.faithfulness.measures import unit_importance

    scores = torch.tensor([[3.0, 3.0, 3.0], [math.nan, math.nan, 0.0], [math.nan, 1.0, 2.0]], dtype=torch.float64)
    text = torch.tensor([[True, True, False], [True, True, False], [True, True, True]])
    assert unit_importance(scores, text).tolist() == [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.5, 1.0]]


def test_each_methods_soft_metrics_are_its_own_whatever_the_other_methods():
    """The masks are the same draws for every method: Soft-NC and Soft-NS of a method computed beside another equal
    those computed for it alone (each method's pair of variants read from its own place)."""
    from attn_study.families.faithfulness.measures import soft_scores

    model = one_token_model(4.0, -0.2)
    batch = token_batch([[3, 4, SIGNAL, 5, 6], [SIGNAL, 3, 4, 5]])
    _, _, probs = predict(model, batch)
    first = torch.tensor([[1.0, 0.0, 0.2, 0.5, 0.5], [0.7, 0.0, 1.0, 0.3, 0.0]], dtype=torch.float64)
    second = torch.tensor([[0.0, 0.1, 0.9, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4, 0.0]], dtype=torch.float64)
    both, _ = soft_scores(model, batch, probs, {"first": first, "second": second}, seed=2, stream=SOFT, samples=8)
    for name, values in (("first", first), ("second", second)):
        alone, _ = soft_scores(model, batch, probs, {name: values}, seed=2, stream=SOFT, samples=8)
        for part in (0, 1):
            torch.testing.assert_close(both[name][part], alone[name][part], msg=f"{name} {part}")
    assert not torch.allclose(both["first"][1], both["second"][1])  # the two methods' Soft-NS differ


def test_f1_of_zero_precision_and_recall_is_zero_and_no_instance_gives_no_curve():
    from attn_study.families.faithfulness.measures import area_under_threshold_performance

    assert harmonic_f1([0.0, 0.5, 1.0], [0.0, 1.0, 1.0]).tolist() == pytest.approx([0.0, 2 / 3, 1.0])
    (value, _, _), curve = area_under_threshold_performance(
        np.zeros((0, 3), dtype=int), np.zeros(0, dtype=int), [0.0, 0.5, 1.0], "accuracy", 2
    )
    assert math.isnan(value) and len(curve) == 3 and np.isnan(curve).all()


def linear_convolution_model():
    """A width-3 convolution without its activation, uniform attention over the text and one logit: z is affine in
    the embeddings, and each text token's state reads its neighbours — <sos> and <eos> included."""
    model = tiny_model(
        partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=4), scorer=attention.UniformScorer, double=True
    )
    model.encoder.activation = torch.nn.Identity()
    return model


def logit_gradient_by_hand(model, length: int) -> torch.Tensor:
    """∂z/∂e_s (L + 2, d) for <sos>, the L text tokens, <eos>: z = w · (1/L) Σ_{text t} h_t + b with
    h_t = Σ_k W[:, :, k] e_{t+k−1} + bias, so ∂z/∂e_s = (1/L) Σ_{text t, |s − t| ≤ 1} W[:, :, s − t + 1]ᵀ w."""
    conv, w = model.encoder.convs[0], model.output.weight[0]
    grad = torch.zeros(length + 2, conv.weight.shape[1], dtype=torch.double)
    for s in range(length + 2):
        for t in range(max(1, s - 1), min(length, s + 1) + 1):  # text positions 1 … L
            grad[s] += conv.weight[:, :, s - t + 1].T @ w / length
    return grad


def test_integrated_gradients_keep_the_boundary_tokens_in_the_baseline_closed_form():
    """The baseline is x with the text's embeddings set to 0 and <sos>/<eos> kept (docs/faithfulness.md). For z affine
    in E the path integral has a closed form: along E(α) = b + α(x − b) z moves linearly by Δz = Σ_text e_s·∂z/∂e_s,
    so IG_s = (e_s·∂z/∂e_s) / Δz · (p_c(x) − p_c(b)), p_c = σ(z) for class 1 and 1 − σ(z) for class 0, with
    z(b) = z(x) − Δz: IG of <sos>/<eos> is 0 (they do not move) and the text's IG sum to p_c(x) − p_c(b)."""
    model = linear_convolution_model()
    texts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16, 17]]
    batch = token_batch(texts, boundary=True)
    target = torch.tensor([1, 0, 1])
    scores, gap = integrated_gradients(model, batch, target, steps=50)
    logits = model(batch)[0][:, 0]
    embedded = model.embed(batch)
    for r, text in enumerate(texts):
        n = len(text)
        moved = (embedded[r, 1 : n + 1] * logit_gradient_by_hand(model, n)[1 : n + 1]).sum(-1)  # e_s · ∂z/∂e_s
        z_input, z_baseline = logits[r], logits[r] - moved.sum()
        p = torch.sigmoid(torch.stack([z_input, z_baseline]))
        p = p if target[r] == 1 else 1 - p
        expected = torch.zeros(scores.shape[1], dtype=torch.double)
        expected[1 : n + 1] = moved / moved.sum() * (p[0] - p[1])
        torch.testing.assert_close(scores[r].detach(), expected, rtol=0, atol=1e-10, msg=f"text {r}")
    assert gap.abs().max() < 1e-10


def test_nan_or_zero_scores_are_counted_as_left_to_the_tie_break_and_a_nan_token_ranks_as_0():
    """A method whose scores are NaN over a text (a layer attention past ``flow_max_length``) ranks it by the
    tie-break alone (its NaN read as 0): counted with the constant ones. Here the gradient of instance 0 (four
    tokens) is made NaN everywhere: counted for the gradient, as instance 3's gradient made 0 everywhere (constant);
    instance 1's finite, distinct scores are not, nor is instance 2's (NaN, 0.2, 0.3), whose finite scores still
    rank its tokens. Instances 0 and 2 are the gradient's NaN ones (``nan_scores`` 2, ``constant_scores`` 2).
    A NaN token is a 0 against the rationale too: instance 2's gradient (NaN, 0.2, 0.3) with the rationale its
    first token ranks that token last, AP = precision at it = 1/3 (scikit-learn's average precision); and in the
    removal curves: every comprehensiveness and sufficiency is the one of the same scores with their NaN written 0.
    A NaN on a padding position (instance 1's fourth) is no NaN score of the text."""
    from sklearn.metrics import average_precision_score

    from attn_study.analysis.measuring import analysis_mode
    from attn_study.data.datamodule import collate
    from tests.helpers import StubData

    model = tiny_model(double=True)
    texts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14], [15, 16, 17]]
    batch = collate([{"index": i, "ids": t, "label": 0, "rationale": (0,)} for i, t in enumerate(texts)], num_classes=2)
    analysis = Faithfulness(methods=["attention", "gradient"], fractions=[0.5], hard_rationale_k="oracle")
    computed = analysis.scores

    def scored(nan: float):
        def with_nan(model, batch, alpha, probs, run):
            out, extra = computed(model, batch, alpha, probs, run)
            out["gradient"] = out["gradient"].masked_fill((batch["index"] == 0)[:, None], nan)
            out["gradient"][batch["index"] == 3] = 0.0
            out["gradient"][batch["index"] == 2, :3] = torch.tensor([nan, 0.2, 0.3], dtype=torch.double)
            out["gradient"][batch["index"] == 1, 3] = float("nan")  # padding: no token of the text
            return out, extra

        analysis.scores = with_nan
        with analysis_mode(model):
            return analysis.measure(model, StubData(batch), "test", np.arange(4), ["removal", "rationale"])

    measured, written_0 = scored(float("nan")), scored(0.0)
    curves = [c for c in measured.frame if c.startswith(("gradient_comp", "gradient_suff"))]
    assert curves and measured.frame[curves].equals(written_0.frame[curves])
    assert measured.frame["gradient_constant"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert measured.frame["gradient_nan"].tolist() == [1.0, 0.0, 1.0, 0.0]
    summary = analysis.summarise(measured, ["removal", "rationale"])
    assert (summary["ff/gradient/constant_scores"], summary["ff/gradient/nan_scores"]) == (2, 2)
    assert (summary["ff/attention/constant_scores"], summary["ff/attention/nan_scores"]) == (0, 0)
    expected = average_precision_score([1, 0, 0], [0.0, 0.2, 0.3])
    assert expected == pytest.approx(1 / 3) and measured.frame["gradient_ap"][2] == pytest.approx(expected)
    assert measured.frame["attention_constant"].tolist() == [0.0, 0.0, 0.0, 0.0]
