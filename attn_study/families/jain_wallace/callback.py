"""Jain & Wallace (2019), "Attention is not Explanation": attention vs gradient and leave-one-out
importance (Kendall τ), permuted attention, adversarial attention. Metric keys ``jw/...``
(``attn_study.keys``); outputs in ``analysis/jain_wallace/``.
"""

from __future__ import annotations

from pathlib import Path

from attn_study.analysis.aggregation import AggregationOptions, aggregated_importance, check_aggregations
from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import finite, probability, whole
from attn_study.analysis.importance import gradient_importance, leave_one_out, predict, token_mask
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import SOFT_ATTENTION, TOKEN_ATTENTION, Need
from attn_study.errors import UserError
from attn_study.figures.heatmaps import attention_heatmaps_html
from attn_study.stats import (
    MEAN_STATS,
    dropped_counts,
    entropy,
    kendall_tau_b,
    summarise,
    undefined_code,
    undefined_reason,
)

from . import keys
from .adversarial import (
    DIVERSITY,
    OUTPUT_DISTANCES,
    adversarial_attention,
    authors_emax_jsd,
    epsilon_max_jsd,
)
from .figures import jain_wallace_figures
from .keys import CORRELATIONS
from .permutation import permutation_tvd

#: what the correlation test calls attention: the pooling α, or a Transformer's layer attention through it
ATTENTION_SCORES = ("pooling", "raw", "rollout", "flow", "norms")


