"""One pass of a family over instances of a split — what its hooks get (:class:`Measuring`) and what its ``measure``
returns (:class:`Measured`) —, the rows that name an instance, and the mode a model is analysed in."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from attn_study.analysis.token_scores import TokenScores
from attn_study.progress import Progress


@dataclass
class Measured:
    """What ``measure`` returns: one row per instance, seconds per sub-test, family extras (e.g. the adversarial
    attentions shown in heatmaps), and each instance's text with the per-token importances the family computed
    (written as ``tokens.parquet``: ``token_scores.py``)."""

    frame: pd.DataFrame
    seconds: dict
    extras: dict = field(default_factory=dict)
    tokens: TokenScores = field(default_factory=TokenScores)


def instance_work(lengths: torch.Tensor, quadratic: bool) -> float:
    """What the time left is counted in: Σ T over the instances' lengths T, or Σ T² for a family whose work per
    instance is T × T (``QUADRATIC``)."""
    return float((lengths**2 if quadratic else lengths).sum())


class Measuring:
    """One pass of a family over the instances ``indices`` of ``split`` of ``data`` with ``model``, as the family's
    hooks see it (``AnalysisCallback.measure``).

    - iterating gives the batches on the model's device, ``batch_size`` instances each;
    - ``step(name)`` times a method or sub-test (``seconds``: per step, in the order ``progress`` names them);
    - ``rows``: each instance's row by its index — :meth:`record` keeps a batch's, :meth:`named_rows` begins them
      all for a family that fills them column by column —, and :meth:`frame` gives them in ``indices``'s order;
    - ``tests``: the sub-tests this pass runs; ``tokens``: the per-token scores kept (``tokens.parquet``);
      ``extras``: what ``Measured.extras`` returns beside the rows; ``state``: the family's own state for the pass
      (its randomised models, another run's records), never returned.
    """

    def __init__(
        self,
        progress: Progress,
        model,
        data,
        split: str,
        indices: np.ndarray,
        tests: list[str],
        batch_size: int,
        quadratic: bool,
    ):
        self.progress, self.model, self.data, self.split = progress, model, data, split
        self.indices, self.tests, self.quadratic = indices, list(tests), quadratic
        self.split_data = data.split(split)
        self.device = next(model.parameters()).device
        self.rows: dict[int, dict] = {}
        self.tokens = TokenScores()
        self.extras: dict = {}
        self.state: dict = {}
        self._batch_size = batch_size

    def __iter__(self):
        for batch in self.data.loader(self.split, batch_size=self._batch_size, indices=self.indices):
            self.progress.begin_batch(len(batch["index"]))
            yield {k: v.to(self.device) for k, v in batch.items()}
            self.progress.update(len(batch["index"]), work=instance_work(batch["lengths"].double(), self.quadratic))

    def step(self, name: str):
        """Time the block as step ``name`` (``progress.Progress.step``)."""
        return self.progress.step(name)

    @property
    def seconds(self) -> dict:
        return dict(self.progress.seconds)

    def record(self, batch: dict, probs, columns: dict) -> None:
        record_rows(self.rows, self.split_data, batch, probs, columns)

    def named_rows(self) -> dict[int, dict]:
        """``rows``, each instance's begun with :func:`instance_row`: for a family that fills them column by column."""
        self.rows.update({int(i): instance_row(self.split_data, i) for i in self.indices})
        return self.rows

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.rows[int(i)] for i in self.indices])


@contextlib.contextmanager
def analysis_mode(model):
    """Eval mode, no parameter gradients (gradients w.r.t. inputs only), autograd on — also inside
    Lightning's inference mode — and the global RNG state restored afterwards."""
    was_training = model.training
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    device = params[0].device if params else torch.device("cpu")
    devices = [device] if device.type == "cuda" else []
    with torch.inference_mode(False), torch.random.fork_rng(devices=devices):
        model.eval()
        for p in params:
            p.requires_grad_(False)
        try:
            yield model
        finally:
            for p, flag in zip(params, flags):
                p.requires_grad_(flag)
            model.train(was_training)


def instance_row(split_data, i: int) -> dict:
    """The columns that name instance ``i`` of a split in every family's per-instance frame: its position
    (``index``), ``uid`` and gold ``label``."""
    i = int(i)
    return {"index": i, "uid": split_data.uids[i], "label": int(split_data.labels[i])}


#: per-instance columns that are counts: written as integers
INTEGER_COLUMNS = ("length", "rationale_size", "support")


def record_rows(rows: dict, split_data, batch: dict, probs, columns: dict) -> None:
    """``rows[i]`` for each instance ``i`` of ``batch``: :func:`instance_row`, the prediction, its probability
    and every per-instance column of ``columns`` (name → (B,) tensor), counts as integers."""
    values = {name: column.detach().double().cpu().tolist() for name, column in columns.items()}
    pred, conf = probs.argmax(-1).tolist(), probs.max(-1).values.tolist()
    for r, i in enumerate(batch["index"].tolist()):
        rows[i] = {
            **instance_row(split_data, i),
            "prediction": pred[r],
            "probability": conf[r],
            **{name: v[r] for name, v in values.items()},
        }
        for name in INTEGER_COLUMNS:
            if name in values:
                rows[i][name] = int(rows[i][name])
