"""Serrano & Smith (2019), "Is Attention Interpretable?": erasure tests on the final attention layer.

The original output distribution p is compared with the one q decoded after erasing weights
(``erasure.py``) by the JS divergence (natural log) and by whether the argmax changes (a flip).

* Single weight (§4, Table 2, Figs 3, 4, 9, 12, 13): erase i* (the top item of a ranking) and a
  random other item r; ΔJS = JS(p, q_i*) − JS(p, q_r), Δα = α_i* − α_r, and the 2×2 table of flips.
* Multi weight (§5, Figs 5, 6, 10, 11): erase items from the top of a ranking until the decision
  flips; record the number and fraction of items and the original attention mass removed.

Instances with one attended item are excluded from both tests (and counted), as the paper. Metric
keys ``ss/...`` (``attn_study.keys``); outputs in ``analysis/serrano_smith/``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import whole
from attn_study.analysis.erasure import zero_vector_logits
from attn_study.analysis.importance import predict
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import POOLING_ATTENTION, SOFT_ATTENTION, Need
from attn_study.stats import UNDEFINED, summarise, undefined_code

from . import keys
from .erasure import decision_gradient, first_flips, random_other, rank_items, ranking_scores, single_weight
from .figures import serrano_smith_figures
from .keys import CELLS, PAIRED, RANKINGS, SINGLE_TABLES, single_flip_columns


class SerranoSmith(AnalysisCallback):
    """The erasure tests as a callback; options in conf/analysis/serrano_smith.yaml.

    ``perturbations_per_eval``: removal steps of each instance decoded per ``decode_many`` call in the
    multi-weight test (a call decodes ``batch_size × perturbations_per_eval`` attention vectors).
    """

    TESTS = ("single", "multi")
    VAL_TESTS = ("single", "multi")
    # one pass: each batch is encoded once and every test runs on it (the encoder pass dominates on a CPU);
    # seconds/encode is the encoding (and the decision gradient), seconds/<test> the test's own work
    PREPARE = "encode"
    # erasure renormalises a soft attention; a selector's hard k-token mask has no ranking of its own
    NEEDS = (
        Need(SOFT_ATTENTION, "erases weights of a soft attention in order", "analysis=[shortcuts] or [faithfulness]"),
        Need(POOLING_ATTENTION, "erases weights of a pooling attention", "attention=additive or analysis=[agreement]"),
    )
    # the random item of the single test and the random ranking: each instance's own draws (analysis.seeding),
    # whatever the batch size and the tests that run; never renumber one
    STREAMS = {"random_item": 4, "random_ranking": 5}

    def __init__(self, *, rankings: Sequence[str] = RANKINGS, perturbations_per_eval: int = 16, **common):
        super().__init__(**common)
        self.rankings = self._choose("rankings", rankings, RANKINGS)
        self.perturbations_per_eval = whole(self._option("perturbations_per_eval"), perturbations_per_eval)

    def label(self, model, tests) -> str:
        return "+".join(tests) or "predict"

    def begin(self, run) -> None:
        run.named_rows()

    def prepare(self, run, batch):
        """The encoding, the prediction's columns, and the rankings' scores — the decision gradient ranks items in
        both tests: computed once; rankings whose scores tie everywhere fall back to position order, which the
        summary counts (constant_scores) — kept per token (a HAN's: its sentence's) for tokens.parquet."""
        enc, alpha, probs = predict(run.model, batch)
        ids = batch["index"].tolist()
        self._record_prediction(run.rows, ids, enc, alpha, probs)
        grad = decision_gradient(run.model, enc, alpha) if self._needs_gradient(run.tests) else None
        scores = {"attention": alpha, "gradient": grad}
        scores["grad_attention"] = None if grad is None else grad * alpha
        self._record_ties(run.rows, ids, enc.mask, scores)
        run.tokens.add(batch, sentences=not getattr(run.model, "token_attention", True), **scores)
        return enc, alpha, probs, grad

    def end(self, run):
        return run.frame().reindex(columns=self.columns(run.tests))

    def _needs_gradient(self, tests) -> bool:
        return "single" in tests or bool({"gradient", "grad_attention"} & set(self.rankings))

    @staticmethod
    def _record_ties(rows, ids, mask, scores: dict) -> None:
        """``constant_<ranking>``: whether the ranking's scores tie on every item of the instance."""
        for name, values in scores.items():
            if values is None:
                continue
            tied = (undefined_code(values, mask) == UNDEFINED.index("constant")).tolist()
            for r, row in enumerate(ids):
                rows[row][f"constant_{name}"] = bool(tied[r])

    def columns(self, tests) -> list[str]:
        """Columns of the per-instance frame for ``tests``."""
        cols = ["index", "uid", "length", "label", "prediction", "probability", "max_attention", "constant_attention"]
        if self._needs_gradient(tests):
            cols += ["constant_gradient", "constant_grad_attention"]
        if "single" in tests:
            cols += ["delta_js", "delta_alpha", "js_top", "js_random"]
            cols += [c for table in SINGLE_TABLES for c in single_flip_columns(table)]
        if "multi" in tests:
            cols += [f"{r}_{what}" for r in self.rankings for what in ("removed", "frac", "mass")]
        return cols

    @staticmethod
    def _record_prediction(rows, ids, enc, alpha, probs):
        lengths = enc.mask.sum(-1).tolist()
        max_alpha = alpha.masked_fill(~enc.mask, 0).max(-1).values.tolist()
        pred = probs.argmax(-1).tolist()
        conf = probs.max(-1).values.tolist()
        for r, row in enumerate(ids):
            rows[row].update(
                length=int(lengths[r]), prediction=pred[r], probability=conf[r], max_attention=max_alpha[r]
            )

    def measure_single(self, run, batch, prepared) -> None:
        """Erase the top item of each ranking of ``SINGLE_TABLES`` and a random other item (§4)."""
        enc, alpha, probs, grad = prepared
        rows, ids, model, mask = run.rows, batch["index"].tolist(), run.model, enc.mask
        uniform = self.draws(batch, mask, "random_item", dtype=alpha.dtype)
        tops = torch.stack(
            [rank_items(ranking_scores(SINGLE_TABLES[table], alpha, grad), mask)[:, 0] for table in SINGLE_TABLES],
            dim=1,
        )  # (B, 3)
        others = random_other(tops, mask, uniform)  # (B, 3)
        js, flip = single_weight(model, enc, alpha, probs, torch.cat([tops, others], dim=1))
        n_tables = tops.shape[1]
        js_top, js_rand = js[:, 0].tolist(), js[:, n_tables].tolist()
        a_top = alpha.gather(1, tops[:, :1]).squeeze(1)
        a_rand = alpha.gather(1, others[:, :1]).squeeze(1)
        d_alpha = (a_top - a_rand).tolist()
        flip = flip.tolist()
        lengths = mask.sum(-1).tolist()
        nan = float("nan")
        for r, row in enumerate(ids):
            values = {
                "delta_js": js_top[r] - js_rand[r],
                "delta_alpha": d_alpha[r],
                "js_top": js_top[r],
                "js_random": js_rand[r],
            }
            for j, table in enumerate(SINGLE_TABLES):
                top, random = single_flip_columns(table)
                values[top], values[random] = float(flip[r][j]), float(flip[r][n_tables + j])
            rows[row].update({k: (v if lengths[r] >= 2 else nan) for k, v in values.items()})

    def measure_multi(self, run, batch, prepared) -> None:
        """Erase items from the top of each ranking until the decision flips (§5)."""
        enc, alpha, probs, grad = prepared
        rows, ids, model, mask = run.rows, batch["index"].tolist(), run.model, enc.mask
        uniform = self.draws(batch, mask, "random_ranking", dtype=alpha.dtype)
        prediction = probs.argmax(-1)
        zero_logits = zero_vector_logits(model, enc)
        lengths = mask.sum(-1)
        n = lengths.tolist()
        nan = float("nan")
        for name in self.rankings:
            order = rank_items(ranking_scores(name, alpha, grad, uniform), mask)
            removed, flipped, mass = first_flips(
                model, enc, alpha, order, prediction, self.perturbations_per_eval, zero_logits
            )
            keep = (flipped & (lengths >= 2)).tolist()
            removed, mass = removed.tolist(), mass.tolist()
            for r, row in enumerate(ids):
                ok = keep[r]
                rows[row].update(
                    {
                        f"{name}_removed": float(removed[r]) if ok else nan,
                        f"{name}_frac": removed[r] / n[r] if ok else nan,
                        f"{name}_mass": mass[r] if ok else nan,
                    }
                )

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``ss/...`` metrics. Instances with one attended item are excluded from every test."""
        frame, nan = measured.frame, float("nan")
        included = frame["length"] >= 2
        kept = frame[included]
        out = {
            keys.key(keys.NAMESPACE, "n_instances"): len(frame),
            keys.key(keys.NAMESPACE, "excluded"): int((~included).sum()),
        }
        for name in ("attention", "gradient", "grad_attention"):  # rankings left to position order by ties
            if f"constant_{name}" in kept and kept[f"constant_{name}"].notna().any():
                out[keys.key(keys.NAMESPACE, "constant_scores", name)] = int(
                    kept[f"constant_{name}"].fillna(False).sum()
                )
        if "single" in tests:
            out[keys.key(keys.NAMESPACE, "single", "excluded")] = int((~included).sum())
            out[keys.key(keys.NAMESPACE, "single", "n")] = len(kept)
            for table in SINGLE_TABLES:
                top_col, random_col = single_flip_columns(table)
                top = kept[top_col].to_numpy(float) > 0.5
                rnd = kept[random_col].to_numpy(float) > 0.5
                cells = {"yes_yes": top & rnd, "yes_no": top & ~rnd, "no_yes": ~top & rnd, "no_no": ~top & ~rnd}
                for cell in CELLS:
                    out[keys.ss_flip_cell(table, cell)] = 100.0 * float(cells[cell].mean()) if len(kept) else nan
            delta = kept["delta_js"].to_numpy(float)
            out[keys.key(keys.NAMESPACE, "single", "neg_delta_js_frac")] = (
                float(np.mean(delta < 0)) if len(kept) else nan
            )
            stats = summarise(delta)
            out.update(
                {
                    keys.key(keys.NAMESPACE, "single", "delta_js", k): stats[k]
                    for k in ("mean", "ci_low", "ci_high", "median")
                }
            )
        if "multi" in tests:
            out[keys.key(keys.NAMESPACE, "multi", "excluded")] = int((~included).sum())
            out[keys.key(keys.NAMESPACE, "multi", "n")] = len(kept)
            for name in self.rankings:
                removed = kept[f"{name}_removed"].to_numpy(float)
                never = np.isnan(removed)
                out[keys.ss_multi(name, "never_flip")] = int(never.sum())
                out[keys.ss_multi(name, "never_flip_frac")] = float(never.mean()) if len(kept) else nan
                for what, column in (("removed", "removed"), ("frac_removed", "frac"), ("mass_removed", "mass")):
                    stats = summarise(kept[f"{name}_{column}"].to_numpy(float))
                    out.update(
                        {keys.ss_multi(name, what, k): stats[k] for k in ("median", "mean", "ci_low", "ci_high")}
                    )
            if "attention" in self.rankings:
                for stem, name in PAIRED.items():
                    if name in self.rankings:
                        out.update(paired_comparison(kept[f"{name}_removed"], kept["attention_removed"], stem))
        out.update({keys.key(keys.NAMESPACE, "seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        return serrano_smith_figures(measured.frame, out_dir, self.rankings, title=f"{data.name} ({self.split})")


def paired_comparison(challenger, attention, stem: str) -> dict:
    """Among the instances that flip under both rankings: the fraction where ``challenger`` flips
    strictly sooner than attention, vice versa, ties, the ratio of the first two counts (inf when
    attention is never faster but the challenger sometimes is; NaN when neither ever is), and the
    two-sided sign test's p-value of the first two counts (ties left out)."""
    a = np.asarray(challenger, dtype=float)
    b = np.asarray(attention, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    n = int(both.sum())
    faster, slower, ties = int((a < b).sum()), int((a > b).sum()), int((a == b).sum())
    nan = float("nan")
    ratio = faster / slower if slower else (math.inf if faster else nan)
    multi = keys.key(keys.NAMESPACE, "multi")
    # the paired sign test: among the instances where one ranking flips sooner, is either sooner more often?
    sign_p = stats.binomtest(faster, faster + slower, 0.5).pvalue if faster + slower else nan
    return {
        f"{multi}/{stem}_faster_than_attn": faster / n if n else nan,
        f"{multi}/attn_faster_than_{stem}": slower / n if n else nan,
        f"{multi}/{stem}_attn_ties": ties / n if n else nan,
        f"{multi}/{stem}_vs_attn_ratio": ratio,
        f"{multi}/{stem}_vs_attn_sign_p": float(sign_p),
        f"{multi}/{stem}_vs_attn_n": n,
    }
