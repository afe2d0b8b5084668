"""The test metrics of every model: one row per complete run (Jain & Wallace's Table 1 reports the BiLSTM's)."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import html_table, write_table
from attn_study.report.runs import Run, without_empty_variant


def _selection(run: Run) -> str:
    """The dev metric whose best epoch was tested (``val/acc_best``, ``val/auroc_best`` under a recipe, …)."""
    return next((k for k in run.summary if k.startswith("val/") and k.endswith("_best")), "val/acc_best")


def accuracy_table(runs: list[Run]) -> pd.DataFrame:
    """Test metrics of every complete run (Jain & Wallace's Table 1 reports the BiLSTM's)."""
    rows = [
        {
            **{k: r.config[k] for k in ("dataset", "model", "encoder", "attention", "projection", "seed")},
            "variant": r.config.get("variant", ""),
            "test n": r.summary.get("data/test_size", np.nan),
            "test/acc": r.summary.get("test/acc", np.nan),
            "test/f1": r.summary.get("test/f1", np.nan),
            "test/auroc": r.summary.get("test/auroc", np.nan),
            "selected on": _selection(r).removesuffix("_best"),
            "its best dev value": r.summary.get(_selection(r), np.nan),
            "epochs": r.summary.get("train/epochs", np.nan),
            "minutes": r.summary.get("run/seconds", np.nan) / 60,
            "attempts": r.summary.get("run/attempts", 1),
            "paper test/acc": (r.config.get("paper_accuracy") or np.nan) / 100,
        }
        for r in runs
        if r.state == "complete"
    ]
    frame = pd.DataFrame(rows)
    if not rows:
        return frame
    frame = frame.sort_values(["dataset", "model", "encoder", "attention", "projection", "variant", "seed"])
    if frame["paper test/acc"].isna().all():  # only runs of a recipe that knows the paper's accuracy have it
        frame = frame.drop(columns="paper test/acc")
    if (frame["attempts"].fillna(1) == 1).all():  # minutes of a resumed run add up its attempts (run/seconds)
        frame = frame.drop(columns="attempts")
    return without_empty_variant(frame)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    frame = accuracy_table(runs)
    if frame.empty:
        return []
    caption = (
        "Test metrics of every model (best-on-dev checkpoint) over its whole test split (test n instances); "
        "a family's table that shows an accuracy is over the instances that family analysed (its n)"
    )
    table = write_table(frame, work, "accuracy", caption)
    return [("Accuracy", f"<p>{html.escape(caption)}.</p>" + html_table(table["frame"]))]
