"""Faithfulness of importance rankings (DeYoung et al. 2020, ERASER), and their agreement with known
rationales: attention against the attribution methods it is usually compared with, on one model.

Per test instance, ŷ the predicted class and p(ŷ|·) its probability, each method scores the text's
tokens (each method's record, ``importance.METHODS``, says how, and whether it flows through the attention); ties are
broken by a random key drawn from (``seed``, instance index). For each fraction k (``fractions``,
ERASER's 1, 5, 10, 20, 50 %) the rationale r_k is the top ⌈k·L⌉ tokens (L: the text's length;
``<sos>``/``<eos>`` are never ranked nor removed) and

    comprehensiveness_k = p(ŷ|x) − p(ŷ|x∖r_k)      (r_k deleted: the sequence gets shorter)
    sufficiency_k       = p(ŷ|x) − p(ŷ|r_k)        (r_k alone, in its order)

AOPC = their mean over the k (as ERASER's released scorer averages its thresholds). High
comprehensiveness and low sufficiency are faithful. Where the data has ground-truth rationales, the
scores are also compared with them as ERASER's scorer does: AUPRC (scikit-learn's ``auc(recall,
precision)``, the trapezoid rule, tied scores entering together) and AP (``average_precision_score``), each
beside its exact chance level; and the top ⌈k_d·L⌉ tokens of the ranking as a hard rationale, k_d fixed per
dataset (``hard_rationale_k``; ERASER's k_d, the average human rationale length of the dataset, by default; the
top |truth| of each instance is the oracle): token F1 and IOU F1 (spans matching at IOU ≥ ``iou_threshold``,
ERASER's 0.5); and the attention's mass on the rationale,
Σ_{t ∈ truth} α_t (``ff/attention/rationale_mass``, Mohankumar et al.'s measure). With attention among the
methods, each other method's agreement with it: Kendall τ-b between the two score vectors over the text's tokens,
per instance (``ff/<method>/tau_attention``; ``random`` left out).

All deletions of a batch — every method × k × {comprehensiveness, sufficiency}, identical token sets
computed once — run as chunked model calls (``internal_batch_size`` sequences, similar lengths
together). Instances of one token have nothing to remove: NaN, counted in ``n``. Every mean has a
95 % bootstrap interval; each method is compared with attention per instance (Wilcoxon signed-rank
p-value, mean paired difference). Metric keys ``ff/...``; outputs in ``analysis/faithfulness/``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch
from scipy import stats

from attn_study.analysis.importance import (
    METHODS,
    by_length,
    grad_context,
    gradient_importance,
    kept_probabilities,
    logits_from_leaf,
    rows_of,
    token_mask,
)
from attn_study.analysis.seeding import instance_draws
from attn_study.stats import (
    bootstrap_ci_of,
    probability_drop,
)

#: an integrated-gradients completeness gap above this (in probability) flags a path the quadrature missed
GAP_TOLERANCE = 0.05


# ------------------------------------------------------------------------------------------------
# rankings and what they are scored by
# ------------------------------------------------------------------------------------------------


def ranking(scores: torch.Tensor, text: torch.Tensor, tiebreak: torch.Tensor) -> torch.Tensor:
    """Positions (B, T) in order of importance: the text's tokens by descending score (ties by
    descending ``tiebreak``), then the other positions."""
    keyed = torch.where(text, scores.double(), torch.full_like(tiebreak, -torch.inf))
    by_key = torch.argsort(torch.where(text, tiebreak, torch.full_like(tiebreak, -1.0)), dim=1, descending=True)
    then = torch.argsort(keyed.gather(1, by_key), dim=1, descending=True, stable=True)
    return by_key.gather(1, then)


def rank_of(order: torch.Tensor) -> torch.Tensor:
    """rank_of[b, t] = where token t comes in ``order[b]`` (0 = the most important)."""
    ranks = torch.empty_like(order)
    return ranks.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))


def top_counts(lengths: torch.Tensor, fraction) -> torch.Tensor:
    """⌈k·L⌉ in exact arithmetic (0.1 · 30 is 3, not 3.0000000000000004 → 4)."""
    k = Fraction(str(fraction))
    return (lengths * k.numerator + k.denominator - 1) // k.denominator


def floor_counts(lengths: torch.Tensor, fraction) -> torch.Tensor:
    """⌊k·n⌋ in exact arithmetic (0.7 · 10 is 7, not 7.000000000000001)."""
    k = Fraction(str(fraction))
    return (lengths * k.numerator) // k.denominator


#: how many tokens AUC-TP masks at a fraction k (``auc_tp_count``)
AUC_TP_COUNTS = ("floor_all", "ceil_text")


def masked_counts(batch: dict, fraction, count: str) -> torch.Tensor:
    """(B,) the tokens AUC-TP masks at fraction k: ``floor_all``, Atanasova et al.'s ⌊k·n⌋ with n every token of the
    sequence (``<sos>``/``<eos>`` counted, as their code counts [CLS] and [SEP]), at most the L text tokens (the
    boundary tokens are never ranked nor masked); ``ceil_text``: ⌈k·L⌉, the rationale sizes of the removal test."""
    text = token_mask(batch).sum(1)
    if count == "ceil_text":
        return top_counts(text, fraction)
    return torch.minimum(floor_counts(batch["lengths"], fraction), text)


#: where the analysis rationale's size comes from (``hard_rationale_k``), besides a fraction or a count
HARD_K_CHOICES = ("dataset", "oracle")


def dataset_rationale_share(split) -> float:
    """k_d: the mean share of an instance's text tokens that its rationale covers, over the instances of ``split``
    with a non-empty rationale (ERASER's average human rationale length of a dataset, as a fraction); NaN with none."""
    rationales = getattr(split, "rationales", None) or []
    shares = []
    for ids, rationale in zip(split.ids, rationales):
        if rationale:
            length = len(ids) - (2 if split.boundary else 0)
            shares.append(len(rationale) / length)
    return float(np.mean(shares)) if shares else math.nan


def hard_rationale_sizes(text: torch.Tensor, truth: torch.Tensor, k) -> torch.Tensor:
    """(B,) how many of each instance's top tokens form its hard rationale: ``oracle``, |truth|; a fraction k in
    (0, 1), ⌈k·L⌉ (ERASER's baseline code: ``math.ceil(n · threshold)``); a whole count, min(k, L)."""
    lengths = text.sum(1)
    if k == "oracle":
        return (truth & text).sum(1)
    if isinstance(k, int):
        return torch.clamp(lengths, max=k)
    return top_counts(lengths, k)


def precision_recall_areas(
    scores: torch.Tensor, truth: torch.Tensor, text: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(AUPRC, AP) (B,) of ``scores`` (B, T) against ``truth`` over the ``text`` tokens, as ERASER's scorer
    computes them with scikit-learn: one point per distinct score (tied tokens enter together), at
    threshold τ precision P_τ = TP/(TP + FP) and recall R_τ = TP/|truth|;

        AUPRC = Σ_τ (R_τ − R_τ') (P_τ + P_τ') / 2     (``auc(recall, precision)``: the trapezoid rule, the
                                                      curve starting at (R, P) = (0, 1))
        AP    = Σ_τ (R_τ − R_τ') P_τ                  (``average_precision_score``)

    τ' the next higher threshold. Neither breaks ties at random. NaN without truth."""
    b, t = scores.shape
    keyed = torch.where(text, scores.double(), torch.full((b, t), -math.inf, dtype=torch.float64, device=scores.device))
    keyed = torch.nan_to_num(keyed, nan=-math.inf, neginf=-math.inf)
    ordered, order = torch.sort(keyed, dim=1, descending=True, stable=True)
    valid = text.gather(1, order)
    hits = (truth & text).gather(1, order).double().cumsum(1)
    seen = valid.double().cumsum(1)
    positives = (truth & text).sum(1, keepdim=True).double()
    nxt = torch.cat([ordered[:, 1:], torch.full((b, 1), -math.inf, dtype=torch.float64, device=scores.device)], 1)
    last_valid = valid & ~torch.cat([valid[:, 1:], torch.zeros((b, 1), dtype=torch.bool, device=valid.device)], 1)
    end = valid & ((ordered != nxt) | last_valid)  # the last token of each tie group: one point per threshold
    precision = hits / seen.clamp_min(1)
    recall = hits / positives.clamp_min(1)
    index = torch.arange(t, device=scores.device).expand(b, t)
    before = torch.where(end, index, torch.full_like(index, -1)).cummax(1).values
    before = torch.cat([torch.full((b, 1), -1, device=scores.device, dtype=index.dtype), before[:, :-1]], 1)
    first = before < 0  # the previous point is the curve's start (0, 1)
    r_prev = torch.where(first, 0.0, recall.gather(1, before.clamp_min(0)))
    p_prev = torch.where(first, 1.0, precision.gather(1, before.clamp_min(0)))
    step = (recall - r_prev) * end
    auprc = (step * (precision + p_prev) / 2).sum(1)
    ap = (step * precision).sum(1)
    nan = torch.full_like(auprc, float("nan"))
    has = positives.squeeze(1) > 0
    return torch.where(has, auprc, nan), torch.where(has, ap, nan)


def chance_areas(lengths: torch.Tensor, positives: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E[AUPRC], E[AP]) of a uniformly random ranking (no ties) of L tokens of which P are true — the
    chance levels, which for short texts lie well above the base rate P/L:

        E[AP]    = (1/L) · (H_L + (P − 1)/(L − 1) · (L − H_L)),   H_L = Σ_{r ≤ L} 1/r
        E[AUPRC] = E[AP] − (L − P)(H_L − 1) / (2L(L − 1))

    (a true token at rank r has expected precision (1 + (P − 1)(r − 1)/(L − 1))/r, r uniform; the trapezoid
    gives up half the rise in precision at each true token r > 1, in expectation (L − P)/((L − 1) r)).
    NaN without truth; 1 when L = P."""
    length, positives = lengths.double(), positives.double()
    harmonic = torch.special.digamma(length + 1) + np.euler_gamma
    others = torch.where(length > 1, (positives - 1) / (length - 1).clamp_min(1), torch.zeros_like(length))
    ap = (harmonic + others * (length - harmonic)) / length.clamp_min(1)
    auprc = ap - torch.where(
        length > 1,
        (length - positives) * (harmonic - 1) / (2 * length * (length - 1).clamp_min(1)),
        torch.zeros_like(length),
    )
    nan = torch.full_like(ap, float("nan"))
    return torch.where(positives > 0, auprc, nan), torch.where(positives > 0, ap, nan)


def _runs(selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(run id (B, T): the maximal contiguous run of ``selected`` each token is in, −1 outside; runs (B,))."""
    start = selected & ~torch.cat([torch.zeros_like(selected[:, :1]), selected[:, :-1]], 1)
    ids = start.long().cumsum(1) - 1
    return torch.where(selected, ids, torch.full_like(ids, -1)), start.sum(1)


def hard_rationale_scores(
    order: torch.Tensor, truth: torch.Tensor, text: torch.Tensor, threshold: float = 0.5, sizes=None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ERASER's hard-rationale scores of the top ``sizes`` (B,) tokens of the ranking ``order`` (B, T) (default: the
    top |truth|, the oracle): (token F1, IOU precision, IOU recall) (B,), NaN without truth.

    Token F1 is the F1 of the selected tokens against the true ones, 2PR / (P + R) = 2·hits / (|selected| + |truth|)
    (0 without a hit; ERASER's instance-level token F1); with as many selected as are true, precision = recall = F1 =
    precision@|truth|. IOU: the selected and the true tokens as spans (maximal
    contiguous runs); a selected span matches when its intersection-over-union with some true span is ≥
    ``threshold``; IOU precision = matches / selected spans, IOU recall = matches / true spans (ERASER's
    ``partial_match_score``; its IOU F1 is the F1 of their means over instances)."""
    truth = truth & text
    positives = truth.sum(1)
    sizes = positives if sizes is None else sizes
    selected = (rank_of(order) < sizes[:, None]) & text
    hits = (selected & truth).sum(1).double()
    token_f1 = 2 * hits / (selected.sum(1) + positives).clamp_min(1)
    pred_id, n_pred = _runs(selected)
    true_id, n_true = _runs(truth)
    width = int(max(int(n_pred.max()) if len(n_pred) else 0, int(n_true.max()) if len(n_true) else 0, 1))

    def one_hot(ids):
        return torch.nn.functional.one_hot(ids.clamp_min(0), width).double() * (ids >= 0).unsqueeze(-1)

    pred, true = one_hot(pred_id), one_hot(true_id)  # (B, T, R)
    inter = torch.einsum("bta,btc->bac", pred, true)
    union = pred.sum(1)[:, :, None] + true.sum(1)[:, None, :] - inter
    iou = torch.where(union > 0, inter / union.clamp_min(1), torch.zeros_like(inter))
    matched = (
        ((iou.amax(2) >= threshold) & (torch.arange(width, device=order.device) < n_pred[:, None])).sum(1).double()
    )
    nan = torch.full_like(token_f1, float("nan"))
    has = positives > 0
    return (
        torch.where(has, token_f1, nan),
        torch.where(has, matched / n_pred.clamp_min(1), nan),
        torch.where(has, matched / n_true.clamp_min(1), nan),
    )


@torch.no_grad()
def removal_curves(
    model, batch: dict, probs: torch.Tensor, orders: dict[str, torch.Tensor], fractions, chunk_size: int = 512
) -> dict[str, torch.Tensor]:
    """{method: (comprehensiveness (B, K), sufficiency (B, K))} for the rankings ``orders`` at each
    fraction; every distinct kept-token set of the batch is run once."""
    mask, text = batch["mask"], token_mask(batch)
    lengths = text.sum(1)
    b = mask.shape[0]
    top = probs.argmax(-1)
    keeps = []
    for order in orders.values():
        ranks = rank_of(order)
        for fraction in fractions:
            rationale = (ranks < top_counts(lengths, fraction)[:, None]) & text
            keeps += [mask & ~rationale, rationale | (mask & ~text)]
    keep = torch.stack(keeps)  # (M·K·2, B, T)
    inst = torch.arange(b, device=mask.device).repeat(len(keeps))
    keep = keep.reshape(-1, mask.shape[1])
    unique, inverse = torch.unique(torch.cat([inst[:, None], keep.long()], 1), dim=0, return_inverse=True)
    kept = kept_probabilities(model, batch, unique[:, 0], unique[:, 1:].bool(), chunk_size)
    change = probability_drop(probs[unique[:, 0]], kept, top[unique[:, 0]])[inverse]  # p(ŷ|x) − p(ŷ|kept)
    change = change.reshape(len(orders), len(fractions), 2, b)
    change = change.masked_fill((lengths < 2)[None, None, None, :], float("nan"))
    return {name: (change[m, :, 0].T, change[m, :, 1].T) for m, name in enumerate(orders)}


@torch.no_grad()
def perturbed_probabilities(model, batch: dict, inst: torch.Tensor, perturb, chunk_size: int = 512) -> torch.Tensor:
    """ŷ (N, C) of instance ``inst[n]`` re-run from perturbed embeddings: ``perturb(rows, E)`` gets the positions
    ``rows`` in ``inst`` of one chunk and their embeddings E (n, T, d) and returns what the encoder reads instead
    (the tokens stay where they are; attention and decoder recomputed); chunks of ``chunk_size`` rows."""
    embedded = model.embed(batch)
    out = []
    for start in range(0, len(inst), max(int(chunk_size), 1)):
        rows = torch.arange(start, min(start + int(chunk_size), len(inst)), device=inst.device)
        i = inst[rows]
        enc = model.encode(rows_of(batch, i), embedded=perturb(rows, embedded[i]))
        out.append(model.probabilities(model.decode(enc, model.attend(enc))))
    return torch.cat(out)


def empty_probabilities(model, batch: dict, chunk_size: int = 512) -> torch.Tensor:
    """ŷ (B, C) of the empty text: every text token's embedding set to 0, boundary tokens kept (the baseline of
    integrated gradients, and every token of :func:`soft_scores` with all its dimensions dropped)."""
    text = token_mask(batch)
    inst = torch.arange(text.shape[0], device=text.device)
    return perturbed_probabilities(model, batch, inst, lambda rows, e: e * ~text[inst[rows], :, None], chunk_size)


def unit_importance(scores: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """Importance mapped to [0, 1] over the text's tokens: (s − min) / (max − min); ½ for every token where all
    are equal (or NaN); 0 off the text. NaN scores count as 0."""
    s = torch.nan_to_num(scores.double(), nan=0.0)
    low = torch.where(text, s, torch.full_like(s, math.inf)).amin(1, keepdim=True)
    high = torch.where(text, s, torch.full_like(s, -math.inf)).amax(1, keepdim=True)
    span = high - low
    unit = torch.where(
        span > 0, (s - low) / torch.where(span > 0, span, torch.ones_like(span)), torch.full_like(s, 0.5)
    )
    return unit * text


@torch.no_grad()
def soft_scores(
    model,
    batch: dict,
    probs: torch.Tensor,
    scores: dict,
    seed: int,
    stream: int,
    samples: int = 1,
    chunk_size: int = 512,
    clip: bool = True,
) -> tuple[dict, torch.Tensor]:
    """({method: (Soft-NC (B,), Soft-NS (B,))}, p(ŷ|x) − p(ŷ|∅) (B,)): Zhao & Aletras's (2023) soft normalised
    comprehensiveness and sufficiency of each method's ``scores``.

    a_t ∈ [0, 1] is the importance over the text (:func:`unit_importance`); x' keeps each embedding dimension of
    token t with probability q_t (a Bernoulli mask on the dimensions, the rest set to 0), q_t = 1 − a_t for
    comprehensiveness (the important tokens erased most), q_t = a_t for sufficiency; boundary tokens are kept.
    With d = max(0, p(ŷ|x) − p(ŷ|∅)) (∅: every text embedding 0, :func:`empty_probabilities`):

        Soft-NC = max(0, p(ŷ|x) − p(ŷ|x'_comp)) / d
        Soft-NS = (Soft-S(x') − S(∅)) / (1 − S(∅)) = 1 − max(0, p(ŷ|x) − p(ŷ|x'_suff)) / d

    (S(·) = 1 − max(0, p(ŷ|x) − p(ŷ|·))), each drop averaged over ``samples`` masks, clipped to [0, 1] with
    ``clip`` (x' may lower p(ŷ) below p(ŷ|∅), and a small d makes the ratio unbounded); NaN where d = 0 (the
    empty text predicts ŷ as confidently: nothing to normalise by). The masks are uniform draws u (the instance's
    own, from ``seed`` and ``stream``: ``analysis.seeding``) compared with q, the same draws for every method and both
    metrics."""
    text, mask = token_mask(batch), batch["mask"]
    b, t = mask.shape
    top = probs.argmax(-1)
    empty = probability_drop(probs, empty_probabilities(model, batch, chunk_size), top)  # p(ŷ|x) − p(ŷ|∅)
    dim = model.embed(batch).shape[-1]
    draws = instance_draws(batch["index"], mask, seed, stream, leading=(samples, dim))
    draws = draws.permute(0, 1, 3, 2)  # (B, S, T, d)
    keep = []  # per method: q for comprehensiveness, then sufficiency (B, T)
    for values in scores.values():
        unit = unit_importance(values, text)
        keep += [torch.where(text, 1 - unit, 1.0), torch.where(text, unit, 1.0)]
    keep = torch.stack(keep)  # (2M, B, T)
    n_var = keep.shape[0]
    # one row per (variant, sample, instance)
    variant = torch.arange(n_var, device=mask.device).repeat_interleave(samples * b)
    sample = torch.arange(samples, device=mask.device).repeat_interleave(b).repeat(n_var)
    inst = torch.arange(b, device=mask.device).repeat(n_var * samples)

    def perturb(rows, embedded):
        kept = draws[inst[rows], sample[rows]] < keep[variant[rows], inst[rows]][..., None]
        return embedded * kept.to(embedded.dtype)

    kept_probs = perturbed_probabilities(model, batch, inst, perturb, chunk_size)
    drop = probability_drop(probs[inst], kept_probs, top[inst]).clamp_min(0).reshape(n_var, samples, b).mean(1)
    d = empty.clamp_min(0)
    ratio = torch.where(d > 0, drop / torch.where(d > 0, d, torch.ones_like(d)), torch.full_like(drop, float("nan")))
    ratio = ratio.clamp(0, 1) if clip else ratio
    return {m: (ratio[2 * j], 1 - ratio[2 * j + 1]) for j, m in enumerate(scores)}, empty


@torch.no_grad()
def threshold_predictions(
    model, batch: dict, orders: dict[str, torch.Tensor], fractions, chunk_size: int = 512, count: str = "floor_all"
) -> dict[str, torch.Tensor]:
    """{method: predicted class (B, K)} with the top tokens of its ranking masked (their embeddings set to 0, in
    place) at each fraction k, as many as ``count`` says (:func:`masked_counts`); every distinct masked-token set of
    the batch is run once."""
    mask, text = batch["mask"], token_mask(batch)
    b = mask.shape[0]
    keeps = []
    for order in orders.values():
        ranks = rank_of(order)
        keeps += [~((ranks < masked_counts(batch, k, count)[:, None]) & text) for k in fractions]
    keep = torch.stack(keeps).reshape(-1, mask.shape[1])  # (M·K·B, T)
    inst = torch.arange(b, device=mask.device).repeat(len(keeps))
    unique, inverse = torch.unique(torch.cat([inst[:, None], keep.long()], 1), dim=0, return_inverse=True)
    kept = unique[:, 1:].bool()
    probs = perturbed_probabilities(
        model, batch, unique[:, 0], lambda rows, e: e * kept[rows, :, None].to(e.dtype), chunk_size
    )
    predicted = probs.argmax(-1)[inverse].reshape(len(orders), len(fractions), b)
    return {name: predicted[m].T for m, name in enumerate(orders)}


#: methods whose scores for the classes sum to zero: signed scores of a class's probability (Σ_c p_c = 1)
CLASS_SUM_ZERO = tuple(name for name, method in METHODS.items() if method.signed and method.explains_class)


def class_gradient_norms(model, batch: dict) -> torch.Tensor:
    """Σ_c ‖∂p_c/∂e_t‖₂ (B, T) over the classes c, through the attention (two classes: 2‖∂p_1/∂e_t‖₂)."""

    def compute(rows, sub):
        with torch.enable_grad(), grad_context(sub["mask"].device):
            emb, logits = logits_from_leaf(model, sub, detach_attention=False)
            probs = model.probabilities(logits)
            outputs, factor = ([1], 2.0) if probs.shape[1] == 2 else (range(probs.shape[1]), 1.0)
            total = torch.zeros(emb.shape[:2], device=emb.device, dtype=emb.dtype)
            for c in outputs:
                (grad,) = torch.autograd.grad(probs[:, c].sum(), emb, retain_graph=True)
                total = total + factor * grad.norm(dim=-1)
        return (total,)

    (scores,) = by_length(batch, compute)
    return scores * token_mask(batch)


def class_summed_scores(method: str, model, batch: dict, scores: torch.Tensor) -> torch.Tensor:
    """Atanasova et al.'s saliency summed over the classes, Σ_c s(x, c), s(x, c) the method's score for class c
    (its record's formula, ``importance.METHODS``, with ŷ replaced by c): ``gradient`` Σ_c |∂p_c/∂e_t · e_t|,
    ``grad_norm`` Σ_c ‖∂p_c/∂e_t‖₂; a method that explains no class (attention, random, a Transformer's layer
    attention) keeps its ``scores``.
    ``CLASS_SUM_ZERO``'s sum is 0 whatever the input: refused before (``Faithfulness.__init__``)."""
    if method == "gradient":
        return gradient_importance(model, batch, detach_attention=True, normalise=False, classes="sum")
    if method == "grad_norm":
        return class_gradient_norms(model, batch)
    return scores


def _trapezoid(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """∫ y dx over the last axis by the trapezoid rule."""
    return ((y[..., 1:] + y[..., :-1]) / 2 * np.diff(x)).sum(-1)


def performance_columns(predictions: np.ndarray, labels: np.ndarray, measure: str, num_classes: int) -> np.ndarray:
    """Per-instance columns (n, ·) whose means determine the performance at each threshold (:func:`performance`):
    correct (n, K) for accuracy; for macro F1 the indicators TP, FP, FN (n, 3, C, K) of every class."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)[:, None]
    if measure == "accuracy":
        return (predictions == labels).astype(float)
    classes = np.arange(num_classes)[None, :, None]
    pred, gold = predictions[:, None, :] == classes, labels[:, None, :] == classes  # (n, C, K)
    return np.stack([pred & gold, pred & ~gold, ~pred & gold], 1).astype(float).reshape(len(predictions), -1)


def performance(means: np.ndarray, measure: str, num_classes: int, thresholds: int) -> np.ndarray:
    """The performance (…, K) at each threshold from the means (…, ·) of :func:`performance_columns`: accuracy,
    or macro F1 = the mean over the classes present (in the gold labels or the predictions, as scikit-learn's
    ``f1_score(average='macro')``) of 2TP / (2TP + FP + FN)."""
    if measure == "accuracy":
        return means
    tp, fp, fn = np.moveaxis(means.reshape(*means.shape[:-1], 3, num_classes, thresholds), -3, 0)
    total = 2 * tp + fp + fn
    present = total > 0
    f1 = np.where(present, 2 * tp / np.where(present, total, 1.0), 0.0)
    return f1.sum(-2) / np.maximum(present.sum(-2), 1)


def area_under_threshold_performance(
    predictions: np.ndarray, labels: np.ndarray, fractions, measure: str, num_classes: int
) -> tuple[tuple[float, float, float], np.ndarray]:
    """((AUC-TP, CI low, CI high), performance at each fraction (K,)) — Atanasova et al. (2020): the area under
    the model's performance against ``fractions`` (trapezoid rule: with k from 0 to 1, a mean performance; the
    family passes k in percent, as their ``auc(thresholds, scores)``), with the percentile-bootstrap interval over
    instances (the whole curve recomputed per resample). Lower is more faithful."""
    x = np.asarray(fractions, dtype=float)
    columns = performance_columns(predictions, labels, measure, num_classes)

    def curve(means):
        return performance(means, measure, num_classes, len(x))

    value = bootstrap_ci_of(lambda means: _trapezoid(curve(means), x), columns)
    return value, curve(columns.mean(0)) if len(columns) else np.full(len(x), np.nan)


# ------------------------------------------------------------------------------------------------
# the callback
# ------------------------------------------------------------------------------------------------


def harmonic_f1(precision, recall):
    """2PR / (P + R), 0 where P + R = 0 (ERASER's ``harmonic_f1``)."""
    precision, recall = np.asarray(precision, dtype=float), np.asarray(recall, dtype=float)
    total = precision + recall
    return np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1.0), 0.0)


def paired_with_attention(values: np.ndarray, attention: np.ndarray, stem: str) -> dict:
    """Per instance ``values − attention``: its mean and the two-sided Wilcoxon signed-rank p-value
    (zero differences dropped; NaN when no difference is left)."""
    both = ~np.isnan(values) & ~np.isnan(attention)
    diff = values[both] - attention[both]
    p = float("nan")
    if np.any(diff != 0):
        p = float(stats.wilcoxon(diff[diff != 0]).pvalue)
    return {f"{stem}/vs_attention_diff": float(diff.mean()) if len(diff) else float("nan"), f"{stem}/vs_attention_p": p}
