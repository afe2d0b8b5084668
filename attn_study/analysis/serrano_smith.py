"""Serrano & Smith (2019), "Is Attention Interpretable?": erasure tests on the final attention layer.

Erasure (§2.1): zero the chosen attention weights, renormalise the others to sum 1 and decode again
with the encoder states untouched; when nothing is left to pool (every item removed, or only items
of weight exactly 0 remain) the pooled vector is the zero vector (§5.3). The original output
distribution p is compared with the erased one q by the JS divergence (natural log) and by whether
the argmax changes (a decision flip).

* Single weight (§4, Table 2, Figs 3, 4, 9, 12, 13): erase i* (the top item of a ranking) and a
  random other item r; ΔJS = JS(p, q_i*) − JS(p, q_r), Δα = α_i* − α_r, and the 2×2 table of flips.
* Multi weight (§5, Figs 5, 6, 10, 11): erase items from the top of a ranking until the decision
  flips; record the number and fraction of items and the original attention mass removed.

Everything works on ``enc.mask`` (the attended items) and the model's ``decode`` / ``decode_many``
/ ``decode_pooled``, so the same code serves a flat model (items = words) and a hierarchical one
(items = sentences). Metric keys ``ss/...``; outputs in ``analysis/serrano_smith/``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.ticker import MaxNLocator
from tqdm.auto import tqdm

from attn_study.analysis.base import SplitAnalysis
from attn_study.analysis.figures import new_figure, save_png
from attn_study.analysis.importance import predict
from attn_study.analysis.measures import jsd, summarise

SUBTESTS = ("single", "multi")
RANKINGS = ("attention", "random", "gradient", "grad_attention")
#: single-weight tables: summary key → ranking that chooses i* (Table 2 / Fig 9, Fig 12, Fig 13)
SINGLE_TABLES = {"single": "attention", "single_grad": "gradient", "single_grad_attention": "grad_attention"}
#: frame column suffix of each single-weight table
_SINGLE_SUFFIX = {"single": "", "single_grad": "_grad", "single_grad_attention": "_grad_attention"}
#: paired comparisons with the attention ranking: summary-key stem of the challenger → ranking
PAIRED = {"grad": "gradient", "grad_attention": "grad_attention"}
CELLS = ("yes_yes", "yes_no", "no_yes", "no_no")
RANKING_LABELS = {"attention": "attention", "random": "random", "gradient": "gradient",
                  "grad_attention": "gradient × attention"}

#: figure key → file name
FILENAMES = {
    "delta_js_vs_delta_alpha": "fig3_delta_js_vs_delta_alpha.png",
    "negative_delta_js": "fig4_negative_delta_js.png",
    "frac_removed": "fig5_frac_removed.png",
    "mass_removed": "fig11_mass_removed.png",
    "flip_tables": "fig9_flip_tables.png",
}


# ------------------------------------------------------------------------------------------------
# erasure
# ------------------------------------------------------------------------------------------------

def renormalise_erased(alpha: torch.Tensor, removed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Erased attentions (B, K, T) and ``empty`` (B, K): α (B, T) with the items ``removed`` (B, K, T)
    zeroed and the rest renormalised to sum 1. Where no mass is left (``empty``) the row is all 0,
    which pools to the zero vector."""
    kept = alpha[:, None, :] * ~removed
    total = kept.sum(-1, keepdim=True)
    empty = total.squeeze(-1) <= 0
    return kept / torch.where(total > 0, total, torch.ones_like(total)), empty


def zero_vector_logits(model, enc) -> torch.Tensor:
    """Logits (B, C) of the zero pooled vector, the output once every item is removed (§5.3)."""
    zeros = enc.hidden.new_zeros(enc.hidden.shape[0], enc.hidden.shape[-1])
    return model.decode_pooled(zeros, enc.query, enc.candidates)


