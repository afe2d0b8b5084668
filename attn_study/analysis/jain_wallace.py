"""Jain & Wallace (2019) battery: attention vs gradient and leave-one-out importance (Kendall τ),
permuted attention, adversarial attention. Metric keys ``jw/...``; outputs in ``analysis/jain_wallace/``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from attn_study.analysis.adversarial import adversarial_attention, epsilon_max_jsd
from attn_study.analysis.base import SplitAnalysis
from attn_study.analysis.figures import attention_heatmaps_html, jain_wallace_figures
from attn_study.analysis.importance import gradient_importance, leave_one_out, predict
from attn_study.analysis.measures import entropy, kendall_tau_b, summarise
from attn_study.analysis.permutation import permutation_tvd
from attn_study.errors import UserError

SUBTESTS = ("correlation", "permutation", "adversarial")
CORRELATIONS = {"tau_grad": ("attention", "grad"), "tau_loo": ("attention", "loo"), "tau_grad_loo": ("grad", "loo")}


class JainWallace(SplitAnalysis):
    """Runs the battery on one split of a trained model; see conf/analysis/jain_wallace.yaml."""

    name = "jain_wallace"
    prefix = "jw"

    def __init__(self, split: str = "test", max_instances: int | None = None, subsample_seed: int = 0,
                 batch_size: int = 256, loo_chunk_size: int = 512, tests: list[str] = SUBTESTS,
                 p_threshold: float = 0.05, detach_attention: bool = True, permutations: int = 100,
                 permutation_chunk: int = 25, adversaries: int = 5, steps: int = 500, lr: float = 0.01,
                 lam: float = 500.0, epsilon: float | None = None, select_epsilon: float | None = None,
                 init_scale: float = 3.0, heatmaps: int = 8, seed: int = 0):
        unknown = set(tests) - set(SUBTESTS)
        if unknown:
            raise ValueError(f"analysis.tests: unknown {sorted(unknown)}; choose from {list(SUBTESTS)}")
        self.split, self.max_instances, self.subsample_seed = split, max_instances, subsample_seed
        self.batch_size, self.loo_chunk_size, self.tests = batch_size, loo_chunk_size, list(tests)
        self.p_threshold, self.detach_attention = p_threshold, detach_attention
        self.permutations, self.permutation_chunk = permutations, permutation_chunk
        self.adversaries, self.steps, self.lr, self.lam = adversaries, steps, lr, lam
        self.epsilon, self.select_epsilon, self.init_scale = epsilon, select_epsilon, init_scale
        self.heatmaps, self.seed = heatmaps, seed

    # -- orchestration -------------------------------------------------------------------------

    @staticmethod
    def check_model(model) -> None:
        """The battery compares attention with token importance: the attention must be over tokens."""
        if not getattr(model, "token_attention", True):
            raise UserError(f"analysis=jain_wallace needs attention over tokens, and {type(model).__name__}'s final "
                            "attention is over sentences; use analysis=serrano_smith (or model=flat)")

    def run(self, model, datamodule, out_dir: Path) -> tuple[dict, pd.DataFrame, dict]:
        """(summary metrics, per-instance frame, artefacts {name: path}) for ``model`` on the split."""
        device = next(model.parameters()).device
        indices = self.instances(datamodule)
        data = datamodule.split(self.split)
        num_classes = datamodule.num_classes
        epsilon = self.epsilon if self.epsilon is not None else (0.01 if num_classes == 2 else 0.05)
        select = self.select_epsilon if self.select_epsilon is not None else epsilon
        rows: dict[int, dict] = {int(i): {"index": int(i), "uid": data.uids[i], "length": int(len(data.ids[i])),
                                          "label": int(data.labels[i])} for i in indices}
        keep_adv: dict[int, dict] = {}
        seconds = {}
        generator = torch.Generator(device=device).manual_seed(self.seed)
        for test in ["predict"] + self.tests:
            started = time.time()
            batches = datamodule.loader(self.split, batch_size=self.batch_size, indices=indices)
            for batch in tqdm(batches, desc=f"jain_wallace/{test}", leave=False, dynamic_ncols=True):
                batch = {k: v.to(device) for k, v in batch.items()}
                enc, alpha, probs = predict(model, batch)
                ids = batch["index"].tolist()
                mask = batch["mask"]
                if test == "predict":
                    self._record_prediction(rows, ids, alpha, probs, mask)
                elif test == "correlation":
                    self._record_correlations(rows, ids, model, batch, alpha, probs)
                elif test == "permutation":
                    change = permutation_tvd(model, enc, alpha, probs, self.permutations, generator,
                                             self.permutation_chunk)
                    for row, value in zip(ids, change.quantile(0.5, dim=1).tolist()):
                        rows[row]["perm_median_tvd"] = value
                else:
                    adv, change, divergence = adversarial_attention(
                        model, enc, alpha, probs, k=self.adversaries, steps=self.steps, lr=self.lr, lam=self.lam,
                        epsilon=epsilon, init_scale=self.init_scale, generator=generator)
                    best, which, n_ok = epsilon_max_jsd(change, divergence, select)
                    for r, row in enumerate(ids):
                        rows[row].update(adv_emax_jsd=float(best[r]), adv_feasible=int(n_ok[r]))
                        k = int(which[r])
                        rows[row]["adv_tvd"] = float(change[r, k]) if k >= 0 else float("nan")
                        if len(keep_adv) < self.heatmaps or row in keep_adv:
                            n = int(batch["lengths"][r])
                            keep_adv[row] = {"attention": alpha[r, :n].tolist(),
                                             "adversarial": adv[r, k, :n].tolist() if k >= 0 else None,
                                             "adv_tvd": float(change[r, k]) if k >= 0 else None,
                                             "adv_jsd": float(divergence[r, k]) if k >= 0 else None}
            seconds[test] = time.time() - started
        frame = pd.DataFrame([rows[int(i)] for i in indices])
        summary = self.summarise(frame, seconds, epsilon, select)
        artefacts = jain_wallace_figures(frame, out_dir, datamodule.data.label_names,
                                         title=f"{datamodule.name} ({self.split})")
        if keep_adv:
            artefacts["heatmaps"] = attention_heatmaps_html(
                self._heatmap_examples(keep_adv, rows, datamodule), out_dir / "heatmaps.html",
                f"Original vs adversarial attention — {datamodule.name} {self.split}")
        return summary, frame, artefacts

    # -- per batch ------------------------------------------------------------------------------

    @staticmethod
    def _record_prediction(rows, ids, alpha, probs, mask):
        max_alpha = alpha.max(-1).values.tolist()
        ent = entropy(alpha, mask).tolist()
        pred = probs.argmax(-1).tolist()
        conf = probs.max(-1).values.tolist()
        for r, row in enumerate(ids):
            rows[row].update(prediction=pred[r], probability=conf[r], max_attention=max_alpha[r],
                             attention_entropy=ent[r])

    def _record_correlations(self, rows, ids, model, batch, alpha, probs):
        scores = {
            "attention": alpha,
            "grad": gradient_importance(model, batch, detach_attention=self.detach_attention),
            "loo": leave_one_out(model, batch, probs=probs, chunk_size=self.loo_chunk_size),
        }
        mask = batch["mask"]
        for name, (a, b) in CORRELATIONS.items():
            tau, p = kendall_tau_b(scores[a].double(), scores[b].double(), mask)
            for r, row in enumerate(ids):
                rows[row][name], rows[row][name.replace("tau", "p")] = float(tau[r]), float(p[r])

    # -- summaries ------------------------------------------------------------------------------

    def summarise(self, frame: pd.DataFrame, seconds: dict, epsilon: float, select: float) -> dict:
        """Flat ``jw/...`` metrics: overall and per predicted class (``class_<k>``)."""
        out = {"jw/n_instances": len(frame), "jw/adv/epsilon": epsilon, "jw/adv/select_epsilon": select}
        groups = [("", frame)] + [(f"class_{k}/", g) for k, g in frame.groupby("prediction")]
        for prefix, g in groups:
            if "correlation" in self.tests:
                for name in CORRELATIONS:
                    stats = summarise(g[name].to_numpy(), g[name.replace("tau", "p")].to_numpy(), self.p_threshold)
                    out.update({f"jw/{name}/{prefix}{k}": v for k, v in stats.items() if k != "median"})
                diffs = {"grad_loo_minus_attn_loo": g.tau_grad_loo - g.tau_loo,  # Fig. 3
                         "grad_loo_minus_attn_grad": g.tau_grad_loo - g.tau_grad}  # Fig. 4
                for name, values in diffs.items():
                    out[f"jw/diff/{name}/{prefix}mean"] = summarise(values.to_numpy())["mean"]
            if "permutation" in self.tests:
                stats = summarise(g.perm_median_tvd.to_numpy())
                out.update({f"jw/perm/median_tvd/{prefix}{k}": stats[k] for k in ("mean", "median", "std")})
            if "adversarial" in self.tests:
                stats = summarise(g.adv_emax_jsd.to_numpy())
                out.update({f"jw/adv/emax_jsd/{prefix}{k}": stats[k] for k in ("mean", "median", "std")})
                out[f"jw/adv/emax_jsd/{prefix}frac_above_0.5"] = float((g.adv_emax_jsd > 0.5).mean())
                out[f"jw/adv/{prefix}none_feasible_frac"] = float((g.adv_feasible == 0).mean())
        out.update({f"jw/seconds/{k}": v for k, v in seconds.items()})
        return out

    def _heatmap_examples(self, keep_adv, rows, datamodule) -> list[dict]:
        data, names = datamodule.split(self.split), datamodule.data.label_names
        vocab = datamodule.vocab
        return [{
            "uid": rows[i]["uid"], "tokens": vocab.decode(data.ids[i].tolist()),
            "label": names[rows[i]["label"]], "prediction": names[rows[i]["prediction"]],
            "probability": rows[i]["probability"], **adv,
        } for i, adv in keep_adv.items()]
