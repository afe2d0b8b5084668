"""A run's ``summary.json``: the training's keys (test metrics, the selection score, epochs, seconds, data sizes),
undefined values as null with the reason, written before the loggers get it; rebuilt from the analysis folders
when an analysis runs again."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch

from attn_study import families, layout, tracking
from attn_study.io import read_json, write_json_atomic
from attn_study.job.loggers import describe_locations
from attn_study.stats import summarise


def training_summary(trainer: L.Trainer, module, datamodule, tested: dict) -> dict:
    """The test metrics, the selection score, the epochs and seconds of training, and the data's sizes."""
    checkpoint = trainer.checkpoint_callback
    stats = datamodule.data.stats
    fit_seconds = module.train_seconds  # every attempt's, when resumed
    summary = {k: float(v) for k, v in tested.items()}
    if len(np.unique(datamodule.split("test").labels)) < 2:  # torchmetrics reports 0; it is undefined
        summary["test/auroc"] = float("nan")
    summary.update(
        {
            # the score the checkpoint was chosen by: val/acc_best (a W&P adversary: val/adversary_loss_best)
            f"{checkpoint.monitor if checkpoint is not None and checkpoint.monitor else 'val/acc'}_best": (
                float(checkpoint.best_model_score)
                if checkpoint is not None and checkpoint.best_model_score is not None
                else float("nan")
            ),
            "train/epochs": trainer.current_epoch,
            "train/seconds": fit_seconds,
            "train/seconds_per_epoch": fit_seconds / max(trainer.current_epoch, 1),
            "data/vocab_size": stats["vocab_size"],
            **{f"data/{split}_size": stats[split]["kept"] for split in ("train", "dev", "test")},
        }
    )
    if module.test_conicity:  # the states' conicity per test instance: its mean with the bootstrap interval
        conicity = summarise(torch.cat(module.test_conicity))
        summary.update({f"test/conicity/{name}": conicity[name] for name in ("mean", "ci_low", "ci_high", "n")})
    return summary


def finite_summary(summary: dict) -> tuple[dict, dict]:
    """(the summary with every NaN / ±inf replaced by None — JSON has no NaN —, {key: why it is undefined})."""
    clean, undefined = {}, {}
    for key, value in summary.items():
        if isinstance(value, float) and not np.isfinite(value):
            clean[key] = None
            undefined[key] = (
                "undefined: the test split has one class"
                if key == "test/auroc"
                else "undefined: no instance where it is defined"
                if np.isnan(value)
                else f"{value}"
            )
        else:
            clean[key] = value
    return clean, undefined


def publish(summary: dict, loggers: list, run_dir: Path, step: int) -> str:
    """The summary to ``summary.json`` first, then to every logger (final values: W&B's run summary, not its
    history; ``tracking.publish_summary``; a logger's failure is one line, not the run's); the resume point
    removed. Returns where everything went, for the console."""
    write_json_atomic(run_dir / layout.SUMMARY, summary)
    tracking.publish_summary(loggers, summary, step, families.HEADLINE_KEYS)
    locations = describe_locations(run_dir, loggers)
    tracking.finish(loggers)
    Path(run_dir / layout.CHECKPOINTS / layout.LAST).unlink(missing_ok=True)  # resume point, no longer needed
    return locations


def rebuild_summary(run_dir: Path) -> dict:
    """``summary.json`` = its training keys + the summary of every analysis folder now in the run
    directory, so an analysis run again replaces its family's keys and none stay behind."""
    path = Path(run_dir) / layout.SUMMARY
    summary = {k: v for k, v in (read_json(path) if path.is_file() else {}).items() if not families.is_analysis_key(k)}
    undefined = {k: v for k, v in summary.pop("undefined", {}).items() if not families.is_analysis_key(k)}
    for family in families.FAMILIES:
        family_summary = Path(run_dir) / layout.ANALYSIS / family / layout.SUMMARY
        if family_summary.is_file():
            values = read_json(family_summary)
            summary.update(values)
            undefined.update({k: "undefined: no instance where it is defined" for k, v in values.items() if v is None})
    summary["undefined"] = undefined
    write_json_atomic(path, summary)
    return summary


def shown(value) -> str:
    """A number as the console shows it: 3 decimals, or 3 significant digits where that would print 0.000; a dash
    for an undefined value."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
        return "—"
    if isinstance(value, int):  # a count
        return f"{value}"
    return f"{value:.3f}" if abs(value) >= 0.0005 or value == 0 else f"{value:.3g}"


def answer(summary: dict, names: list[str] | None = None) -> str:
    """The result on screen, as Lightning prints its test metrics: the test accuracy, F1 and AUROC with the dev score
    the checkpoint was chosen by, then each family's headline statistics (its ``keys.py``'s ``HEADLINE_KEYS``) with
    their 95 % bootstrap interval where they have one (``…/ci_low``, ``…/ci_high`` beside ``…/mean``). ``names``:
    the families to show (default: every family ``summary`` holds keys of); '' when there is nothing to show."""
    rows = [(k, summary.get(k), None) for k in tracking.TRAINING_HEADLINE if k in summary]
    rows += [(k, summary[k], None) for k in summary if k.startswith("val/") and k.endswith("_best")]
    for name, family in families.REGISTRY.items():
        if (names is not None and name not in names) or not any(k.startswith(f"{family.namespace}/") for k in summary):
            continue
        for k in family.headline:
            if k in summary:
                stem = k.removesuffix("/mean")
                interval = (
                    (summary.get(f"{stem}/ci_low"), summary.get(f"{stem}/ci_high")) if k.endswith("/mean") else None
                )
                rows.append((k, summary[k], interval))
    if not rows:
        return ""
    width = max(len(k) for k, _, _ in rows)
    lines = [f"  {'result'.ljust(width)}  {'value':>7}   95% interval"]
    for k, value, interval in rows:
        band = f"[{shown(interval[0])}, {shown(interval[1])}]" if interval and None not in interval else ""
        lines.append(f"  {k.ljust(width)}  {shown(value):>7}   {band}".rstrip())
    return "\n".join(lines)
