"""Wiegreffe & Pinter (2019), "Attention is not not Explanation": this run compared with a base run on the
same test instances — the yardstick for an adversarial JSD (W&P §4–5).

Per instance i: JSD(α_i, α_i^base) (natural log, over the tokens) and TVD(ŷ_i, ŷ_i^base), the base read
from its ``attention.parquet`` (every flat or pair run records one while testing:
``job.saved.AttentionRecorder``) and aligned by instance uid. For another seed of the base model this is the
*seed variance* (the natural spread of attention
between equally good models); for a model-consistent adversary (``training=model_consistent_adversary``)
it is the adversary's point on the JSD–TVD frontier; for a model with its attention pre-loaded the JSD is 0.
Keys ``wp/jsd/…``, ``wp/tvd/…``, ``wp/agreement`` (same predicted class). The report combines the runs
(``attn_study/report/wiegreffe_pinter.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attn_study import layout
from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.importance import predict
from attn_study.analysis.measuring import Measured
from attn_study.analysis.needs import POOLING_ATTENTION, SOFT_ATTENTION, TOKEN_ATTENTION, Need
from attn_study.data.digest import text_digests
from attn_study.errors import UserError
from attn_study.stats import jsd, summarise, tvd

from . import keys


def read_reference(run_dir: Path, option: str) -> pd.DataFrame:
    """A complete run's (``other_run_dir``) ``attention.parquet`` (uid, attention, probabilities), or a one-line
    error naming it."""
    path = Path(run_dir) / layout.ATTENTION
    if not path.is_file():
        raise UserError(
            f"{option}={run_dir}: no {layout.ATTENTION} there; the base run must have finished "
            "(runs write it after testing)"
        )
    return pd.read_parquet(path)


def compare(alpha: torch.Tensor, probs: torch.Tensor, base_alpha: torch.Tensor, base_probs: torch.Tensor):
    """(JSD(α, α^base), TVD(ŷ, ŷ^base)) per row: α (B, T) 0 on padding, ŷ (B, C)."""
    return jsd(alpha, base_alpha), tvd(probs, base_probs)


class WiegreffePinter(AnalysisCallback):
    """This run vs ``base`` (a run directory, or ``sibling:<experiment>`` in a sweep) on ``split``."""

    TESTS = ("comparison",)
    VAL_TESTS = ()
    TRACKABLE = ()  # the comparison reads the base run's test-split attention: nothing to compare on dev
    NEEDS = tuple(
        Need(capability, "compares attention over tokens", "model=flat or pair")
        for capability in (TOKEN_ATTENTION, SOFT_ATTENTION)
    ) + (Need(POOLING_ATTENTION, "compares pooling attentions", "attention=additive or dot"),)

    def __init__(self, *, base: str | None = None, **common):
        super().__init__(**common)
        self.base = base
        self.base_dir: Path | None = None

    def check(self, model, data=None) -> None:
        """Also, when the run directory is known (before training), that the base is complete, has its attention
        file, and recorded the very texts this run will analyse."""
        super().check(model, data)
        if self.other_runs is not None:  # the job's: its run directory is known
            base = self._base()
            reference = read_reference(base, self._option("base"))
            if data is not None:
                self._same_instances(reference, data, self.split, base)

    def _same_instances(self, reference: pd.DataFrame, data, split: str, base: Path) -> None:
        """The base's recorded instances are this run's ``split``, text for text where the base recorded a
        digest of each text (uids alone can agree on other texts), else uid and length."""
        rows = data.split(split)
        if "text" in reference:
            mine, theirs = text_digests(rows), list(reference["text"])
        else:
            mine = [f"{u}:{len(ids)}" for u, ids in zip(rows.uids, rows.ids)]
            theirs = [f"{u}:{len(a)}" for u, a in zip(reference["uid"], reference["attention"])]
        if mine != theirs:
            first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            raise UserError(
                f"{self._option('base')}={base}: its {split} instances differ from this run's ({len(theirs)} "
                f"vs {len(mine)}, first difference at position {first}: another dataset, filter or seed); "
                "compare runs on the same data"
            )

    def _base(self) -> Path:
        return self.other_run_dir("base", self.base)

    def analyse(self, model, data, out_dir: Path, loggers=(), step: int = 0) -> dict:
        self.base_dir = self._base()
        return super().analyse(model, data, out_dir, loggers, step)

    def begin(self, run) -> None:
        """The base run's records (``run.state``), checked to be this run's instances."""
        reference = read_reference(self.base_dir, self._option("base"))
        self._same_instances(reference, run.data, run.split, self.base_dir)
        run.state["reference"] = reference
        run.extras["base"] = str(self.base_dir)

    def measure_comparison(self, run, batch, prepared) -> None:
        """This model's attention and prediction against the base's, instance by instance (its uid's row)."""
        reference = run.state["reference"]
        _, alpha, probs = predict(run.model, batch)
        ids = batch["index"].tolist()
        base_alpha = torch.zeros_like(alpha)
        for r, index in enumerate(ids):
            values = reference["attention"].iloc[index]
            base_alpha[r, : len(values)] = torch.as_tensor(np.array(values), dtype=alpha.dtype)
        base_probs = torch.as_tensor(
            np.stack(reference["probabilities"].iloc[ids].to_numpy()), dtype=probs.dtype, device=run.device
        )
        run.tokens.add(batch, attention=alpha, base_attention=base_alpha)
        divergence, change = compare(alpha, probs, base_alpha, base_probs)
        same = (probs.argmax(-1) == base_probs.argmax(-1)).tolist()
        uids = run.split_data.uids
        for r, index in enumerate(ids):
            run.rows[index] = {
                "index": index,
                "uid": uids[index],
                "jsd": float(divergence[r]),
                "tvd": float(change[r]),
                "same_prediction": bool(same[r]),
            }

    def summarise(self, measured: Measured, tests) -> dict:
        frame = measured.frame
        out = {}
        for column in ("jsd", "tvd"):
            for stat, value in summarise(frame[column]).items():
                out[keys.wp(column, stat)] = value
        out[keys.wp("agreement")] = float(frame["same_prediction"].mean()) if len(frame) else float("nan")
        out[keys.wp("seconds", "comparison")] = measured.seconds["comparison"]
        return out
