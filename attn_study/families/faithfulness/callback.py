"""Faithfulness of importance rankings (DeYoung et al. 2020, ERASER), and their agreement with known
rationales: attention against the attribution methods it is usually compared with, on one model.

Per test instance, ŷ the predicted class and p(ŷ|·) its probability, each method scores the text's
tokens (``keys.FF_METHODS`` says how, and whether the gradient flows through the attention); ties are
broken by a random key drawn from (``seed``, instance index). For each fraction k (``fractions``,
ERASER's 1, 5, 10, 20, 50 %) the rationale r_k is the top ⌈k·L⌉ tokens (L: the text's length;
``<sos>``/``<eos>`` are never ranked nor removed) and

    comprehensiveness_k = p(ŷ|x) − p(ŷ|x∖r_k)      (r_k deleted: the sequence gets shorter)
    sufficiency_k       = p(ŷ|x) − p(ŷ|r_k)        (r_k alone, in its order)

AOPC = their mean over the k (as ERASER's released scorer averages its thresholds). High
comprehensiveness and low sufficiency are faithful. Where the data has ground-truth rationales, the
scores are also compared with them as ERASER's scorer does: AUPRC (scikit-learn's ``auc(recall,
precision)``, the trapezoid rule, tied scores entering together) and AP (``average_precision_score``), each
beside its exact chance level; and the top |truth| tokens of the ranking as a hard rationale: token F1
and IOU F1 (spans matching at IOU ≥ ``iou_threshold``, ERASER's 0.5); and the attention's mass on the rationale,
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
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from attn_study import families
from attn_study.analysis.aggregation import AGGREGATIONS, AggregationOptions, check_aggregations
from attn_study.analysis.callback import AnalysisCallback, Measured, instance_row, whole
from attn_study.analysis.importance import (
    ImportanceOptions,
    importance,
    kept_probabilities,
    predict,
    token_mask,
)
from attn_study.analysis.measures import (
    MEAN_STATS,
    UNDEFINED,
    bootstrap_ci_of,
    kendall_tau_b,
    probability_drop,
    summarise,
    undefined_code,
)
from attn_study.analysis.seeding import instance_draws
from attn_study.errors import UserError

from .figures import faithfulness_figure
from .keys import FF_METHODS, ff, ff_fraction

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
    order: torch.Tensor, truth: torch.Tensor, text: torch.Tensor, threshold: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ERASER's hard-rationale scores of the top |truth| tokens of the ranking ``order`` (B, T): (token F1,
    IOU precision, IOU recall) (B,), NaN without truth.

    Token F1 is the F1 of the selected tokens against the true ones; with as many selected as are true,
    precision = recall = F1 = precision@|truth|. IOU: the selected and the true tokens as spans (maximal
    contiguous runs); a selected span matches when its intersection-over-union with some true span is ≥
    ``threshold``; IOU precision = matches / selected spans, IOU recall = matches / true spans (ERASER's
    ``partial_match_score``; its IOU F1 is the F1 of their means over instances)."""
    truth = truth & text
    positives = truth.sum(1)
    selected = (rank_of(order) < positives[:, None]) & text
    hits = (selected & truth).sum(1).double()
    token_f1 = hits / positives.clamp_min(1)
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


# ------------------------------------------------------------------------------------------------
# the callback
# ------------------------------------------------------------------------------------------------


