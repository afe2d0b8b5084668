"""Randomisation sanity checks (Adebayo et al. 2018, "Sanity Checks for Saliency Maps") for the importance
methods of ``attn_study.analysis.importance.METHODS``.

Cascading randomisation: the trained model's parameters are re-initialised stage by stage from the top —
decoder, then also the attention scorer, then also the encoder, then also the embeddings (``keys.STAGES``) — and
every method explains each randomised model's prediction on the same instances. Per instance and stage, the rank
correlation between the explanation of the trained model and that of the randomised one over the text's tokens:
Spearman ρ and Kendall τ-b, of the signed scores and (as Adebayo et al.) of their absolute values, and each one's
magnitude |ρ| — the headline: each model explains its own prediction, so where the randomisation flips it a signed
method's explanation flips its sign with the class, and ρ is negative for an explanation that did not otherwise
change; |ρ| does not depend on which class is explained. An explanation that stays the same when the model it
explains is destroyed (|ρ| ≈ 1) explains nothing about the model; ``random``, drawn per instance from the seed
without looking at the model, stays at exactly 1.

Re-initialisation: every submodule of a stage that has torch's ``reset_parameters`` calls it (its own
initialiser: Linear kaiming-uniform, LSTM/GRU uniform ±1/√H, Embedding N(0, 1) with the padding row 0); a
parameter no such submodule owns (the dot scorer's query) is redrawn from N(0, σ²), σ the standard deviation of
its trained values (1/√size where those are constant). The draws come from a generator seeded by (``seed``,
stage), so the randomised models — and every statistic — are the same for any batch size.

Scores equal to 1e-9 of the row's largest magnitude are ties (rounding noise between two equal importances, a
repeated word, never decides a rank). Rows of fewer than two tokens or a constant explanation: NaN, counted.
Randomised labels (test ``labels``): the same comparison with a model of the same architecture trained on permuted
train and dev labels (``label_run``: a run made with ``dataset.shuffle_labels=true`` on the same data), which has
learnt no relation between text and label; keys under ``sn/<method>/labels/…``.

Metric keys ``sn/<method>/<stage>/<statistic>/…`` (``keys.STATISTICS``: ``spearman``, ``kendall``, ``spearman_abs``,
``kendall_abs`` and each with ``_magnitude``, the headline ``spearman_magnitude``) with 95 % bootstrap intervals;
``sn/<stage>/same_prediction``: the share of predictions the randomisation left unchanged.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import torch

from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import whole
from attn_study.analysis.importance import METHODS, ImportanceOptions, importance, predict, token_mask
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import TOKEN_ATTENTION, Need
from attn_study.analysis.protocol import staged_model
from attn_study.errors import UserError
from attn_study.stats import kendall_tau_b, snap_ties, summarise

from .figures import sanity_figure
from .keys import LABELS, STAGES, STATISTICS, sn

#: stage → the model attributes it re-initialises (those the model has)
STAGE_MODULES = {
    "decoder": ("output", "w_context", "w_query"),
    "attention": ("scorer",),
    "encoder": ("encoder", "question_encoder"),
    "embeddings": ("embedding",),
}


def stage_modules(model, stage: str) -> list[torch.nn.Module]:
    return [
        getattr(model, name) for name in STAGE_MODULES[stage] if isinstance(getattr(model, name, None), torch.nn.Module)
    ]


@torch.no_grad()
def reinitialise(modules, seed: int) -> int:
    """Re-initialise ``modules`` in place (module docstring), from a generator seeded by ``seed``; returns the
    number of parameter values redrawn."""
    count = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in modules:
            covered = set()
            for sub in module.modules():
                if hasattr(sub, "reset_parameters") and callable(sub.reset_parameters):
                    sub.reset_parameters()
                    covered |= {id(p) for p in sub.parameters(recurse=False)}
            for sub in module.modules():
                for p in sub.parameters(recurse=False):
                    if id(p) not in covered:
                        std = float(p.double().std()) if p.numel() > 1 else 0.0
                        p.copy_(
                            torch.randn(p.shape, dtype=torch.float64) * (std if std > 0 else 1 / math.sqrt(p.numel()))
                        )
                        covered.add(id(p))
            count += sum(p.numel() for p in module.parameters())
    return count


def cascade(model, stages, seed: int) -> list[tuple[str, torch.nn.Module, int]]:
    """[(stage, model with it and every stage before it re-initialised, parameters redrawn so far)] — copies;
    ``model`` is left as it is. Stage j's draws come from the seed (``seed``, j)."""
    out, current, total = [], model, 0
    for j, stage in enumerate(stages):
        current = copy.deepcopy(current)
        total += reinitialise(stage_modules(current, stage), seed * 1000 + j + 1)
        out.append((stage, current, total))
    return out


