"""The test metrics of every model: one row per complete run (Jain & Wallace's Table 1 reports the BiLSTM's),
with its training time over every attempt, its last attempt's wall time, and the code that made it when the
runs come from several."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import captioned_table
from attn_study.report.runs import Run, code_label, code_note, without_empty_variant

#: how the columns are printed (render.FORMATS)
KINDS = {"training time": "duration", "last attempt": "duration"}


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
            "training time": r.summary.get("train/seconds", np.nan),
            "last attempt": r.finished - r.started if r.started and r.finished >= r.started else np.nan,
            "attempts": r.summary.get("run/attempts", r.attempts),
            "paper test/acc": (r.config.get("paper_accuracy") or np.nan) / 100,
            "code": code_label(r.code),
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
    if (frame["attempts"].fillna(1) == 1).all():  # no run was resumed: the last attempt is the whole run
        frame = frame.drop(columns="attempts")
    if frame["code"].nunique() == 1:  # one code version: said once, in the Runs section
        frame = frame.drop(columns="code")
    return without_empty_variant(frame)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    frame = accuracy_table(runs)
    if frame.empty:
        return []
    caption = (
        "Test metrics of every model (best-on-dev checkpoint) over its whole test split (test n instances); "
        "a family's table that shows an accuracy is over the instances that family analysed (its n). "
        "Training time: the model's training over every attempt (an attempt that was interrupted counts up to "
        "its last checkpoint, the work after it being lost); last attempt: the wall time of the attempt that "
        "finished the run, start to end, testing and analyses included"
    )
    if "attempts" in frame:
        caption += (
            "; attempts: how many times the job was started — an interrupted job resumes from its last "
            "checkpoint, so a run with 2 or more attempts took longer than its last attempt"
        )
    if "code" in frame:
        caption += "; code: the commit of the code that made the run (+ changes: with uncommitted changes)"
    note = code_note([r for r in runs if r.state == "complete"], "These models")
    return [("Accuracy", note + captioned_table(frame, work, "accuracy", caption, kinds=KINDS))]
