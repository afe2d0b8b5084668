"""Agreement between explanation methods (Neely et al. 2022, "A Song of (Dis)agreement in Evaluating the
Faithfulness of Explanations"): per test instance, every chosen method scores the text's tokens for the predicted
class (``importance.METHODS``: a Transformer's layer attention through the pooling α — raw, rollout, flow, norms
—, the pooling attention α, gradient, input × gradient, integrated gradients, leave-one-out), and each pair of
methods gets Kendall τ-b between its two score vectors over the text's tokens. Per pair the mean τ over instances
with its 95 % bootstrap interval. An instance where τ is undefined for a pair (under two tokens, a method's scores
all tied, or NaN — flow past ``flow_max_length``) is left out of that pair's mean and counted.

Metric keys ``ag/<a>/<b>/tau/…``, the two methods in alphabetical order (``ag/attention/flow/tau/mean``); outputs
in ``analysis/agreement/``: ``instances.parquet``, ``summary.json`` and ``tau_matrix.png``, the heatmap of the mean
τ of every two methods.
"""

from __future__ import annotations

import torch

from attn_study.analysis.aggregation import AggregationOptions, check_aggregations, layer_shape
from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import whole
from attn_study.analysis.importance import METHODS, ImportanceOptions, importance, predict, token_mask
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import TOKEN_ATTENTION, Need
from attn_study.errors import UserError
from attn_study.stats import UNDEFINED, kendall_tau_b, snap_ties, summarise, undefined_code

from .figures import tau_matrix_figure
from .keys import AG_METHODS, FIGURE, ag, pair_column, pairs


def available(model) -> list[str]:
    """The methods ``model`` can give: the aggregations where it has layer attention (norms where each head's
    value vectors are known too), the pooling attention where it has one, every attribution method (but
    grad_norm, Meister et al.'s, which is asked for by name)."""
    shape = layer_shape(model)
    out = []
    for method in AG_METHODS:
        if method == "grad_norm":
            continue
        if METHODS[method].layer_attention and (shape is None or (method == "norms" and not shape[2])):
            continue
        if method == "attention" and not getattr(model, "pooling_attention", True):
            continue
        out.append(method)
    return out


class Agreement(AnalysisCallback):
    """Pairwise agreement of explanation methods as a callback; options in conf/analysis/agreement.yaml."""

    PRETRAINED = True  # attention (raw, rollout, flow, norms) against token importance

    CPU_MAX_BATCH = 64  # each instance carries its integrated-gradient steps and deletions
    TESTS = ("agreement",)
    VAL_TESTS = ()
    TRACKABLE = ()
    NEEDS = (Need(TOKEN_ATTENTION, "scores tokens", "model=flat"),)

    def __init__(
        self,
        *,
        methods=None,
        ig_steps: int = 50,
        internal_batch_size: int = 512,
        attention_layer: int = -1,
        attention_head: int | None = None,
        flow_max_length: int = 128,
        **common,
    ):
        super().__init__(**common)
        self.methods = None if methods is None else self._choose("methods", methods, AG_METHODS)
        if self.methods is not None and len(self.methods) < 2:
            raise UserError(f"{self._option('methods')}={list(methods)}: give at least two methods to compare")
        self.ig_steps = whole(self._option("ig_steps"), ig_steps)
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)
        self.aggregation = AggregationOptions(
            layer=whole(self._option("attention_layer"), attention_layer, low=-(10**6)),
            head=whole(self._option("attention_head"), attention_head, low=0, optional=True),
            flow_max_length=whole(self._option("flow_max_length"), flow_max_length),
        )

    def chosen(self, model) -> list[str]:
        """``methods``, or when it is null every method the model can give (:func:`available`)."""
        return available(model) if self.methods is None else self.methods

    def check_model(self, model) -> None:
        methods = self.chosen(model)
        check_aggregations(model, methods, self.aggregation, self._option("methods"))
        if len(methods) < 2:
            name = type(model).__name__
            raise UserError(f"{self._option('methods')}: {name} gives only {methods}; nothing to compare")

    # -- measuring -------------------------------------------------------------------------------

    def step_names(self, model, tests) -> list[str]:
        return ["predict", *self.chosen(model), "tau"]

    def label(self, model, tests) -> str:
        return f"{len(self.chosen(model))} methods"

    def begin(self, run) -> None:
        run.extras["methods"] = self.chosen(run.model)

    def prepare(self, run, batch) -> dict:
        """Every method's scores, each its own step, kept per token (tokens.parquet), and whether τ is undefined
        for them (``UNDEFINED``)."""
        options = ImportanceOptions(
            chunk_size=self.internal_batch_size, ig_steps=self.ig_steps, seed=self.seed, aggregation=self.aggregation
        )
        with run.step("predict"):
            _, alpha, probs = predict(run.model, batch)
        text = token_mask(batch)
        scores, columns = {}, {"length": text.sum(1).double()}
        for method in run.extras["methods"]:
            with run.step(method):
                scores[method], extra = importance(method, run.model, batch, alpha, probs, options)
                columns.update(extra)
                columns[f"{method}_undefined"] = undefined_code(scores[method], text).double()
        run.tokens.add(batch, **scores)
        return {"probs": probs, "text": text, "scores": scores, "columns": columns}

    def measure_agreement(self, run, batch, prepared) -> None:
        """τ-b of every pair of methods, timed as the step ``tau``."""
        text, scores, columns = prepared["text"], prepared["scores"], prepared["columns"]
        with run.step("tau"):
            # ties to 1e-9 of the row's scale (NaN kept: a text past flow's bound stays undefined)
            tied = {m: torch.where(torch.isnan(x), x.double(), snap_ties(x, text)) for m, x in scores.items()}
            for a, b in pairs(run.extras["methods"]):
                columns[pair_column(a, b)] = kendall_tau_b(tied[a], tied[b], text)[0]

    def record(self, run, batch, prepared) -> None:
        run.record(batch, prepared["probs"], prepared["columns"])

    # -- summaries -------------------------------------------------------------------------------

    def summarise(self, measured: Measured, tests) -> dict:
        """Per pair the mean τ [95 % CI], std, median, n; per method the instances its scores leave τ
        undefined for (all tied, NaN); flow's texts past its bound; seconds."""
        frame, methods = measured.frame, measured.extras["methods"]
        out = {ag("n_instances"): len(frame), ag("dropped", "too_short"): int((frame["length"] < 2).sum())}
        for method in methods:
            codes = frame[f"{method}_undefined"].to_numpy()
            for reason in ("nan", "constant"):
                out[ag(method, f"{reason}_scores")] = int((codes == UNDEFINED.index(reason)).sum())
        if "flow_too_long" in frame:
            out[ag("flow", "too_long")] = int(frame["flow_too_long"].sum())
        for a, b in pairs(methods):
            out.update({ag(a, b, "tau", k): v for k, v in summarise(frame[pair_column(a, b)].to_numpy(float)).items()})
        out.update({ag("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir, data) -> dict:
        figure = tau_matrix_figure(
            measured.frame, measured.extras["methods"], out_dir / FIGURE, f"{data.name} ({self.split})"
        )
        return {} if figure is None else {"tau_matrix": figure}