class JainWallace(AnalysisCallback):
    """The battery as a callback; options in conf/analysis/jain_wallace.yaml.

    Batching: ``batch_size`` instances at a time (the adversaries of a batch are optimised jointly);
    ``internal_batch_size`` leave-one-out sequences per model call; ``perturbations_per_eval``
    permuted attentions of each instance per decode call.
    """

    PRETRAINED = True  # attention (raw, rollout, flow, norms) against token importance

    TESTS = ("correlation", "permutation", "adversarial")
    VAL_TESTS = ("correlation", "permutation")
    PREPARE = "predict"
    # the battery compares attention with token importance: a soft attention over tokens (not a HAN's sentences;
    # not a selector's hard k-token mask, whose ties and zeros make τ and adversaries meaningless)
    NEEDS = (
        Need(TOKEN_ATTENTION, "needs attention over tokens", "analysis=serrano_smith (or model=flat)"),
        Need(
            SOFT_ATTENTION,
            "compares a soft attention with token importance",
            "analysis=[shortcuts] or [faithfulness]",
        ),
    )
    STREAMS = {"permutation": 2, "adversary_init": 3}  # never renumber one (analysis.seeding)

    def __init__(
        self,
        *,
        p_threshold: float = 0.05,
        detach_attention: bool = True,
        gradient_classes: str = "predicted",
        internal_batch_size: int = 512,
        permutations: int = 100,
        perturbations_per_eval: int = 25,
        adversaries: int = 5,
        steps: int = 500,
        lr: float = 0.01,
        lam: float = 500.0,
        epsilon: float | None = None,
        select_epsilon: float | None = None,
        init_scale: float = 3.0,
        lam_per_adversary: bool = False,
        diversity: str = "pairs",
        multiclass_output_distance: str = "tvd",
        selection: str = "paper",
        heatmaps: int = 8,
        attention_scores: str = "pooling",
        attention_layer: int = -1,
        attention_head: int | None = None,
        flow_max_length: int = 128,
        **common,
    ):
        super().__init__(**common)
        if attention_scores not in ATTENTION_SCORES:
            raise UserError(f"{self._option('attention_scores')}={attention_scores}: choose from {ATTENTION_SCORES}")
        self.attention_scores = attention_scores
        self.aggregation = AggregationOptions(
            layer=whole(self._option("attention_layer"), attention_layer, low=-(10**6)),
            head=whole(self._option("attention_head"), attention_head, low=0, optional=True),
            flow_max_length=whole(self._option("flow_max_length"), flow_max_length),
        )
        for option, value, allowed in (
            ("gradient_classes", gradient_classes, ("predicted", "sum")),
            ("diversity", diversity, DIVERSITY),
            ("multiclass_output_distance", multiclass_output_distance, OUTPUT_DISTANCES),
            ("selection", selection, ("paper", "authors")),
        ):
            if value not in allowed:
                raise UserError(f"{self._option(option)}={value}: choose from {list(allowed)}")
        self.gradient_classes, self.lam_per_adversary, self.diversity = gradient_classes, lam_per_adversary, diversity
        self.multiclass_output_distance, self.selection = multiclass_output_distance, selection
        self.p_threshold, self.detach_attention = (
            probability(self._option("p_threshold"), p_threshold),
            detach_attention,
        )
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)
        self.permutations = whole(self._option("permutations"), permutations)
        self.perturbations_per_eval = whole(self._option("perturbations_per_eval"), perturbations_per_eval)
        self.adversaries, self.steps = (
            whole(self._option("adversaries"), adversaries),
            whole(self._option("steps"), steps),
        )
        lr, lam, init_scale = (
            finite(self._option(o), v) for o, v in (("lr", lr), ("lam", lam), ("init_scale", init_scale))
        )
        self.lr, self.lam = lr, lam
        for option, value in (("epsilon", epsilon), ("select_epsilon", select_epsilon)):
            if value is not None:
                probability(self._option(option), value)
        self.epsilon, self.select_epsilon, self.init_scale = epsilon, select_epsilon, init_scale
        self.heatmaps = whole(self._option("heatmaps"), heatmaps, 0)

    def check_model(self, model) -> None:
        """A pretrained checkpoint's attention (no pooling α) is compared through its layers, and not perturbed."""
        if not getattr(model, "pooling_attention", True):  # a pretrained checkpoint: no α to compare or perturb
            if self.attention_scores == "pooling":
                raise UserError(
                    f"{self._option('attention_scores')}=pooling: {type(model).__name__} has no pooling attention; "
                    "choose raw, rollout, flow or norms"
                )
            perturbing = [t for t in self.tests + (self.val_tests if self.every_n_epochs else []) if t != "correlation"]
            if perturbing:
                raise UserError(
                    f"{self._option('tests')}: {', '.join(sorted(set(perturbing)))} perturb a pooling attention, "
                    f"which {type(model).__name__} does not have; use tests=[correlation]"
                )
        if self.attention_scores != "pooling":
            check_aggregations(model, [self.attention_scores], self.aggregation, self._option("attention_scores"))

    # -- measuring -------------------------------------------------------------------------------

    def begin(self, run) -> None:
        """ε (the adversary's bound on the output's change; by default 0.01 for two classes, else 0.05), the ε the
        adversaries are selected at, and the first instances' adversaries kept for the heatmaps."""
        epsilon = self.epsilon if self.epsilon is not None else (0.01 if run.data.num_classes == 2 else 0.05)
        select = self.select_epsilon if self.select_epsilon is not None else epsilon
        run.extras.update(epsilon=epsilon, select_epsilon=select, adversaries={})
        run.named_rows()

    def prepare(self, run, batch):
        """The prediction, its columns, and α per token (tokens.parquet; a pretrained classifier's α is its [CLS]
        token's, not kept)."""
        enc, alpha, probs = predict(run.model, batch)
        self._record_prediction(run.rows, batch["index"].tolist(), alpha, probs, token_mask(batch))
        if getattr(run.model, "pooling_attention", True):
            run.tokens.add(batch, attention=alpha)
        return enc, alpha, probs

    def measure_correlation(self, run, batch, prepared) -> None:
        _, alpha, probs = prepared
        ids = batch["index"].tolist()
        run.tokens.add(batch, **self._record_correlations(run.rows, ids, run.model, batch, alpha, probs))

    def measure_permutation(self, run, batch, prepared) -> None:
        enc, alpha, probs = prepared
        draws = self.draws(batch, enc.mask, "permutation", (self.permutations,), dtype=alpha.dtype)
        change = permutation_tvd(run.model, enc, alpha, probs, draws, self.perturbations_per_eval)
        for row, value in zip(batch["index"].tolist(), change.quantile(0.5, dim=1).tolist()):
            run.rows[row]["perm_median_tvd"] = value

    def measure_adversarial(self, run, batch, prepared) -> None:
        enc, alpha, probs = prepared
        extras, ids = run.extras, batch["index"].tolist()
        adversary = self._record_adversaries(
            run.rows,
            ids,
            extras["adversaries"],
            run.model,
            enc,
            batch,
            alpha,
            probs,
            extras["epsilon"],
            extras["select_epsilon"],
        )
        run.tokens.add(batch, adversarial=adversary)

    @staticmethod
    def _record_prediction(rows, ids, alpha, probs, mask):
        """The prediction; the text's length (its tokens: no <sos>/<eos>), and the largest weight and the
        entropy of α over them (α is 0 elsewhere)."""
        length = mask.sum(-1).tolist()
        max_alpha = (alpha * mask).max(-1).values.tolist()
        ent = entropy(alpha, mask).tolist()
        pred = probs.argmax(-1).tolist()
        conf = probs.max(-1).values.tolist()
        for r, row in enumerate(ids):
            rows[row].update(
                length=int(length[r]),
                prediction=pred[r],
                probability=conf[r],
                max_attention=max_alpha[r],
                attention_entropy=ent[r],
            )

    def _record_correlations(self, rows, ids, model, batch, alpha, probs):
        """τ of the attention — the pooling α, or with ``attention_scores`` a Transformer's layer attention
        through α (``analysis.aggregation``; NaN for a text past ``flow_max_length``, counted as nan_attention)
        — with gradient and leave-one-out importance, and of those two with each other. Returns the importances by
        the names tokens.parquet gives them (the compared attention too where it is not the pooling α)."""
        attention = alpha
        if self.attention_scores != "pooling":
            attention, _ = aggregated_importance(self.attention_scores, model, batch, alpha, self.aggregation)
        scores = {
            "attention": attention,
            "grad": gradient_importance(
                model, batch, detach_attention=self.detach_attention, classes=self.gradient_classes
            ),
            "loo": leave_one_out(model, batch, probs=probs, chunk_size=self.internal_batch_size),
        }
        mask = token_mask(batch)
        codes = {name: undefined_code(values, mask) for name, values in scores.items()}
        for name, (a, b) in CORRELATIONS.items():
            tau, p = kendall_tau_b(scores[a].double(), scores[b].double(), mask)
            why = undefined_reason(codes, a, b)  # τ is NaN exactly where this says why
            for r, row in enumerate(ids):
                rows[row][name], rows[row][name.replace("tau", "p")] = float(tau[r]), float(p[r])
                rows[row][f"{name}_dropped"] = why[r]
        named = {"gradient": scores["grad"], "loo": scores["loo"]}
        return named if self.attention_scores == "pooling" else {self.attention_scores: attention, **named}

    def _record_adversaries(self, rows, ids, keep_adv, model, enc, batch, alpha, probs, epsilon, select):
        """The adversaries' columns; returns the chosen adversary's attention (B, T), NaN where none is within ε."""
        num_classes = probs.shape[1]
        adv, change, divergence = adversarial_attention(
            model,
            enc,
            alpha,
            probs,
            k=self.adversaries,
            steps=self.steps,
            lr=self.lr,
            lam=self.lam,
            epsilon=epsilon,
            init_scale=self.init_scale,
            lam_per_adversary=self.lam_per_adversary,
            noise=self.draws(batch, enc.mask, "adversary_init", (self.adversaries,), normal=True, dtype=alpha.dtype),
            diversity=self.diversity,
            output_distance=self.multiclass_output_distance if num_classes > 2 else "tvd",
        )
        if self.selection == "authors":
            best, which, n_ok = authors_emax_jsd(adv, alpha, change, num_classes, token_mask(batch), select)
        else:
            best, which, n_ok = epsilon_max_jsd(change, divergence, select)
        inner = token_mask(batch)
        for r, row in enumerate(ids):
            rows[row].update(adv_emax_jsd=float(best[r]), adv_feasible=int(n_ok[r]))
            k = int(which[r])
            rows[row]["adv_tvd"] = float(change[r, k]) if k >= 0 else float("nan")
            if len(keep_adv) < self.heatmaps or row in keep_adv:
                keep = inner[r]  # the text's tokens only
                keep_adv[row] = {
                    "attention": alpha[r][keep].tolist(),
                    "adversarial": adv[r, k][keep].tolist() if k >= 0 else None,
                    "adv_tvd": float(change[r, k]) if k >= 0 else None,
                    "adv_jsd": float(best[r]) if k >= 0 else None,
                }
        chosen = adv.gather(1, which.clamp_min(0)[:, None, None].expand(-1, 1, adv.shape[-1])).squeeze(1)
        return chosen.masked_fill((which < 0)[:, None], float("nan"))

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``jw/...`` metrics: overall and per predicted class (``class_<k>``)."""
        frame = measured.frame
        out = {keys.key(keys.NAMESPACE, "n_instances"): len(frame)}
        if "adversarial" in tests:
            out[keys.jw("adv", "epsilon")] = measured.extras["epsilon"]
            out[keys.jw("adv", "select_epsilon")] = measured.extras["select_epsilon"]
        if "correlation" in tests:  # the instances each τ had to leave out, and why
            for name in CORRELATIONS:
                out.update(
                    {
                        keys.key(keys.NAMESPACE, "dropped", name, why): n
                        for why, n in dropped_counts(frame[f"{name}_dropped"]).items()
                    }
                )
        groups = [(None, frame)] + list(frame.groupby("prediction"))
        for cls, g in groups:
            if "correlation" in tests:
                for name in CORRELATIONS:
                    stats = summarise(g[name].to_numpy(), g[name.replace("tau", "p")].to_numpy(), self.p_threshold)
                    out.update({keys.jw(name, k, cls): v for k, v in stats.items() if k != "median"})
                diffs = {
                    "diff/grad_loo_minus_attn_loo": g.tau_grad_loo - g.tau_loo,  # Fig. 3
                    "diff/grad_loo_minus_attn_grad": g.tau_grad_loo - g.tau_grad,
                }  # Fig. 4
                for name, values in diffs.items():
                    stats = summarise(values.to_numpy())
                    out.update({keys.jw(name, k, cls): stats[k] for k in MEAN_STATS})
            if "permutation" in tests:
                stats = summarise(g.perm_median_tvd.to_numpy())
                out.update(
                    {
                        keys.jw("perm/median_tvd", k, cls): stats[k]
                        for k in ("mean", "ci_low", "ci_high", "median", "std")
                    }
                )
            if "adversarial" in tests:
                stats = summarise(g.adv_emax_jsd.to_numpy())
                out.update(
                    {keys.jw("adv/emax_jsd", k, cls): stats[k] for k in ("mean", "ci_low", "ci_high", "median", "std")}
                )
                out[keys.jw("adv/emax_jsd", "frac_above_0.5", cls)] = float((g.adv_emax_jsd > 0.5).mean())
                out[keys.jw("adv", "none_feasible_frac", cls)] = float((g.adv_feasible == 0).mean())
        out.update({keys.jw("seconds", k): v for k, v in measured.seconds.items()})
        return out

    # -- figures ---------------------------------------------------------------------------------

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        title = f"{data.name} ({self.split})"
        artefacts = jain_wallace_figures(measured.frame, out_dir, data.data.label_names, title=title)
        kept = measured.extras.get("adversaries") or {}
        if kept:
            artefacts["heatmaps"] = attention_heatmaps_html(
                self._heatmap_examples(kept, measured.frame, data),
                out_dir / "heatmaps.html",
                f"Original vs adversarial attention — {title}",
                chosen=f"the first {len(kept)} instances analysed (batches in length order: the shortest texts, "
                "ties in split order), chosen by length, never by a result",
            )
        return artefacts

    def _heatmap_examples(self, kept, frame, data) -> list[dict]:
        split, names = data.split(self.split), data.data.label_names
        rows = frame.set_index("index")
        inner = slice(1, -1) if getattr(split, "boundary", False) else slice(None)  # no <sos> / <eos>
        return [
            {
                "uid": rows.at[i, "uid"],
                "tokens": data.vocab.decode(split.ids[i].tolist())[inner],
                "label": names[int(rows.at[i, "label"])],
                "prediction": names[int(rows.at[i, "prediction"])],
                "probability": float(rows.at[i, "probability"]),
                **adv,
            }
            for i, adv in kept.items()
        ]