class Faithfulness(AnalysisCallback):
    """The faithfulness benchmark as a callback; options in conf/analysis/faithfulness.yaml.

    Tests: ``removal`` (comprehensiveness / sufficiency / AOPC) and ``rationale`` (AUPRC and
    precision@|truth| where the data has ground-truth rationales)."""

    CPU_MAX_BATCH = 64  # each instance carries its deletions and integrated-gradient steps

    TESTS = ("removal", "rationale")
    VAL_TESTS = ("removal", "rationale")
    TRACKED = families.TRACKED["faithfulness"]

    def __init__(
        self,
        *,
        methods=None,
        fractions=(0.01, 0.05, 0.1, 0.2, 0.5),
        ig_steps: int = 50,
        internal_batch_size: int = 512,
        iou_threshold: float = 0.5,
        **common,
    ):
        super().__init__(**common)
        self.iou_threshold = float(iou_threshold)
        if not 0 < self.iou_threshold <= 1:
            raise UserError(f"{self._option('iou_threshold')}={iou_threshold}: give an IOU in (0, 1]")
        default = [m for m in FF_METHODS if m not in AGGREGATIONS]  # those need encoder=transformer: asked for by name
        self.methods = self._choose("methods", default if methods is None else methods, FF_METHODS)
        self.fractions = tuple(float(f) for f in fractions)
        if not self.fractions or any(not 0 < f < 1 for f in self.fractions):
            raise UserError(f"{self._option('fractions')}={list(fractions)}: give fractions of the length in (0, 1)")
        if len({ff_fraction(f) for f in self.fractions}) != len(self.fractions):
            raise UserError(f"{self._option('fractions')}={list(fractions)}: two fractions round to the same percent")
        self.ig_steps = whole(self._option("ig_steps"), ig_steps)
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)

    def check_model(self, model) -> None:
        if not getattr(model, "token_attention", True):
            raise UserError(
                f"analysis=faithfulness ranks tokens, and {type(model).__name__}'s final attention is "
                "over sentences; use model=flat"
            )
        check_aggregations(model, self.methods, AggregationOptions(), self._option("methods"))

    # -- measuring -------------------------------------------------------------------------------

    def scores(self, model, batch: dict, alpha, probs, seconds: dict) -> tuple[dict, dict]:
        """({method: (B, T) scores}, {extra column: (B,)}) of every chosen method (``importance.METHODS``)."""
        options = ImportanceOptions(chunk_size=self.internal_batch_size, ig_steps=self.ig_steps, seed=self.seed)
        out, extra = {}, {}
        for method in self.methods:
            started = time.time()
            out[method], more = importance(method, model, batch, alpha, probs, options)
            extra.update(more)
            seconds[method] += time.time() - started
        return out, extra

    def measure(self, model, data, split, indices, tests) -> Measured:
        split_data = data.split(split)
        rows: dict[int, dict] = {}
        seconds = dict.fromkeys(["predict", *self.methods, *tests], 0.0)
        for batch in self.batches(model, data, split, indices, "+".join(tests)):
            started = time.time()
            _, alpha, probs = predict(model, batch)
            seconds["predict"] += time.time() - started
            scores, columns = self.scores(model, batch, alpha, probs, seconds)
            text = token_mask(batch)
            columns["length"] = text.sum(1)
            for method, values in scores.items():  # rankings left to the random tie-break alone (counted)
                columns[f"{method}_constant"] = (undefined_code(values, text) >= UNDEFINED.index("nan")).double()
            if "attention" in scores:  # how each method ranks the tokens against attention: Kendall τ-b per instance
                for method in scores.keys() - {"attention", "random"}:
                    columns[f"{method}_tau_attention"] = kendall_tau_b(scores["attention"], scores[method], text)[0]
            tiebreak = instance_draws(batch["index"], batch["mask"], self.seed, "faithfulness_ties")
            orders = {m: ranking(torch.nan_to_num(s.double(), nan=0.0), text, tiebreak) for m, s in scores.items()}
            if "removal" in tests:
                started = time.time()
                curves = removal_curves(model, batch, probs, orders, self.fractions, self.internal_batch_size)
                for method, (comp, suff) in curves.items():
                    for j, fraction in enumerate(self.fractions):
                        columns[f"{method}_comp_{ff_fraction(fraction)}"] = comp[:, j]
                        columns[f"{method}_suff_{ff_fraction(fraction)}"] = suff[:, j]
                    columns[f"{method}_comp_aopc"], columns[f"{method}_suff_aopc"] = comp.mean(1), suff.mean(1)
                seconds["removal"] += time.time() - started
            if "rationale" in tests and "rationale" in batch:
                started = time.time()
                truth = batch["rationale"] & text
                columns["rationale_size"] = truth.sum(1)
                columns["chance_auprc"], columns["chance_ap"] = chance_areas(text.sum(1), truth.sum(1))
                columns["attention_rationale_mass"] = (alpha * truth).sum(1)  # Σ α_t over the rationale's tokens
                for method, order in orders.items():
                    columns[f"{method}_auprc"], columns[f"{method}_ap"] = precision_recall_areas(
                        torch.nan_to_num(scores[method].double(), nan=0.0), truth, text
                    )
                    (
                        columns[f"{method}_token_f1"],
                        columns[f"{method}_iou_precision"],
                        columns[f"{method}_iou_recall"],
                    ) = hard_rationale_scores(order, truth, text, self.iou_threshold)
                seconds["rationale"] += time.time() - started
            self._record(rows, batch, probs, columns, split_data)
        frame = pd.DataFrame([rows[int(i)] for i in indices])
        return Measured(frame, seconds)

    @staticmethod
    def _record(rows, batch, probs, columns, split_data):
        values = {name: column.detach().double().cpu().tolist() for name, column in columns.items()}
        pred, conf = probs.argmax(-1).tolist(), probs.max(-1).values.tolist()
        for r, i in enumerate(batch["index"].tolist()):
            rows[i] = {
                **instance_row(split_data, i),
                "prediction": pred[r],
                "probability": conf[r],
                **{k: v[r] for k, v in values.items()},
            }
            rows[i]["length"] = int(rows[i]["length"])
            if "rationale_size" in rows[i]:
                rows[i]["rationale_size"] = int(rows[i]["rationale_size"])

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``ff/...`` metrics: per method and measure mean [95 % CI], std, median, n; per k the
        mean [CI]; the paired comparison with attention; seconds."""
        frame = measured.frame
        out = {ff("n_instances"): len(frame), ff("dropped", "too_short"): int((frame["length"] < 2).sum())}
        for method in self.methods:  # all-tied (or NaN) scores: the ranking is the random tie-break's
            out[ff(method, "constant_scores")] = int(frame.loc[frame["length"] >= 2, f"{method}_constant"].sum())
        measures = []
        if "removal" in tests:
            measures += [("comp_aopc", ("comprehensiveness", "aopc")), ("suff_aopc", ("sufficiency", "aopc"))]
        if "rationale_size" in frame:
            measures += [(name, (name,)) for name in ("auprc", "ap", "token_f1", "iou_precision", "iou_recall")]
            size = frame["rationale_size"].to_numpy(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                rate = np.where(size > 0, size / frame["length"].to_numpy(float), np.nan)
            out.update({ff("rationale", "base_rate", k): v for k, v in summarise(rate).items() if k in MEAN_STATS})
            for name in ("chance_auprc", "chance_ap"):
                chance = summarise(frame[name].to_numpy(float))
                out.update({ff("rationale", name, k): chance[k] for k in MEAN_STATS})
            for method in self.methods:  # ERASER's IOU F1: the F1 of the mean IOU precision and recall
                pr = frame[[f"{method}_iou_precision", f"{method}_iou_recall"]].to_numpy(float)
                value, low, high = bootstrap_ci_of(lambda m: _f1(m[..., 0], m[..., 1]), pr)
                out.update(
                    {
                        ff(method, "iou_f1", "value"): value,
                        ff(method, "iou_f1", "ci_low"): low,
                        ff(method, "iou_f1", "ci_high"): high,
                    }
                )
        if "attention_rationale_mass" in frame:
            mass = summarise(frame["attention_rationale_mass"].to_numpy(float))
            out.update({ff("attention", "rationale_mass", k): v for k, v in mass.items()})
        for method in self.methods:
            if f"{method}_tau_attention" in frame:
                tau = summarise(frame[f"{method}_tau_attention"].to_numpy(float))
                out.update({ff(method, "tau_attention", k): v for k, v in tau.items()})
            for column, path in measures:
                values = frame[f"{method}_{column}"].to_numpy(float)
                out.update({ff(method, *path, k): v for k, v in summarise(values).items()})
                if method != "attention" and "attention" in self.methods:
                    out.update(
                        paired_with_attention(values, frame[f"attention_{column}"].to_numpy(float), ff(method, *path))
                    )
            if "removal" in tests:
                for fraction in self.fractions:
                    for short, name in (("comp", "comprehensiveness"), ("suff", "sufficiency")):
                        stats_ = summarise(frame[f"{method}_{short}_{ff_fraction(fraction)}"].to_numpy(float))
                        out.update({ff(method, name, ff_fraction(fraction), k): stats_[k] for k in MEAN_STATS})
        if "ig_completeness_gap" in frame:
            gap = np.abs(frame["ig_completeness_gap"].to_numpy(float))
            out.update(
                {
                    ff("integrated_gradients", "completeness_gap", k): v
                    for k, v in summarise(gap).items()
                    if k in ("mean", "median")
                }
            )
            out[ff("integrated_gradients", "completeness_gap", "max")] = float(np.nanmax(gap)) if len(gap) else np.nan
            with np.errstate(invalid="ignore"):
                out[ff("integrated_gradients", "completeness_gap", f"frac_above_{GAP_TOLERANCE}")] = (
                    float(np.mean(gap[~np.isnan(gap)] > GAP_TOLERANCE)) if np.isfinite(gap).any() else np.nan
                )
        out.update({ff("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        path = faithfulness_figure(
            measured.frame, self.methods, self.fractions, out_dir / "curves.png", title=f"{data.name} ({self.split})"
        )
        return {} if path is None else {"curves": path}


def _f1(precision, recall):
    """2PR / (P + R), 0 where P + R = 0 (ERASER's ``_f1``)."""
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
