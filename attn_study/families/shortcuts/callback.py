"""Bai et al. (2021), "Why Attentions May Not Be Interpretable?": combinatorial shortcuts, measured.

Per test instance, with α the model's attention (a selector's normalised k-token mask) and its top-k
tokens "selected" (a selector's own k; else ``top_k``):

- ``mask_only``: the model's prediction when every token's content is replaced by the same neutral
  token (``<unk>``) while the attention computed from the real input is kept. Accuracy well above
  chance means *where* the weight falls carries the label by itself — the shortcut. (For a context-free
  encoder the neutral states are all alike, so this is at chance by construction.) It cannot see a
  shortcut carried by *which* token was picked, so beside it ``selected_only``: the selected tokens keep
  their identity, every other token is blanked, the attention is kept. (A selector's predictor only ever
  sees its selected tokens: for it ``selected_only`` is its ordinary prediction.)
- ``markers`` (data with ``dataset.inject``): the attention mass on the injected markers, whether a
  marker is among the selected tokens, and whether *which* marker gets the most attention predicts the
  label: the leave-one-out majority rule over the test instances grouped by that choice, against the
  same rule with no grouping (its baseline: a leave-one-out majority lands below the majority-class rate
  when classes are balanced), and a chi-square test of independence of choice and label.
- ``rationale`` (data with known rationales, the synthetic task): precision of the selected tokens
  against the truth.
- ``posthoc`` (explainers, ``target``: the black-box run): how often the black box's prediction on the
  selected tokens alone (the rest deleted, order kept) agrees with its prediction on the full text.

Also the accuracy. Metric keys ``sc/...``; outputs in ``analysis/shortcuts/``. The paper gives the ideas
(only its abstract is available); these operational definitions are ours and named in
conf/analysis/shortcuts.yaml.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.checks import whole
from attn_study.analysis.importance import kept_sub_batch, predict, token_mask
from attn_study.analysis.measuring import Measured, instance_row
from attn_study.data.text import UNK_ID
from attn_study.models.selector import hard_top_k
from attn_study.stats import summarise

from . import keys


def neutral_predictions(model, batch: dict, alpha: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Output distributions with every token of the text but those in ``keep`` (B, T) (none by default)
    replaced by ``<unk>`` and the attention ``alpha`` (computed from the real input) kept: only the pattern
    of the weights — and the kept tokens — reach the output."""
    if hasattr(model, "encode_selected"):  # a selector: the predictor on the blanked input, same selection
        enc = model.encode_selected(batch, (alpha > 0).to(alpha.dtype), neutral=keep is None)
    else:
        blank = token_mask(batch) if keep is None else token_mask(batch) & ~keep
        enc = model.encode({**batch, "ids": torch.where(blank, torch.full_like(batch["ids"], UNK_ID), batch["ids"])})
    return model.probabilities(model.decode(enc, alpha))


