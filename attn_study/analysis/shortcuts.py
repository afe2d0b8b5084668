"""Bai et al. (2021), "Why Attentions May Not Be Interpretable?": combinatorial shortcuts, measured.

Per test instance, with α the model's attention (a selector's normalised k-token mask) and its top-k
tokens "selected" (a selector's own k; else ``top_k``):

- ``mask_only``: the model's prediction when every token's content is replaced by the same neutral
  token (``<unk>``) while the attention computed from the real input is kept. Accuracy well above
  chance means *where* the weight falls carries the label by itself — the shortcut. (For a context-free
  encoder the neutral states are all alike, so this is at chance by construction.)
- ``markers`` (data with ``dataset.inject``): the attention mass on the injected markers, whether a
  marker is among the selected tokens, and whether *which* marker gets the most attention predicts the
  label (leave-one-out majority rule over the test instances, against the majority class).
- ``rationale`` (data with known rationales, the synthetic task): precision of the selected tokens
  against the truth.
- ``posthoc`` (explainers, ``target``: the black-box run): how often the black box's prediction on the
  selected tokens alone (the rest deleted, order kept) agrees with its prediction on the full text.

Also the accuracy. Metric keys ``sc/...``; outputs in ``analysis/shortcuts/``. The paper gives the ideas
(only its abstract is available); these operational definitions are ours and named in
conf/analysis/shortcuts.yaml.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from attn_study import keys, saved
from attn_study.analysis.callback import AnalysisCallback, Measured
from attn_study.analysis.importance import kept_sub_batch, predict
from attn_study.analysis.measures import summarise
from attn_study.data.text import UNK_ID
from attn_study.models.selector import hard_top_k


def neutral_predictions(model, batch: dict, alpha: torch.Tensor) -> torch.Tensor:
    """Output distributions with every real token replaced by ``<unk>`` and the attention ``alpha``
    (computed from the real input) kept: only the pattern of the weights reaches the output."""
    if hasattr(model, "encode_selected"):  # a selector: the predictor on the neutral input, same selection
        enc = model.encode_selected(batch, (alpha > 0).to(alpha.dtype), neutral=True)
    else:
        neutral = {**batch, "ids": torch.where(batch["mask"], torch.full_like(batch["ids"], UNK_ID), batch["ids"])}
        enc = model.encode(neutral)
    return model.probabilities(model.decode(enc, alpha))


def choice_accuracy(choice: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(leave-one-out accuracy of predicting the label by the majority label of the other instances
    with the same choice, the majority-class rate): whether the choice carries label information."""
    ok = ~pd.isna(choice)
    choice, labels = choice[ok], labels[ok].astype(int)
    if not len(labels):
        return float("nan"), float("nan")
    classes = int(labels.max()) + 1
    table = pd.crosstab(choice, labels).reindex(columns=range(classes), fill_value=0)
    counts = table.loc[choice].to_numpy() - np.eye(classes, dtype=int)[labels]  # the others with that choice
    overall = np.bincount(labels, minlength=classes)[None, :] - np.eye(classes, dtype=int)[labels]
    guess = np.where(counts.sum(1) > 0, counts.argmax(1), overall.argmax(1))
    return float((guess == labels).mean()), float(np.bincount(labels).max() / len(labels))