def average_ranks(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per row, the rank (1 = smallest) of each entry among the row's ``mask`` entries, tied entries sharing the
    mean of their ranks (scipy's ``rankdata``); 0 off the mask."""
    b, t = x.shape
    keyed = torch.where(mask, x.double(), torch.full_like(x, math.inf, dtype=torch.float64))
    values, order = torch.sort(keyed, dim=1, stable=True)
    index = torch.arange(t, device=x.device).expand(b, t)
    new = torch.ones_like(mask)
    new[:, 1:] = values[:, 1:] != values[:, :-1]
    first = torch.where(new, index, torch.zeros_like(index)).cummax(1).values
    ends = torch.ones_like(mask)
    ends[:, :-1] = values[:, 1:] != values[:, :-1]
    last = torch.where(ends, index, torch.full_like(index, t)).flip(1).cummin(1).values.flip(1)
    ranks = torch.empty(b, t, dtype=torch.float64, device=x.device)
    ranks.scatter_(1, order, (first + last).double() / 2 + 1)
    return ranks * mask


def spearman_rho(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per row, Spearman's ρ over the ``mask`` entries — Pearson's correlation of the average ranks, as
    ``scipy.stats.spearmanr`` — NaN with fewer than two entries or a constant row."""
    n = mask.sum(1, keepdim=True).double()
    rx, ry = average_ranks(x, mask), average_ranks(y, mask)
    mean = (n + 1) / 2
    dx, dy = (rx - mean) * mask, (ry - mean) * mask
    den = torch.sqrt((dx * dx).sum(1) * (dy * dy).sum(1))
    rho = (dx * dy).sum(1) / torch.where(den > 0, den, torch.ones_like(den))
    return torch.where((den > 0) & (n.squeeze(1) > 1), rho.clamp(-1, 1), torch.full_like(rho, float("nan")))


def correlations(before: torch.Tensor, after: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """{``rho``, ``tau``, ``rho_abs``, ``tau_abs``: (B,)} between two explanations (B, T) over ``mask``, and each
    one's magnitude per instance (``rho_magnitude`` = |ρ|, …; NaN stays NaN)."""
    a, b = snap_ties(before, mask), snap_ties(after, mask)
    out = {}
    for suffix, (x, y) in (("", (a, b)), ("_abs", (a.abs(), b.abs()))):
        out[f"rho{suffix}"] = spearman_rho(x, y, mask)
        out[f"tau{suffix}"] = kendall_tau_b(x, y, mask)[0].double()
    out.update({f"{name}_magnitude": values.abs() for name, values in list(out.items())})
    return out


class Sanity(AnalysisCallback):
    """Cascading randomisation of the model, every chosen importance method's explanation compared with the trained
    model's; options in conf/analysis/sanity.yaml."""

    CPU_MAX_BATCH = 64  # every method runs once per stage
    TESTS = ("cascading", "labels")
    VAL_TESTS = ()
    TRACKABLE = ()
    NEEDS = (Need(TOKEN_ATTENTION, "explains tokens", "model=flat"),)

    def __init__(
        self,
        *,
        methods=("attention", "gradient", "grad_norm", "input_x_gradient", "integrated_gradients", "loo", "random"),
        stages=tuple(STAGES),
        ig_steps: int = 50,
        internal_batch_size: int = 512,
        label_run: str | None = None,
        **common,
    ):
        if common.get("tests") is None:  # the randomised-label test needs a run of its own: asked for by name
            common["tests"] = ["cascading"]
        super().__init__(**common)
        self.label_run = label_run
        if "labels" in self.tests and not label_run:
            raise UserError(
                f"{self._option('tests')} has labels and {self._option('label_run')} is not set: give the run "
                "trained with dataset.shuffle_labels=true on the same data"
            )
        self.methods = self._choose("methods", methods, list(METHODS))
        chosen = [str(s) for s in stages]
        unknown = sorted(set(chosen) - set(STAGES))
        if unknown or not chosen:
            raise UserError(f"{self._option('stages')}: unknown {unknown}; choose from {list(STAGES)} (in order)")
        self.stages = [s for s in STAGES if s in chosen]
        if chosen != self.stages:
            raise UserError(
                f"{self._option('stages')}={chosen}: a cascade goes from the top down; list them as {self.stages}"
            )
        self.ig_steps = whole(self._option("ig_steps"), ig_steps)
        self.internal_batch_size = whole(self._option("internal_batch_size"), internal_batch_size)

    def check_model(self, model) -> None:
        missing = [s for s in self.stages if not stage_modules(model, s)]
        if missing:
            raise UserError(
                f"analysis=sanity re-initialises {missing}, and {type(model).__name__} has none of "
                f"{[n for s in missing for n in STAGE_MODULES[s]]}; use model=flat or model=pair"
            )

    def check(self, model, data=None) -> None:
        """Also, when the run directory is known (before training), that ``label_run`` is a complete run trained
        on shuffled labels."""
        super().check(model, data)
        if "labels" in self.tests and self.other_runs is not None:  # the job's: its run directory is known
            self._label_run_dir()

    def _label_run_dir(self) -> Path:
        run_dir = self.other_run_dir("label_run", self.label_run)
        if not self.other_run_config("label_run", run_dir).dataset.get("shuffle_labels"):
            raise UserError(
                f"{self._option('label_run')}={run_dir}: that run was trained on the real labels; give one trained "
                "with dataset.shuffle_labels=true"
            )
        return run_dir

    def _label_model(self, model, data, split: str):
        """The randomised-label run's model, refused in one line unless it holds this run's vocabulary and
        instances."""
        other = self.load_other_run("label_run", self._label_run_dir(), data)
        return staged_model(other.module).to(next(model.parameters()).device)

    def step_names(self, model, tests) -> list[str]:
        """The randomisation, then each method: its seconds sum its explanations of every model, the trained one's
        and each randomised one's (the tests are no steps of their own)."""
        return ["randomise", *self.methods]

    def label(self, model, tests) -> str:
        return "cascading"

    def begin(self, run) -> None:
        """The randomised models, once per pass (``run.state``: never returned), and the parameters each redrew."""
        with run.step("randomise"):
            cascading = cascade(run.model, self.stages, self.seed) if "cascading" in run.tests else []
            labels = [(LABELS, self._label_model(run.model, run.data, run.split), 0)] if "labels" in run.tests else []
        run.state.update(cascading=cascading, labels=labels)
        run.extras["parameters"] = {stage: count for stage, _, count in cascading + labels}

    def prepare(self, run, batch) -> dict:
        """The trained model's explanations (each method its step), kept per token but random's (tokens.parquet)."""
        text = token_mask(batch)
        _, alpha, probs = predict(run.model, batch)
        before = {}
        for method in self.methods:
            with run.step(method):
                before[method] = importance(method, run.model, batch, alpha, probs, self._options())[0]
        run.tokens.add(batch, **{method: values for method, values in before.items() if method != "random"})
        return {"text": text, "probs": probs, "before": before, "columns": {"length": text.sum(1).double()}}

    def measure_cascading(self, run, batch, prepared) -> None:
        self._compare(run, batch, prepared, run.state["cascading"])

    def measure_labels(self, run, batch, prepared) -> None:
        self._compare(run, batch, prepared, run.state["labels"])

    def _compare(self, run, batch, prepared, models) -> None:
        """Each randomised model's explanations (each method its step) against the trained one's: whether its
        prediction is the same, and the rank correlations (:func:`correlations`)."""
        columns, probs = prepared["columns"], prepared["probs"]
        for stage, randomised, _ in models:
            _, alpha_r, probs_r = predict(randomised, batch)
            columns[f"{stage}_same_prediction"] = (probs_r.argmax(-1) == probs.argmax(-1)).double()
            for method in self.methods:
                with run.step(method):
                    after = importance(method, randomised, batch, alpha_r, probs_r, self._options())[0]
                for suffix, values in correlations(prepared["before"][method], after, prepared["text"]).items():
                    columns[f"{method}_{stage}_{suffix}"] = values

    def record(self, run, batch, prepared) -> None:
        run.record(batch, prepared["probs"], prepared["columns"])

    def _options(self) -> ImportanceOptions:
        return ImportanceOptions(chunk_size=self.internal_batch_size, ig_steps=self.ig_steps, seed=self.seed)

    def summarise(self, measured: Measured, tests) -> dict:
        """Flat ``sn/...`` metrics: per method, stage and statistic the mean [95 % CI], std, median, n; per stage
        the share of unchanged predictions and the parameters redrawn; rows left undefined; seconds."""
        frame = measured.frame
        out = {sn("n_instances"): len(frame), sn("dropped", "too_short"): int((frame["length"] < 2).sum())}
        compared = [*(self.stages if "cascading" in tests else []), *([LABELS] if "labels" in tests else [])]
        for stage in compared:
            same = summarise(frame[f"{stage}_same_prediction"].to_numpy(float))
            out.update({sn(stage, "same_prediction", k): same[k] for k in ("mean", "ci_low", "ci_high")})
            out[sn(stage, "parameters")] = int(measured.extras.get("parameters", {}).get(stage, 0))
        for method in self.methods:
            for stage in compared:
                for suffix, (part, _) in STATISTICS.items():
                    values = frame[f"{method}_{stage}_{suffix}"].to_numpy(float)
                    out.update({sn(method, stage, part, k): v for k, v in summarise(values).items()})
                undefined = np.isnan(frame[f"{method}_{stage}_rho"].to_numpy(float)) & (frame["length"] >= 2).to_numpy()
                out[sn(method, stage, "undefined")] = int(undefined.sum())
        out.update({sn("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        if "cascading" not in self.tests:
            return {}
        path = sanity_figure(
            measured.frame, self.methods, self.stages, out_dir / "cascade.png", title=f"{data.name} ({self.split})"
        )
        return {} if path is None else {"cascade": path}