def erased_probabilities(model, enc, alpha: torch.Tensor, removed: torch.Tensor,
                         zero_logits: torch.Tensor | None = None) -> torch.Tensor:
    """Output distributions q (B, K, C) with the items ``removed`` (B, K, T) erased from α (B, T)
    (renormalised; the zero pooled vector where nothing is left), encoder states unchanged."""
    alphas, empty = renormalise_erased(alpha, removed)
    logits = model.decode_many(enc, alphas)
    if bool(empty.any()):
        if zero_logits is None:
            zero_logits = zero_vector_logits(model, enc)
        logits = torch.where(empty[..., None], zero_logits[:, None, :], logits)
    b, k, c = logits.shape
    return model.probabilities(logits.reshape(b * k, c)).reshape(b, k, -1)


# ------------------------------------------------------------------------------------------------
# rankings
# ------------------------------------------------------------------------------------------------

def _grad_context(device: torch.device):
    # cuDNN's RNN backward refuses eval mode; a decoder through an RNN would need it off
    return torch.backends.cudnn.flags(enabled=False) if device.type == "cuda" else contextlib.nullcontext()


def decision_gradient(model, enc, alpha: torch.Tensor) -> torch.Tensor:
    """∂d/∂α_i (B, T), signed, 0 on padding: d = the largest output probability of the decoded
    output (§5.2), α a leaf tensor (the gradient does not flow into the attention's computation)."""
    with torch.enable_grad(), _grad_context(alpha.device):
        leaf = alpha.detach().clone().requires_grad_(True)
        probs = model.probabilities(model.decode(enc, leaf))
        (grad,) = torch.autograd.grad(probs.max(-1).values.sum(), leaf)
    return grad.detach() * enc.mask