def choice_accuracy(choice: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """Whether a choice (e.g. the most attended marker) carries label information: (leave-one-out accuracy
    of guessing each instance's label as the majority label of the *other* instances with its choice; the
    same rule over all other instances — the baseline, computed the same way; the chi-square test's
    p-value of independence of choice and label, NaN when either takes one value)."""
    ok = ~pd.isna(choice)
    choice, labels = choice[ok], labels[ok].astype(int)
    if not len(labels):
        return float("nan"), float("nan"), float("nan")
    classes = int(labels.max()) + 1
    table = pd.crosstab(choice, labels).reindex(columns=range(classes), fill_value=0)
    own = np.eye(classes, dtype=int)[labels]
    counts = table.loc[choice].to_numpy() - own  # the others with that choice
    overall = np.bincount(labels, minlength=classes)[None, :] - own  # all the others
    guess = np.where(counts.sum(1) > 0, counts.argmax(1), overall.argmax(1))
    observed = table.loc[:, table.sum(0) > 0]
    p = float(stats.chi2_contingency(observed.to_numpy())[1]) if min(observed.shape) > 1 else float("nan")
    return float((guess == labels).mean()), float((overall.argmax(1) == labels).mean()), p


class Shortcuts(AnalysisCallback):
    """The combinatorial-shortcut measures as a callback; options in conf/analysis/shortcuts.yaml."""

    TESTS = ("mask_only", "selected_only", "markers", "rationale", "posthoc")
    VAL_TESTS = ("mask_only", "markers")
    PREPARE = "predict"
    BATCH_FIELDS = {"markers": ("markers",), "rationale": ("rationale",)}  # data with injected markers, rationales

    def __init__(self, *, top_k: int = 5, target: str | None = None, **common):
        super().__init__(**common)
        self.top_k, self.target = whole(self._option("top_k"), top_k), target
        self._black_box = None

    def check(self, model, data=None) -> None:
        """Also, before training, that the explained run is complete."""
        super().check(model, data)
        if self.target and self.other_runs is not None:  # the job's: its run directory is known
            self.other_run_dir("target", self.target)

    def black_box(self, data):
        """The explained run (``target``), loaded once and checked to hold the same data."""
        if self._black_box is None:
            self._black_box = self.load_other_run("target", self.target, data)
        return self._black_box.model

    def selected(self, model, enc, alpha: torch.Tensor) -> torch.Tensor:
        if enc.selection is not None:
            return (enc.selection > 0) & enc.mask
        return hard_top_k(alpha, enc.mask, self.top_k).bool()

    def begin(self, run) -> None:
        """The post-hoc test explains another run (``target``): without one, nothing to measure."""
        if not self.target:
            run.tests = [test for test in run.tests if test != "posthoc"]

    def prepare(self, run, batch) -> dict:
        """The prediction, the selected tokens and the attention per token (a selector's: its selection, for
        tokens.parquet); the tests add their columns to ``columns``."""
        enc, alpha, probs = predict(run.model, batch)
        chosen = self.selected(run.model, enc, alpha)
        run.tokens.add(batch, attention=alpha)
        columns = {
            "prediction": probs.argmax(-1),
            "correct": (probs.argmax(-1) == batch["labels"]).double(),
            "selected": chosen.sum(-1),
        }
        return {"alpha": alpha, "chosen": chosen, "columns": columns}

    def measure_mask_only(self, run, batch, prepared) -> None:
        """Bai et al.: the mask alone — every token blanked, the attention kept."""
        self._neutral(run, batch, prepared, "mask_only", keep=None)

    def measure_selected_only(self, run, batch, prepared) -> None:
        """The selected words alone, the rest blanked, the attention kept."""
        self._neutral(run, batch, prepared, "selected_only", keep=prepared["chosen"])

    def _neutral(self, run, batch, prepared, test: str, keep) -> None:
        neutral = neutral_predictions(run.model, batch, prepared["alpha"], keep=keep)
        prepared["columns"][f"{test}_prediction"] = neutral.argmax(-1)
        prepared["columns"][f"{test}_correct"] = (neutral.argmax(-1) == batch["labels"]).double()

    def measure_markers(self, run, batch, prepared) -> None:
        alpha, chosen, cols = prepared["alpha"], prepared["chosen"], prepared["columns"]
        markers = batch["markers"] & batch["mask"]
        cols["marker_mass"] = (alpha * markers).sum(-1).double()
        cols["marker_selected"] = (chosen & markers).any(-1).double()
        top = alpha.masked_fill(~markers, -1.0).argmax(-1)
        token = batch["ids"].gather(1, top[:, None]).squeeze(1)
        cols["top_marker"] = torch.where(markers.any(-1), token, torch.full_like(token, -1))

    def measure_rationale(self, run, batch, prepared) -> None:
        chosen = prepared["chosen"]
        truth = batch["rationale"] & batch["mask"]
        prepared["columns"]["rationale_precision"] = ((chosen & truth).sum(-1) / chosen.sum(-1).clamp_min(1)).double()

    def measure_posthoc(self, run, batch, prepared) -> None:
        black_box = self.black_box(run.data).to(run.device)
        prepared["columns"]["posthoc_agree"] = self._posthoc_agree(black_box, batch, prepared["chosen"])

    def record(self, run, batch, prepared) -> None:
        self._record(run.rows, batch, prepared["columns"], run.split_data)

    def end(self, run):
        frame = run.frame()
        if "top_marker" in frame:
            frame["top_marker"] = frame["top_marker"].where(frame["top_marker"] >= 0)
        return frame

    @staticmethod
    def _posthoc_agree(black_box, batch: dict, chosen):
        """Whether the black box predicts the same from the selected words alone (and <sos>/<eos>) as from the
        whole text: 1.0 or 0.0 per instance."""
        full = black_box.probabilities(black_box(batch)[0]).argmax(-1)
        every = torch.arange(len(chosen), device=chosen.device)
        kept = (chosen & batch["mask"]) | (batch["mask"] & ~token_mask(batch))  # <sos>/<eos> stay
        alone = black_box.probabilities(black_box(kept_sub_batch(batch, every, kept))[0]).argmax(-1)
        return (full == alone).double()

    @staticmethod
    def _record(rows: dict, batch: dict, cols: dict, split_data) -> None:
        """``rows[i]`` per instance of ``batch``: :func:`instance_row`, its length and the columns ``cols``."""
        values = {k: v.tolist() for k, v in cols.items()}
        for r, i in enumerate(batch["index"].tolist()):
            length = int(len(split_data.ids[i]))
            rows[i] = {**instance_row(split_data, i), "length": length, **{k: v[r] for k, v in values.items()}}

    def summarise(self, measured: Measured, tests) -> dict:
        frame = measured.frame
        labels = frame["label"].to_numpy(int)
        chance = float(np.bincount(labels).max() / len(labels)) if len(labels) else float("nan")
        out = {
            keys.sc("n_instances"): len(frame),
            keys.sc("accuracy"): float(frame["correct"].mean()),
            keys.sc("chance"): chance,
            keys.sc("selected", "mean"): float(frame["selected"].mean()),
        }
        for test in ("mask_only", "selected_only"):
            if f"{test}_correct" in frame:
                out[keys.sc(test, "accuracy")] = float(frame[f"{test}_correct"].mean())
                out[keys.sc(test, "above_chance")] = out[keys.sc(test, "accuracy")] - chance
        if "marker_mass" in frame:
            stats = summarise(frame["marker_mass"].to_numpy(float))
            out.update(
                {keys.sc("markers", "mass", k): stats[k] for k in ("mean", "ci_low", "ci_high", "median", "std")}
            )
            out[keys.sc("markers", "selected_frac")] = float(frame["marker_selected"].mean())
            accuracy, baseline, p = choice_accuracy(frame["top_marker"].to_numpy(), labels)
            out[keys.sc("markers", "choice_label_accuracy")] = accuracy
            out[keys.sc("markers", "choice_baseline")] = baseline
            out[keys.sc("markers", "choice_label_p")] = p
        if "rationale_precision" in frame:
            stats = summarise(frame["rationale_precision"].to_numpy(float))
            out.update(
                {keys.sc("rationale", "precision", k): stats[k] for k in ("mean", "ci_low", "ci_high", "median")}
            )
        if "posthoc_agree" in frame:
            out[keys.sc("posthoc", "accuracy")] = float(frame["posthoc_agree"].mean())
        out.update({keys.sc("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        return {}