class Shortcuts(AnalysisCallback):
    """The combinatorial-shortcut measures as a callback; options in conf/analysis/shortcuts.yaml."""

    name = "shortcuts"
    TESTS = ("mask_only", "markers", "rationale", "posthoc")
    VAL_TESTS = ("mask_only", "markers")
    TRACKED = keys.TRACKED["shortcuts"]

    def __init__(self, *, top_k: int = 5, target: str | None = None, **common):
        super().__init__(**common)
        self.top_k, self.target = int(top_k), target
        self._black_box = None

    def black_box(self, data):
        """The explained run (``target``), loaded once and checked to hold the same data."""
        if self._black_box is None:
            self._black_box = saved.load(self.target, option=f"analysis.{self.name}.target")
            saved.check_same_data(self._black_box, data, f"analysis.{self.name}.target")
        return self._black_box.model

    def selected(self, model, enc, alpha: torch.Tensor) -> torch.Tensor:
        if enc.selection is not None:
            return (enc.selection > 0) & enc.mask
        return hard_top_k(alpha, enc.mask, self.top_k).bool()

    def measure(self, model, data, split, indices, tests) -> Measured:
        device = next(model.parameters()).device
        split_data = data.split(split)
        black_box = self.black_box(data).to(device) if "posthoc" in tests and self.target else None
        seconds = dict.fromkeys(["predict", *tests], 0.0)
        rows = {}
        for batch in tqdm(data.loader(split, batch_size=self.batch_size_for(data, split, indices, device), indices=indices), desc="shortcuts",
                          leave=False, dynamic_ncols=True):
            started = time.time()
            batch = {k: v.to(device) for k, v in batch.items()}
            enc, alpha, probs = predict(model, batch)
            chosen = self.selected(model, enc, alpha)
            labels = batch["labels"]
            cols = {"prediction": probs.argmax(-1), "correct": (probs.argmax(-1) == labels).double(),
                    "selected": chosen.sum(-1)}
            seconds["predict"] += time.time() - started
            if "mask_only" in tests:
                started = time.time()
                neutral = neutral_predictions(model, batch, alpha)
                cols["mask_only_prediction"] = neutral.argmax(-1)
                cols["mask_only_correct"] = (neutral.argmax(-1) == labels).double()
                seconds["mask_only"] += time.time() - started
            if "markers" in tests and "markers" in batch:
                markers = batch["markers"] & batch["mask"]
                cols["marker_mass"] = (alpha * markers).sum(-1).double()
                cols["marker_selected"] = (chosen & markers).any(-1).double()
                top = alpha.masked_fill(~markers, -1.0).argmax(-1)
                token = batch["ids"].gather(1, top[:, None]).squeeze(1)
                cols["top_marker"] = torch.where(markers.any(-1), token, torch.full_like(token, -1))
            if "rationale" in tests and "rationale" in batch:
                truth = batch["rationale"] & batch["mask"]
                cols["rationale_precision"] = ((chosen & truth).sum(-1) / chosen.sum(-1).clamp_min(1)).double()
            if black_box is not None:
                started = time.time()
                full = black_box.probabilities(black_box(batch)[0]).argmax(-1)
                every = torch.arange(len(chosen), device=chosen.device)
                alone = black_box.probabilities(black_box(kept_sub_batch(batch, every, chosen & batch["mask"]))[0])
                alone = alone.argmax(-1)
                cols["posthoc_agree"] = (full == alone).double()
                seconds["posthoc"] += time.time() - started
            values = {k: v.tolist() for k, v in cols.items()}
            for r, i in enumerate(batch["index"].tolist()):
                rows[i] = {"index": i, "uid": split_data.uids[i], "label": int(split_data.labels[i]),
                           "length": int(len(split_data.ids[i])), **{k: v[r] for k, v in values.items()}}
        frame = pd.DataFrame([rows[int(i)] for i in indices])
        if "top_marker" in frame:
            frame["top_marker"] = frame["top_marker"].where(frame["top_marker"] >= 0)
        return Measured(frame, seconds)

    def summarise(self, measured: Measured, tests) -> dict:
        frame = measured.frame
        labels = frame["label"].to_numpy(int)
        chance = float(np.bincount(labels).max() / len(labels)) if len(labels) else float("nan")
        out = {keys.sc("n_instances"): len(frame), keys.sc("accuracy"): float(frame["correct"].mean()),
               keys.sc("chance"): chance, keys.sc("selected", "mean"): float(frame["selected"].mean())}
        if "mask_only_correct" in frame:
            out[keys.sc("mask_only", "accuracy")] = float(frame["mask_only_correct"].mean())
            out[keys.sc("mask_only", "above_chance")] = out[keys.sc("mask_only", "accuracy")] - chance
        if "marker_mass" in frame:
            stats = summarise(frame["marker_mass"].to_numpy(float))
            out.update({keys.sc("markers", "mass", k): stats[k] for k in ("mean", "ci_low", "ci_high", "median", "std")})
            out[keys.sc("markers", "selected_frac")] = float(frame["marker_selected"].mean())
            accuracy, baseline = choice_accuracy(frame["top_marker"].to_numpy(), labels)
            out[keys.sc("markers", "choice_label_accuracy")] = accuracy
            out[keys.sc("markers", "choice_majority_baseline")] = baseline
        if "rationale_precision" in frame:
            stats = summarise(frame["rationale_precision"].to_numpy(float))
            out.update({keys.sc("rationale", "precision", k): stats[k] for k in ("mean", "ci_low", "ci_high", "median")})
        if "posthoc_agree" in frame:
            out[keys.sc("posthoc", "accuracy")] = float(frame["posthoc_agree"].mean())
        out.update({keys.sc("seconds", k): v for k, v in measured.seconds.items()})
        return out

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict:
        return {}
