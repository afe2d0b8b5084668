"""The faithfulness family's callback: per test instance, every chosen method's token scores (``methods``), then
each chosen test on them — ERASER's comprehensiveness and sufficiency (``removal``), their soft versions
(``soft``), Atanasova et al.'s AUC-TP (``auc_tp``) and the agreement with known rationales (``rationale``) —
and the summaries: means with 95 % bootstrap intervals and each method paired with attention. The measures
themselves, and their math, are in ``measures.py``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attn_study import ranges
from attn_study.analysis.aggregation import AggregationOptions, check_aggregations
from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import checked, whole
from attn_study.analysis.importance import METHODS, ImportanceOptions, importance, predict, token_mask
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import TOKEN_ATTENTION, Need
from attn_study.errors import UserError
from attn_study.stats import (
    MEAN_STATS,
    UNDEFINED,
    bootstrap_ci_of,
    kendall_tau_b,
    summarise,
    undefined_code,
)

from .figures import faithfulness_figure
from .keys import ff, ff_fraction
from .measures import (
    AUC_TP_COUNTS,
    CLASS_SUM_ZERO,
    GAP_TOLERANCE,
    HARD_K_CHOICES,
    area_under_threshold_performance,
    chance_areas,
    class_summed_scores,
    dataset_rationale_share,
    hard_rationale_scores,
    hard_rationale_sizes,
    harmonic_f1,
    paired_with_attention,
    precision_recall_areas,
    ranking,
    removal_curves,
    soft_scores,
    threshold_predictions,
)


class Faithfulness(AnalysisCallback):
    """The faithfulness benchmark as a callback; options in conf/analysis/faithfulness.yaml.

    Tests: ``removal`` (comprehensiveness / sufficiency / AOPC), ``rationale`` (AUPRC and
    precision@|truth| where the data has ground-truth rationales), ``soft`` (Zhao & Aletras's Soft-NC / Soft-NS)
    and ``auc_tp`` (Atanasova et al.'s area under the threshold–performance curve)."""

    PRETRAINED = True  # attention (raw, rollout, flow, norms) against token importance

    CPU_MAX_BATCH = 64  # each instance carries its deletions and integrated-gradient steps

    TESTS = ("removal", "rationale", "soft", "auc_tp")
    DEFAULT_TESTS = ("removal", "rationale")  # soft and auc_tp asked for by name (conf/analysis/faithfulness.yaml)
    VAL_TESTS = ("removal", "rationale")
    AUC_TP_MEASURES = ("macro_f1", "accuracy")
    AUC_TP_CLASSES = ("sum", "predicted")
    BATCH_FIELDS = {"rationale": ("rationale",)}  # data with known rationales
    NEEDS = (Need(TOKEN_ATTENTION, "ranks tokens", "model=flat"),)
    # never renumber one (analysis.seeding): the rankings' tie-breaking keys, the soft metrics' Bernoulli masks
    STREAMS = {"ties": 0, "soft": 6}

    def __init__(
        self,
        *,
        methods=None,
        fractions=(0.01, 0.05, 0.1, 0.2, 0.5),
        ig_steps: int = 50,
        internal_batch_size: int = 512,
        iou_threshold: float = 0.5,
        soft_samples: int = 1,
        soft_clip: bool = True,
        auc_tp_fractions=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
        auc_tp_measure: str = "macro_f1",
        auc_tp_classes: str = "sum",
        auc_tp_count: str = "floor_all",
        hard_rationale_k="dataset",
        **common,
    ):
        super().__init__(**common)
        self.soft_samples = whole(self._option("soft_samples"), soft_samples)
        self.soft_clip = bool(soft_clip)
        self.auc_tp_fractions = tuple(float(f) for f in auc_tp_fractions)
        thresholds = self.auc_tp_fractions
        if (
            len(thresholds) < 2
            or any(not 0 <= f <= 1 for f in thresholds)
            or list(thresholds) != sorted(set(thresholds))
            or len({ff_fraction(f) for f in thresholds}) != len(thresholds)
        ):
            raise UserError(
                f"{self._option('auc_tp_fractions')}={list(auc_tp_fractions)}: give two or more increasing fractions "
                "in [0, 1] (Atanasova et al.: 0, 0.1, ..., 1)"
            )
        if auc_tp_measure not in self.AUC_TP_MEASURES:
            raise UserError(
                f"{self._option('auc_tp_measure')}={auc_tp_measure}: choose from {list(self.AUC_TP_MEASURES)}"
            )
        self.auc_tp_measure = str(auc_tp_measure)
        for option, value, allowed in (
            ("auc_tp_classes", auc_tp_classes, self.AUC_TP_CLASSES),
            ("auc_tp_count", auc_tp_count, AUC_TP_COUNTS),
        ):
            if value not in allowed:
                raise UserError(f"{self._option(option)}={value}: choose from {list(allowed)}")
        self.auc_tp_classes, self.auc_tp_count = str(auc_tp_classes), str(auc_tp_count)
        self.hard_rationale_k = self._hard_k(hard_rationale_k)
        checked(self._option("iou_threshold"), iou_threshold, ranges.number(0, 1, above=True, note="an IOU"))
        self.iou_threshold = float(iou_threshold)
        # a Transformer's layer attention needs encoder=transformer: asked for by name
        default = [name for name, method in METHODS.items() if not method.layer_attention]
        self.methods = self._choose("methods", default if methods is None else methods, list(METHODS))
        self.fractions = tuple(float(f) for f in fractions)
        if not self.fractions or any(not 0 < f < 1 for f in self.fractions):
            raise UserError(f"{self._option('fractions')}={list(fractions)}: give fractions of the length in (0, 1)")
        if len({ff_fraction(f) for f in self.fractions}) != len(self.fractions):
            raise UserError(f"{self._option('fractions')}={list(fractions)}: two fractions round to the same percent")
        self.ig_steps = whole(self._option("ig_steps"), ig_steps)
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)

    def _hard_k(self, value):
        """``hard_rationale_k`` checked: ``dataset``, ``oracle``, a fraction in (0, 1) or a whole count ≥ 1."""
        if value in HARD_K_CHOICES:
            return str(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return int(value)
        if isinstance(value, float) and 0 < value < 1:
            return float(value)
        raise UserError(
            f"{self._option('hard_rationale_k')}={value}: give dataset (the mean rationale share of the train split), "
            "oracle (each instance's |truth|), a fraction in (0, 1) or a whole count >= 1"
        )

    def rationale_k(self, data):
        """The hard rationale's k for ``data``: ``hard_rationale_k``, ``dataset`` being the train split's mean
        rationale share (:func:`dataset_rationale_share`); refused in one line where the train split has none."""
        if self.hard_rationale_k != "dataset":
            return self.hard_rationale_k
        try:
            share = dataset_rationale_share(data.split("train"))
        except KeyError:  # a dataset without a train split
            share = math.nan
        if math.isnan(share):
            raise UserError(
                f"{self._option('hard_rationale_k')}=dataset: the train split has no rationales to average; give a "
                "fraction, a count or oracle"
            )
        return share

    def check(self, model, data=None) -> None:
        """Also, before training, that ``hard_rationale_k=dataset`` has train rationales where the analysed split
        has rationales."""
        super().check(model, data)
        if data is not None and "rationale" in self.tests and getattr(data.split(self.split), "rationales", None):
            self.rationale_k(data)

    def check_class_sum(self, tests) -> None:
        """AUC-TP of class-summed scores (``auc_tp_classes=sum``) is refused in one line for ``CLASS_SUM_ZERO``'s
        methods: their scores for the classes sum to 0 whatever the input."""
        summed_to_zero = [m for m in self.methods if m in CLASS_SUM_ZERO]
        if "auc_tp" in tests and self.auc_tp_classes == "sum" and summed_to_zero:
            option = self._option("auc_tp_classes")
            raise UserError(
                f"{option}=sum: {', '.join(summed_to_zero)} score a class's probability with a sign, and over the "
                f"classes (Σ_c p_c = 1) their scores sum to 0; set {option}=predicted, or leave them out of "
                f"{self._option('methods')}"
            )

    def check_model(self, model) -> None:
        self.check_class_sum(self.tests)
        check_aggregations(model, self.methods, AggregationOptions(), self._option("methods"))

    # -- measuring -------------------------------------------------------------------------------

    def scores(self, model, batch: dict, alpha, probs, run) -> tuple[dict, dict]:
        """({method: (B, T) scores}, {extra column: (B,)}) of every chosen method (``importance.METHODS``), each
        timed as a step of ``run``."""
        options = ImportanceOptions(chunk_size=self.internal_batch_size, ig_steps=self.ig_steps, seed=self.seed)
        out, extra = {}, {}
        for method in self.methods:
            with run.step(method):
                out[method], more = importance(method, model, batch, alpha, probs, options)
            extra.update(more)
        return out, extra

    def step_names(self, model, tests) -> list[str]:
        return ["predict", *self.methods, *tests]

    def label(self, model, tests) -> str:
        return "+".join(tests)

    def begin(self, run) -> None:
        self.check_class_sum(run.tests)
        run.extras["hard_k"] = None  # the hard rationales' k (``rationale_k``), once the data shows rationales

    def prepare(self, run, batch) -> dict:
        """Every method's scores (each its own step) kept per token but the random ranking's (tokens.parquet); the
        rankings they give, ties broken by each instance's own draws; how each ranks the tokens against attention."""
        with run.step("predict"):
            _, alpha, probs = predict(run.model, batch)
        scores, columns = self.scores(run.model, batch, alpha, probs, run)
        run.tokens.add(batch, **{method: values for method, values in scores.items() if method != "random"})
        text = token_mask(batch)
        columns["length"] = text.sum(1)
        ranked = {m: torch.nan_to_num(s.double(), nan=0.0) for m, s in scores.items()}  # a NaN score ranks as 0
        for method, values in scores.items():  # texts with a NaN score; rankings left to the tie-break alone
            columns[f"{method}_nan"] = (undefined_code(values, text) == UNDEFINED.index("nan")).double()
            tied = undefined_code(ranked[method], text) == UNDEFINED.index("constant")
            columns[f"{method}_constant"] = tied.double()
        if "attention" in scores:  # how each method ranks the tokens against attention: τ-b per instance
            for method in [m for m in scores if m not in ("attention", "random")]:  # in the methods' order
                columns[f"{method}_tau_attention"] = kendall_tau_b(scores["attention"], scores[method], text)[0]
        tiebreak = self.draws(batch, batch["mask"], "ties")
        orders = {m: ranking(s, text, tiebreak) for m, s in ranked.items()}
        return {
            "alpha": alpha,
            "probs": probs,
            "scores": scores,
            "orders": orders,
            "tiebreak": tiebreak,
            "columns": columns,
        }

    def record(self, run, batch, prepared) -> None:
        run.record(batch, prepared["probs"], prepared["columns"])

    def measure_removal(self, run, batch, prepared) -> None:
        """ERASER's comprehensiveness and sufficiency per removed fraction and their AOPC, per method."""
        columns = prepared["columns"]
        curves = removal_curves(
            run.model, batch, prepared["probs"], prepared["orders"], self.fractions, self.internal_batch_size
        )
        for method, (comp, suff) in curves.items():
            for j, fraction in enumerate(self.fractions):
                columns[f"{method}_comp_{ff_fraction(fraction)}"] = comp[:, j]
                columns[f"{method}_suff_{ff_fraction(fraction)}"] = suff[:, j]
            columns[f"{method}_comp_aopc"], columns[f"{method}_suff_aopc"] = comp.mean(1), suff.mean(1)

    def measure_soft(self, run, batch, prepared) -> None:
        """Soft comprehensiveness and sufficiency (Zhao & Aletras) per method, and the empty input's drop."""
        columns = prepared["columns"]
        soft, columns["empty_drop"] = soft_scores(
            run.model,
            batch,
            prepared["probs"],
            prepared["scores"],
            self.seed,
            self.STREAMS["soft"],
            self.soft_samples,
            self.internal_batch_size,
            self.soft_clip,
        )
        for method, (comp, suff) in soft.items():
            columns[f"{method}_soft_comp"], columns[f"{method}_soft_suff"] = comp, suff

    def measure_auc_tp(self, run, batch, prepared) -> None:
        """The class predicted with each threshold's top tokens masked (Atanasova et al.'s AUC-TP points)."""
        model, scores, tiebreak, columns = run.model, prepared["scores"], prepared["tiebreak"], prepared["columns"]
        tp_orders = prepared["orders"]
        if self.auc_tp_classes == "sum":  # Atanasova et al.: each method's scores summed over the classes
            text = token_mask(batch)
            tp_orders = {
                m: ranking(torch.nan_to_num(class_summed_scores(m, model, batch, s).double()), text, tiebreak)
                for m, s in scores.items()
            }
        predicted = threshold_predictions(
            model, batch, tp_orders, self.auc_tp_fractions, self.internal_batch_size, self.auc_tp_count
        )
        for method, classes in predicted.items():
            for j, fraction in enumerate(self.auc_tp_fractions):
                columns[f"{method}_tp_{ff_fraction(fraction)}"] = classes[:, j]

    def measure_rationale(self, run, batch, prepared) -> None:
        """Agreement with the known rationale: AUPRC, AP, hard-rationale token F1 and IOU parts, per method."""
        if run.extras["hard_k"] is None:
            run.extras["hard_k"] = self.rationale_k(run.data)
        alpha, scores, orders, columns = (prepared[k] for k in ("alpha", "scores", "orders", "columns"))
        text = token_mask(batch)
        truth = batch["rationale"] & text
        columns["rationale_size"] = truth.sum(1)
        sizes = hard_rationale_sizes(text, truth, run.extras["hard_k"])
        columns["hard_size"] = sizes
        columns["chance_auprc"], columns["chance_ap"] = chance_areas(text.sum(1), truth.sum(1))
        if getattr(run.model, "pooling_attention", True):  # (attention=cls: α is on [CLS], no token of the text)
            columns["attention_rationale_mass"] = (alpha * truth).sum(1)  # Σ α_t over the rationale's tokens
        for method, order in orders.items():
            columns[f"{method}_auprc"], columns[f"{method}_ap"] = precision_recall_areas(
                torch.nan_to_num(scores[method].double(), nan=0.0), truth, text
            )
            (
                columns[f"{method}_token_f1"],
                columns[f"{method}_iou_precision"],
                columns[f"{method}_iou_recall"],
            ) = hard_rationale_scores(order, truth, text, self.iou_threshold, sizes)

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``ff/...`` metrics: per method and measure mean [95 % CI], std, median, n; per k the
        mean [CI]; the paired comparison with attention; seconds."""
        frame = measured.frame
        out = {ff("n_instances"): len(frame), ff("dropped", "too_short"): int((frame["length"] < 2).sum())}
        counted = frame["length"] >= 2
        for method in self.methods:  # NaN scores (ranked as 0); all tied once so: the ranking is the tie-break's
            out[ff(method, "nan_scores")] = int(frame.loc[counted, f"{method}_nan"].sum())
            out[ff(method, "constant_scores")] = int(frame.loc[counted, f"{method}_constant"].sum())
        measures = []
        if "removal" in tests:
            measures += [("comp_aopc", ("comprehensiveness", "aopc")), ("suff_aopc", ("sufficiency", "aopc"))]
        if "soft" in tests:
            measures += [("soft_comp", ("soft_comprehensiveness",)), ("soft_suff", ("soft_sufficiency",))]
            out[ff("dropped", "empty_as_confident")] = int((frame["empty_drop"] <= 0).sum())
        if "auc_tp" in tests:
            out.update(self._auc_tp(frame))
        if "rationale_size" in frame:
            measures += [(name, (name,)) for name in ("auprc", "ap", "token_f1", "iou_precision", "iou_recall")]
            size = frame["rationale_size"].to_numpy(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                rate = np.where(size > 0, size / frame["length"].to_numpy(float), np.nan)
            out.update({ff("rationale", "base_rate", k): v for k, v in summarise(rate).items() if k in MEAN_STATS})
            for name in ("chance_auprc", "chance_ap"):
                chance = summarise(frame[name].to_numpy(float))
                out.update({ff("rationale", name, k): chance[k] for k in MEAN_STATS})
            hard = summarise(frame["hard_size"].to_numpy(float))  # tokens in each instance's hard rationale
            out.update({ff("rationale", "hard_size", k): hard[k] for k in MEAN_STATS})
            hard_k = measured.extras.get("hard_k")
            if isinstance(hard_k, float):  # the fraction k_d the hard rationales were cut at
                out[ff("rationale", "hard_k")] = hard_k
            for method in self.methods:  # ERASER's IOU F1: the F1 of the mean IOU precision and recall
                pr = frame[[f"{method}_iou_precision", f"{method}_iou_recall"]].to_numpy(float)
                value, low, high = bootstrap_ci_of(lambda m: harmonic_f1(m[..., 0], m[..., 1]), pr)
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

    def _auc_tp(self, frame: pd.DataFrame) -> dict:
        """``ff/<method>/auc_tp/{value,ci_low,ci_high}``, the area with k in percent (Atanasova et al.'s scale: 0 to
        100), and the performance at each fraction (``…/auc_tp/k<k>``)."""
        out = {}
        labels = frame["label"].to_numpy(int)
        curves = {
            m: frame[[f"{m}_tp_{ff_fraction(f)}" for f in self.auc_tp_fractions]].to_numpy(int) for m in self.methods
        }
        classes = 1 + max([int(labels.max(initial=0))] + [int(p.max(initial=0)) for p in curves.values()])
        percent = [100 * f for f in self.auc_tp_fractions]  # Atanasova et al.'s thresholds 0, 10, …, 100: ×100
        for method, predictions in curves.items():
            (value, low, high), curve = area_under_threshold_performance(
                predictions, labels, percent, self.auc_tp_measure, classes
            )
            out.update({ff(method, "auc_tp", "value"): value, ff(method, "auc_tp", "ci_low"): low})
            out[ff(method, "auc_tp", "ci_high")] = high
            out.update({ff(method, "auc_tp", ff_fraction(f)): float(v) for f, v in zip(self.auc_tp_fractions, curve)})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        path = faithfulness_figure(
            measured.frame, self.methods, self.fractions, out_dir / "curves.png", title=f"{data.name} ({self.split})"
        )
        return {} if path is None else {"curves": path}
