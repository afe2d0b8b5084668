"""Meister et al. (2021), "Is Sparse Attention more Interpretable?": does sparse attention single out
influential inputs?

Per test instance, over its real tokens, ŷ the predicted class's probability:

- ``input``: g_ŷ(x_i) = ‖∂ŷ/∂e_i‖₂ (Eq. 4, the gradient also flowing through the attention) and
  D_ŷ(x_i) = |ŷ − ŷ₋ᵢ| (Eq. 6, token i deleted, the whole model re-run), each normalised to sum 1;
- ``intermediate``: g_ŷ(h_i) = ‖∂ŷ/∂h_i‖₂ and D_ŷ(h_i) = |ŷ − ŷ(α with h_i erased, the rest
  renormalised)|, normalised;
- ``input_hidden``: g_{h_p}(x_i) = ‖∂‖h_p‖₂/∂e_i‖₂ normalised over i (Eq. 5) for every p — a T×T matrix
  per instance — summarised by the mean over p of its normalised entropy (Table 1) and by the mean
  share of g_{h_p} on the co-indexed input x_p;
- always: the attention's support (α > 0: count and fraction of the tokens) and normalised entropy.

Normalised entropy H̃(p) = −Σ p log p / log n ∈ [0, 1] (n = the instance's length; 1 = uniform, 0 = one
token). Kendall τ-b of α with each feature importance (Figs 1, 3). Instances of one token have no
distribution to speak of: their entropies and τ are NaN (and counted in ``n``). Metric keys
``sp/...``; outputs in ``analysis/sparsity/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import probability, whole
from attn_study.analysis.erasure import erase_each
from attn_study.analysis.importance import (
    distribution,
    gradient_norm_importance,
    hidden_gradient_importance,
    input_to_hidden_gradients,
    leave_one_out,
    predict,
    token_mask,
)
from attn_study.analysis.measuring import Measured, instance_row
from attn_study.analysis.needs import POOLING_ATTENTION, SOFT_ATTENTION, TOKEN_ATTENTION, Need
from attn_study.stats import (
    dropped_counts,
    entropy,
    kendall_tau_b,
    summarise,
    undefined_code,
    undefined_reason,
)

from . import keys
from .figures import sparsity_figures
from .keys import SP_CORRELATIONS, SP_DISTRIBUTIONS


def pooled_over_rows(means, stds, counts) -> dict:
    """Mean and population std of H̃(g_{h_p}(x)) over every (instance, p) pair, from each instance's mean m_i,
    std s_i and count n_i of its rows: μ = Σ n_i m_i / N and σ² = Σ n_i (s_i² + (m_i − μ)²) / N, N = Σ n_i
    (instances whose mean is undefined left out). Meister et al.'s Table 1 does not say whether its ± is over
    instances (``sp/entropy/g_hidden/std``) or over these pairs."""
    m, s, n = (np.asarray(x, dtype=float) for x in (means, stds, counts))
    keep = ~np.isnan(m)
    m, s, n = m[keep], s[keep], n[keep]
    total = int(n.sum())
    if not total:
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    mean = float((n * m).sum() / total)
    return {"mean": mean, "std": float(np.sqrt((n * (s**2 + (m - mean) ** 2)).sum() / total)), "n": total}


class Sparsity(AnalysisCallback):
    """The sparsity study as a callback; options in conf/analysis/sparsity.yaml.

    Batching: ``batch_size`` instances at a time; ``internal_batch_size`` sequences per model call
    (leave-one-out deletions, and the (instance, p) rows of the T×T gradients); ``perturbations_per_eval``
    erased attentions of each instance per decode call (D_ŷ(h)).
    """

    QUADRATIC = True  # T×T input→state gradients per instance
    CPU_TOKENS = 262_144  # T² units: 64 texts of 64 tokens
    CPU_MAX_BATCH = 64

    TESTS = ("input", "intermediate", "input_hidden")
    VAL_TESTS = ("input", "intermediate")
    PREPARE = "predict"
    NEEDS = (
        Need(TOKEN_ATTENTION, "needs attention over tokens", "model=flat"),
        Need(SOFT_ATTENTION, "asks how sparse a learned attention is", "analysis=[shortcuts] or [faithfulness]"),
        Need(POOLING_ATTENTION, "asks how sparse a pooling attention is", "attention=additive or analysis=[agreement]"),
    )

    def __init__(
        self,
        *,
        p_threshold: float = 0.05,
        internal_batch_size: int = 256,
        perturbations_per_eval: int = 64,
        heatmaps: int = 4,
        **common,
    ):
        super().__init__(**common)
        self.p_threshold = probability(self._option("p_threshold"), p_threshold)
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)
        self.perturbations_per_eval = whole(self._option("perturbations_per_eval"), perturbations_per_eval)
        self.heatmaps = whole(self._option("heatmaps"), heatmaps, 0)

    def label(self, model, tests) -> str:
        return "+".join(tests) or "predict"

    def begin(self, run) -> None:
        run.extras["heatmaps"] = []

    def prepare(self, run, batch) -> dict:
        """The prediction and the attention's support, over the text's tokens (no <sos>/<eos> in any distribution
        or normaliser); each test adds its importances to ``scores``, and the input → hidden gradients their own
        ``hidden`` columns and ``hidden_dropped`` reasons."""
        mask = token_mask(batch)
        lengths = mask.sum(-1)
        enc, alpha, probs = predict(run.model, batch)
        columns = {"support": ((alpha > 0) & mask).sum(-1).double(), "length": lengths.double()}
        return {
            "mask": mask,
            "enc": enc,
            "alpha": alpha,
            "probs": probs,
            "columns": columns,
            "scores": {"attention": alpha},
            "hidden": {},
            "hidden_dropped": {},
        }

    def measure_input(self, run, batch, prepared) -> None:
        scores, probs = prepared["scores"], prepared["probs"]
        scores["g_input"] = gradient_norm_importance(run.model, batch, detach_attention=False, normalise=False)
        scores["loo_input"] = leave_one_out(
            run.model, batch, probs=probs, chunk_size=self.internal_batch_size, predicted=True
        )

    def measure_intermediate(self, run, batch, prepared) -> None:
        scores, enc, alpha, probs = (prepared[k] for k in ("scores", "enc", "alpha", "probs"))
        scores["g_intermediate"] = hidden_gradient_importance(run.model, batch)
        scores["loo_intermediate"] = erase_each(run.model, enc, alpha, probs, self.perturbations_per_eval)

    def measure_input_hidden(self, run, batch, prepared) -> None:
        mask = prepared["mask"]
        hidden_rows = self._input_hidden(run.model, batch, mask, prepared["hidden"], prepared["hidden_dropped"])
        self._keep_heatmaps(run.extras["heatmaps"], batch, hidden_rows, run.data, run.split_data)

    def record(self, run, batch, prepared) -> None:
        """Each importance per token (tokens.parquet), as a distribution over the text (its entropy, its τ with
        attention), and the instances' rows."""
        mask, columns, scores = prepared["mask"], prepared["columns"], prepared["scores"]
        run.tokens.add(batch, **scores)
        why = self._distributions(scores, mask, prepared["alpha"], columns)
        columns.update(prepared["hidden"])
        why.update(prepared["hidden_dropped"])
        self._record(run.rows, batch, prepared["probs"], columns, why, run.split_data)

    @staticmethod
    def _distributions(scores: dict, mask, alpha, columns: dict) -> dict:
        """Each importance as a distribution over the text: its normalised entropy, and the τ's of
        ``SP_CORRELATIONS`` between attention and another importance, into ``columns``; returns, per statistic
        and instance, why it is undefined (None: defined)."""
        dists = {name: distribution(s, mask) for name, s in scores.items()}
        zero = {name: undefined_code(s, mask, constant_is="zero") for name, s in scores.items()}
        tied = {name: undefined_code(dist, mask) for name, dist in dists.items()}
        why = {}
        for name, dist in dists.items():
            columns[f"entropy_{name}"] = entropy(dist, mask, normalised=True)
            why[f"entropy_{name}"] = undefined_reason(zero, name, zero=True)
        for name, other in SP_CORRELATIONS.items():
            if other in dists:
                tau = kendall_tau_b(alpha.double(), dists[other].double(), mask)
                columns[f"tau_{name}"], columns[f"p_{name}"] = tau
                why[f"tau_{name}"] = undefined_reason(tied, "attention", other)
        return why

    def _input_hidden(self, model, batch, mask, columns: dict, why: dict):
        """Meister et al.'s entropy of the input → hidden gradients g_{h_p}(x), each hidden state p's row a
        distribution over the text, averaged over p; and the share of each row on its own token, into ``columns``
        (and why a mean is undefined into ``why``). Returns the (B, T, T) rows."""
        hidden_rows = distribution(input_to_hidden_gradients(model, batch, self.internal_batch_size), mask[:, None, :])
        per_p = entropy(hidden_rows, mask[:, None, :].expand_as(hidden_rows), normalised=True)
        per_p = per_p.masked_fill(~mask, float("nan"))
        columns["entropy_g_hidden"] = per_p.nanmean(-1)
        # each instance's spread over its rows p (population std) and their count: with the means, the statistics
        # over every (instance, p) pair (summarise: sp/entropy/g_hidden_pairs)
        columns["entropy_g_hidden_row_std"] = (per_p - columns["entropy_g_hidden"][:, None]).pow(2).nanmean(-1).sqrt()
        columns["g_hidden_rows"] = (~torch.isnan(per_p)).sum(-1)
        # rows p whose gradient vanished everywhere have no distribution: left out of the mean, counted
        columns["g_hidden_undefined_rows"] = (torch.isnan(per_p) & mask).sum(-1)
        why["entropy_g_hidden"] = [
            "too_short" if n < 2 else ("zero_g_hidden" if bad == n else None)
            for n, bad in zip(mask.sum(-1).tolist(), columns["g_hidden_undefined_rows"].tolist())
        ]
        columns["diag_share"] = hidden_rows.diagonal(dim1=1, dim2=2).masked_fill(~mask, float("nan")).nanmean(-1)
        return hidden_rows

    @staticmethod
    def _record(rows, batch, probs, columns, why, split_data):
        short = columns["length"] < 2
        values = {}
        for name, column in columns.items():
            column = column.double()
            if name.startswith(("entropy_", "tau_", "p_", "diag_")):
                column = column.masked_fill(short, float("nan"))
            values[name] = column.tolist()
        values["support_frac"] = (columns["support"].double() / columns["length"].double()).tolist()
        pred, conf = probs.argmax(-1).tolist(), probs.max(-1).values.tolist()
        for r, i in enumerate(batch["index"].tolist()):
            rows[i] = {
                **instance_row(split_data, i),
                "prediction": pred[r],
                "probability": conf[r],
                **{name: v[r] for name, v in values.items()},
                **{f"{name}_dropped": reasons[r] for name, reasons in why.items()},
            }
            rows[i]["length"], rows[i]["support"] = int(rows[i]["length"]), int(rows[i]["support"])

    def _keep_heatmaps(self, kept, batch, hidden_rows, data, split_data):
        text = token_mask(batch)
        for r, i in enumerate(batch["index"].tolist()):
            inner = text[r, : int(batch["lengths"][r])].cpu().numpy()
            if len(kept) >= self.heatmaps or inner.sum() < 2:
                continue
            tokens = [t for t, keep in zip(data.vocab.decode(split_data.ids[i].tolist()), inner) if keep]
            matrix = hidden_rows[r][text[r]][:, text[r]].cpu().numpy()
            kept.append({"uid": split_data.uids[i], "tokens": tokens, "matrix": matrix})

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``sp/...`` metrics: mean, std, median, n of each per-instance statistic."""
        frame = measured.frame
        out = {keys.sp("n_instances"): len(frame)}
        stats = summarise(frame["support"].to_numpy(float))
        out.update({keys.sp("support", "count", k): stats[k] for k in ("mean", "ci_low", "ci_high", "median")})
        stats = summarise(frame["support_frac"].to_numpy(float))
        out.update({keys.sp("support", "frac", k): stats[k] for k in ("mean", "ci_low", "ci_high", "std", "median")})
        for name in SP_DISTRIBUTIONS:
            if f"entropy_{name}" in frame:
                stats = summarise(frame[f"entropy_{name}"].to_numpy(float))
                out.update({keys.sp("entropy", name, k): v for k, v in stats.items()})
        if "diag_share" in frame:
            stats = summarise(frame["diag_share"].to_numpy(float))
            out.update({keys.sp("diag_share", k): stats[k] for k in ("mean", "ci_low", "ci_high", "std", "median")})
        for name in SP_CORRELATIONS:
            if f"tau_{name}" in frame:
                stats = summarise(
                    frame[f"tau_{name}"].to_numpy(float), frame[f"p_{name}"].to_numpy(float), self.p_threshold
                )
                out.update({keys.sp("tau", name, k): v for k, v in stats.items()})
        for column in frame.columns:  # the instances each statistic had to leave out, and why
            if column.endswith("_dropped"):
                statistic = column.removesuffix("_dropped")
                out.update({keys.sp("dropped", statistic, why): n for why, n in dropped_counts(frame[column]).items()})
        if "g_hidden_undefined_rows" in frame:
            out[keys.sp("dropped", "entropy_g_hidden", "rows")] = int(frame["g_hidden_undefined_rows"].sum())
        if "entropy_g_hidden_row_std" in frame:
            rows = (frame[c] for c in ("entropy_g_hidden", "entropy_g_hidden_row_std", "g_hidden_rows"))
            pooled = pooled_over_rows(*rows)
            out.update({keys.sp("entropy", "g_hidden_pairs", k): v for k, v in pooled.items()})
        out.update({keys.sp("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        return sparsity_figures(
            measured.frame, measured.extras.get("heatmaps", []), out_dir, title=f"{data.name} ({self.split})"
        )