def rank_items(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Ranking (B, T): the positions of the real items (``mask``) by descending score, then the
    padding. Ties (and NaN, ranked last among real items) keep position order: lower first."""
    scores = torch.nan_to_num(scores.masked_fill(~mask, 0), nan=-math.inf)
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    real_first = torch.sort((~mask).gather(1, order).to(torch.uint8), dim=1, stable=True).indices
    return order.gather(1, real_first)


def ranking_scores(name: str, alpha: torch.Tensor, grad: torch.Tensor | None = None,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Scores (B, T) whose descending order is the ranking ``name``."""
    if name == "attention":
        return alpha
    if name == "random":
        return torch.rand(alpha.shape, generator=generator, device=alpha.device)
    if grad is None:
        raise ValueError(f"ranking {name!r} needs the decision gradient")
    if name == "gradient":
        return grad
    if name == "grad_attention":
        return grad * alpha
    raise ValueError(f"unknown ranking {name!r}; choose from {list(RANKINGS)}")


def random_other(tops: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """For each instance and each column of ``tops`` (B, R), an item drawn uniformly among the real
    items other than that top item (one uniform draw per item serves every column). Instances
    with one real item get the top item back."""
    u = torch.rand(mask.shape, generator=generator, device=mask.device).masked_fill(~mask, -1.0)
    u = u[:, None, :].expand(-1, tops.shape[1], -1).clone()
    u.scatter_(2, tops[..., None], -2.0)
    return u.argmax(-1)


# ------------------------------------------------------------------------------------------------
# single weight
# ------------------------------------------------------------------------------------------------

def single_weight(model, enc, alpha: torch.Tensor, probs: torch.Tensor, items: torch.Tensor,
                  zero_logits: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Erase each of ``items`` (B, K) alone: (JS(p, q_k) (B, K), decision flip (B, K) bool)."""
    removed = torch.zeros(*items.shape, alpha.shape[1], dtype=torch.bool, device=alpha.device)
    removed.scatter_(2, items[..., None], True)
    q = erased_probabilities(model, enc, alpha, removed, zero_logits)
    return jsd(probs[:, None, :], q), q.argmax(-1) != probs.argmax(-1)[:, None]


# ------------------------------------------------------------------------------------------------
# multi weight
# ------------------------------------------------------------------------------------------------

def first_flips(model, enc, alpha: torch.Tensor, order: torch.Tensor, prediction: torch.Tensor,
                chunk_size: int = 4096, zero_logits: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Erase items from the top of ``order`` (B, T), renormalising, until the decision flips.

    Step k (1 ≤ k ≤ n, n = the instance's number of items) erases the first k items of the ranking;
    step n pools the zero vector. Returns ``removed`` (B,) long, the number of items erased at the
    first flip (0: never flips), ``flipped`` (B,) bool and ``mass`` (B,), the original attention
    mass of the erased items (0 when never flips).

    The erased attentions of all steps come from one (B, T) rank table: step k erases the items
    whose position in the ranking is < k. They are decoded ``chunk_size`` attention vectors per
    ``decode_many`` call (whole steps of the batch: at least B vectors), and the decoding stops
    early once every instance has flipped or run out of items; the first flip is found by a
    cumulative sum, with no Python loop over instances or steps.
    """
    mask = enc.mask
    b, t = alpha.shape
    n = mask.sum(-1)
    steps = int(n.max()) if b else 0
    alpha = alpha * mask
    if zero_logits is None:
        zero_logits = zero_vector_logits(model, enc)
    position = torch.empty_like(order).scatter_(1, order, torch.arange(t, device=order.device).expand(b, t))
    position = position.masked_fill(~mask, t)  # padding is never erased
    flips = torch.zeros(b, steps, dtype=torch.bool, device=alpha.device)
    per_call = max(1, int(chunk_size) // max(b, 1))
    for start in range(0, steps, per_call):
        stop = min(steps, start + per_call)
        k = torch.arange(start + 1, stop + 1, device=alpha.device)  # items erased at these steps
        removed = position[:, None, :] < k[None, :, None]
        q = erased_probabilities(model, enc, alpha, removed, zero_logits)
        flips[:, start:stop] = q.argmax(-1) != prediction[:, None]
        resolved = flips[:, :stop].any(1) | (n <= stop)
        if bool(resolved.all()):
            break
    valid = torch.arange(1, steps + 1, device=alpha.device)[None, :] <= n[:, None]
    flips &= valid
    flipped = flips.any(1)
    first = (flips.cumsum(1) == 0).sum(1)  # steps before the first flip
    removed_count = torch.where(flipped, first + 1, torch.zeros_like(first))
    cum_mass = alpha.gather(1, order).cumsum(1)
    mass = cum_mass.gather(1, first.clamp(max=t - 1)[:, None]).squeeze(1)
    return removed_count, flipped, torch.where(flipped, mass, torch.zeros_like(mass))


# ------------------------------------------------------------------------------------------------
# the analysis
# ------------------------------------------------------------------------------------------------

class SerranoSmith(SplitAnalysis):
    """Runs the erasure tests on one split of a trained model; see conf/analysis/serrano_smith.yaml."""

    name = "serrano_smith"
    prefix = "ss"

    def __init__(self, split: str = "test", max_instances: int | None = None, subsample_seed: int = 0,
                 seed: int = 0, batch_size: int = 256, chunk_size: int = 4096,
                 tests: Sequence[str] = SUBTESTS, rankings: Sequence[str] = RANKINGS):
        unknown = set(tests) - set(SUBTESTS)
        if unknown:
            raise ValueError(f"analysis.tests: unknown {sorted(unknown)}; choose from {list(SUBTESTS)}")
        unknown = set(rankings) - set(RANKINGS)
        if unknown:
            raise ValueError(f"analysis.rankings: unknown {sorted(unknown)}; choose from {list(RANKINGS)}")
        if int(chunk_size) < 1 or int(batch_size) < 1:
            raise ValueError("analysis.batch_size and analysis.chunk_size must be positive")
        self.split, self.max_instances, self.subsample_seed = split, max_instances, subsample_seed
        self.seed, self.batch_size, self.chunk_size = int(seed), int(batch_size), int(chunk_size)
        self.tests = [t for t in SUBTESTS if t in tests]
        self.rankings = [r for r in RANKINGS if r in rankings]

    # -- orchestration -------------------------------------------------------------------------

    def run(self, model, datamodule, out_dir: Path) -> tuple[dict, pd.DataFrame, dict]:
        """(summary metrics, per-instance frame, artefacts {name: path}) for ``model`` on the split."""
        device = next(model.parameters()).device
        indices = self.instances(datamodule)
        data = datamodule.split(self.split)
        rows: dict[int, dict] = {int(i): {"index": int(i), "uid": data.uids[i], "label": int(data.labels[i])}
                                 for i in indices}
        # separate streams: the random item of the single test and the random ranking do not depend
        # on which tests run (they do depend on the seed and the batches, i.e. batch_size)
        generators = {"single": torch.Generator(device=device).manual_seed(self.seed),
                      "multi": torch.Generator(device=device).manual_seed(self.seed + 1)}
        # one pass: each batch is encoded once and every test runs on it (the encoder pass dominates
        # on a CPU); ss/seconds/encode is the encoding, ss/seconds/<test> the test's own work
        seconds = dict.fromkeys(["encode", *self.tests], 0.0)
        batches = datamodule.loader(self.split, batch_size=self.batch_size, indices=indices)
        desc = f"serrano_smith/{'+'.join(self.tests) or 'predict'}"
        for batch in tqdm(batches, desc=desc, leave=False, dynamic_ncols=True):
            started = time.time()
            batch = {k: v.to(device) for k, v in batch.items()}
            enc, alpha, probs = predict(model, batch)
            ids = batch["index"].tolist()
            self._record_prediction(rows, ids, enc, alpha, probs)
            seconds["encode"] += time.time() - started
            for test in self.tests:
                started = time.time()
                if test == "single":
                    self._single(rows, ids, model, enc, alpha, probs, generators["single"])
                else:
                    self._multi(rows, ids, model, enc, alpha, probs, generators["multi"])
                seconds[test] += time.time() - started
        frame = pd.DataFrame([rows[int(i)] for i in indices])
        frame = frame.reindex(columns=self.columns())
        summary = self.summarise(frame, seconds)
        artefacts = serrano_smith_figures(frame, out_dir, self.rankings, title=f"{datamodule.name} ({self.split})")
        return summary, frame, artefacts

    def columns(self) -> list[str]:
        """Columns of the per-instance frame for the configured tests."""
        cols = ["index", "uid", "length", "label", "prediction", "probability", "max_attention"]
        if "single" in self.tests:
            cols += ["delta_js", "delta_alpha", "js_top", "js_random", "flip_top", "flip_random"]
            cols += [f"flip_{which}{_SINGLE_SUFFIX[key]}" for key in SINGLE_TABLES if key != "single"
                     for which in ("top", "random")]
        if "multi" in self.tests:
            cols += [f"{r}_{what}" for r in self.rankings for what in ("removed", "frac", "mass")]
        return cols

    # -- per batch ------------------------------------------------------------------------------

    @staticmethod
    def _record_prediction(rows, ids, enc, alpha, probs):
        lengths = enc.mask.sum(-1).tolist()
        max_alpha = alpha.masked_fill(~enc.mask, 0).max(-1).values.tolist()
        pred = probs.argmax(-1).tolist()
        conf = probs.max(-1).values.tolist()
        for r, row in enumerate(ids):
            rows[row].update(length=int(lengths[r]), prediction=pred[r], probability=conf[r],
                             max_attention=max_alpha[r])

    @staticmethod
    def _single(rows, ids, model, enc, alpha, probs, generator):
        mask = enc.mask
        grad = decision_gradient(model, enc, alpha)
        tops = torch.stack([rank_items(ranking_scores(SINGLE_TABLES[key], alpha, grad), mask)[:, 0]
                            for key in SINGLE_TABLES], dim=1)  # (B, 3)
        others = random_other(tops, mask, generator)  # (B, 3)
        js, flip = single_weight(model, enc, alpha, probs, torch.cat([tops, others], dim=1))
        r_tables = tops.shape[1]
        js_top, js_rand = js[:, 0].tolist(), js[:, r_tables].tolist()
        a_top = alpha.gather(1, tops[:, :1]).squeeze(1)
        a_rand = alpha.gather(1, others[:, :1]).squeeze(1)
        d_alpha = (a_top - a_rand).tolist()
        flip = flip.tolist()
        lengths = mask.sum(-1).tolist()
        nan = float("nan")
        for r, row in enumerate(ids):
            ok = lengths[r] >= 2
            values = {"delta_js": js_top[r] - js_rand[r], "delta_alpha": d_alpha[r], "js_top": js_top[r],
                      "js_random": js_rand[r]}
            for j, key in enumerate(SINGLE_TABLES):
                suffix = _SINGLE_SUFFIX[key]
                values[f"flip_top{suffix}"] = float(flip[r][j])
                values[f"flip_random{suffix}"] = float(flip[r][r_tables + j])
            rows[row].update({k: (v if ok else nan) for k, v in values.items()})

    def _multi(self, rows, ids, model, enc, alpha, probs, generator):
        mask = enc.mask
        grad = decision_gradient(model, enc, alpha) if {"gradient", "grad_attention"} & set(self.rankings) else None
        prediction = probs.argmax(-1)
        zero_logits = zero_vector_logits(model, enc)
        lengths = mask.sum(-1)
        n = lengths.tolist()
        nan = float("nan")
        for name in self.rankings:
            order = rank_items(ranking_scores(name, alpha, grad, generator), mask)
            removed, flipped, mass = first_flips(model, enc, alpha, order, prediction, self.chunk_size, zero_logits)
            keep = (flipped & (lengths >= 2)).tolist()
            removed, mass = removed.tolist(), mass.tolist()
            for r, row in enumerate(ids):
                ok = keep[r]
                rows[row].update({f"{name}_removed": float(removed[r]) if ok else nan,
                                  f"{name}_frac": removed[r] / n[r] if ok else nan,
                                  f"{name}_mass": mass[r] if ok else nan})

    # -- summaries ------------------------------------------------------------------------------

    def summarise(self, frame: pd.DataFrame, seconds: dict) -> dict:
        """Flat ``ss/...`` metrics. Instances with one attended item are excluded from every test."""
        nan = float("nan")
        included = frame["length"] >= 2
        kept = frame[included]
        out = {"ss/n_instances": len(frame), "ss/excluded": int((~included).sum())}
        if "single" in self.tests:
            out["ss/single/excluded"] = int((~included).sum())
            out["ss/single/n"] = len(kept)
            for key in SINGLE_TABLES:
                suffix = _SINGLE_SUFFIX[key]
                top = kept[f"flip_top{suffix}"].to_numpy(float) > 0.5
                rnd = kept[f"flip_random{suffix}"].to_numpy(float) > 0.5
                cells = {"yes_yes": top & rnd, "yes_no": top & ~rnd, "no_yes": ~top & rnd, "no_no": ~top & ~rnd}
                for cell, hit in cells.items():
                    out[f"ss/{key}/flip_table/{cell}"] = 100.0 * float(hit.mean()) if len(kept) else nan
            delta = kept["delta_js"].to_numpy(float)
            out["ss/single/neg_delta_js_frac"] = float(np.mean(delta < 0)) if len(kept) else nan
            stats = summarise(delta)
            out.update({f"ss/single/delta_js/{k}": stats[k] for k in ("mean", "median")})
        if "multi" in self.tests:
            out["ss/multi/excluded"] = int((~included).sum())
            out["ss/multi/n"] = len(kept)
            for name in self.rankings:
                removed = kept[f"{name}_removed"].to_numpy(float)
                never = np.isnan(removed)
                out[f"ss/multi/{name}/never_flip"] = int(never.sum())
                out[f"ss/multi/{name}/never_flip_frac"] = float(never.mean()) if len(kept) else nan
                for what, column in (("removed", "removed"), ("frac_removed", "frac"), ("mass_removed", "mass")):
                    stats = summarise(kept[f"{name}_{column}"].to_numpy(float))
                    out.update({f"ss/multi/{name}/{what}/{k}": stats[k] for k in ("median", "mean")})
            if "attention" in self.rankings:
                for stem, name in PAIRED.items():
                    if name in self.rankings:
                        out.update(paired_comparison(kept[f"{name}_removed"], kept["attention_removed"], stem))
        out.update({f"ss/seconds/{k}": v for k, v in seconds.items()})
        return out


def paired_comparison(challenger, attention, stem: str) -> dict:
    """Among the instances that flip under both rankings: the fraction where ``challenger`` flips
    strictly sooner than attention, vice versa, ties, and the ratio of the first two counts (inf
    when attention is never faster but the challenger sometimes is; NaN when neither ever is)."""
    a = np.asarray(challenger, dtype=float)
    b = np.asarray(attention, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    n = int(both.sum())
    faster, slower, ties = int((a < b).sum()), int((a > b).sum()), int((a == b).sum())
    nan = float("nan")
    ratio = faster / slower if slower else (math.inf if faster else nan)
    return {f"ss/multi/{stem}_faster_than_attn": faster / n if n else nan,
            f"ss/multi/attn_faster_than_{stem}": slower / n if n else nan,
            f"ss/multi/{stem}_attn_ties": ties / n if n else nan,
            f"ss/multi/{stem}_vs_attn_ratio": ratio,
            f"ss/multi/{stem}_vs_attn_n": n}


# ------------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------------

def _finite(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame | None:
    if any(c not in frame.columns for c in columns):
        return None
    sub = frame[list(columns)].apply(pd.to_numeric, errors="coerce").astype(float)
    sub = sub[np.isfinite(sub.to_numpy()).all(axis=1)]
    return None if sub.empty else sub


def _title(fig, what: str, title: str) -> None:
    fig.suptitle(f"{title} — {what}" if title else what)


def delta_js_figure(frame: pd.DataFrame, title: str = ""):
    """Fig 3: ΔJS = JS(p, q_i*) − JS(p, q_r) against Δα = α_i* − α_r, one point per instance."""
    sub = _finite(frame, ["delta_alpha", "delta_js"])
    if sub is None:
        return None
    fig = new_figure((6.4, 4.4))
    ax = fig.add_subplot()
    x, y = sub["delta_alpha"].to_numpy(), sub["delta_js"].to_numpy()
    negative = y < 0
    ax.scatter(x[~negative], y[~negative], s=9, alpha=0.45, color="#1f77b4", edgecolors="none",
               label=f"ΔJS ≥ 0 ({int((~negative).sum())})")
    ax.scatter(x[negative], y[negative], s=9, alpha=0.7, color="#d95f02", edgecolors="none",
               label=f"ΔJS < 0 ({int(negative.sum())})")
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(r"$\Delta\alpha = \alpha_{i^*} - \alpha_r$")
    ax.set_ylabel(r"$\Delta JS = JS(p, q_{\{i^*\}}) - JS(p, q_{\{r\}})$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    _title(fig, f"ΔJS vs Δα, n={len(sub)} (Fig. 3)", title)
    return fig


def negative_delta_js_figure(frame: pd.DataFrame, title: str = "", bins: int = 20):
    """Fig 4: counts of the instances with ΔJS < 0, binned by Δα."""
    sub = _finite(frame, ["delta_alpha", "delta_js"])
    if sub is None:
        return None
    x = sub["delta_alpha"].to_numpy()[sub["delta_js"].to_numpy() < 0]
    fig = new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    ax.hist(np.clip(x, 0.0, 1.0), bins=np.linspace(0.0, 1.0, bins + 1), color="#d95f02", alpha=0.8,
            edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(r"$\Delta\alpha = \alpha_{i^*} - \alpha_r$")
    ax.set_ylabel(r"instances with $\Delta JS < 0$")
    ax.grid(alpha=0.3)
    _title(fig, f"negative ΔJS: {len(x)} of {len(sub)} instances (Fig. 4)", title)
    return fig


def _boxplot_figure(frame: pd.DataFrame, rankings: Sequence[str], column: str, ylabel: str, what: str, title: str):
    data, labels = [], []
    for name in rankings:
        col = f"{name}_{column}"
        if col not in frame.columns:
            continue
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(float)
        included = frame["length"].to_numpy(float) >= 2 if "length" in frame.columns else np.ones(len(values), bool)
        flipped = values[np.isfinite(values)]
        never = int(included.sum()) - len(flipped)
        data.append(flipped if len(flipped) else np.array([np.nan]))
        labels.append(f"{RANKING_LABELS.get(name, name)}\nn={len(flipped)}, never={never}")
    if not data or all(np.isnan(d).all() for d in data):
        return None
    fig = new_figure((1.9 * len(data) + 2.0, 4.4))
    ax = fig.add_subplot()
    ax.boxplot(data, whis=1.5, showfliers=True, flierprops={"markersize": 3, "alpha": 0.4})
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize="small")
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    _title(fig, what, title)
    return fig


def flip_tables_figure(frame: pd.DataFrame, title: str = ""):
    """Figs 9, 12, 13: the single-weight 2×2 decision-flip tables (percent of instances)."""
    panels = []
    for key, ranking in SINGLE_TABLES.items():
        suffix = _SINGLE_SUFFIX[key]
        sub = _finite(frame, [f"flip_top{suffix}", f"flip_random{suffix}"])
        if sub is None:
            continue
        top, rnd = sub.iloc[:, 0].to_numpy() > 0.5, sub.iloc[:, 1].to_numpy() > 0.5
        table = 100.0 * np.array([[np.mean(top & rnd), np.mean(top & ~rnd)],
                                  [np.mean(~top & rnd), np.mean(~top & ~rnd)]])
        panels.append((ranking, table, len(sub)))
    if not panels:
        return None
    fig = new_figure((3.6 * len(panels) + 0.6, 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colors = np.array([[0.85, 0.92, 1.0], [0.55, 0.75, 1.0], [1.0, 0.75, 0.5], [0.93, 0.93, 0.93]])
    for ax, (ranking, table, n) in zip(axes, panels):
        ax.imshow(colors.reshape(2, 2, 3), aspect="equal")
        for (i, j), v in np.ndenumerate(table):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize="large")
        ax.set_xticks([0, 1], ["yes", "no"])
        ax.set_yticks([0, 1], ["yes", "no"])
        ax.set_xlabel("erase random r: decision flip?")
        ax.set_ylabel(f"erase top ({RANKING_LABELS[ranking]}): flip?")
        ax.set_title(f"i* by {RANKING_LABELS[ranking]} (n={n})", fontsize="medium")
    _title(fig, "single-weight decision flips, % (Table 2, Figs. 9, 12, 13)", title)
    return fig


def build_figures(frame: pd.DataFrame, rankings: Sequence[str] = RANKINGS, title: str = "") -> dict:
    """The Serrano & Smith figures as unsaved Figures keyed as :data:`FILENAMES`; a figure whose
    columns are missing or all-NaN is left out."""
    builders = {
        "delta_js_vs_delta_alpha": lambda: delta_js_figure(frame, title),
        "negative_delta_js": lambda: negative_delta_js_figure(frame, title),
        "frac_removed": lambda: _boxplot_figure(
            frame, rankings, "frac", "fraction of items removed at the first decision flip",
            "fraction of items removed before the decision flips (Figs. 5, 6, 10)", title),
        "mass_removed": lambda: _boxplot_figure(
            frame, rankings, "mass", "original attention mass removed at the first decision flip",
            "attention mass removed before the decision flips (Fig. 11)", title),
        "flip_tables": lambda: flip_tables_figure(frame, title),
    }
    figures = {}
    for key, build in builders.items():
        fig = build()
        if fig is not None:
            figures[key] = fig
    return figures


def serrano_smith_figures(frame: pd.DataFrame, out_dir: Path, rankings: Sequence[str] = RANKINGS,
                          title: str = "") -> dict[str, Path]:
    """Write Figs 3, 4, 5 (fraction removed), 11 (mass removed) and the flip tables into ``out_dir``
    (atomically); returns ``{key: path}`` for those written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {key: save_png(fig, out_dir / FILENAMES[key]) for key, fig in build_figures(frame, rankings, title).items()}
