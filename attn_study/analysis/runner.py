"""Run the configured analysis on a trained model and store its results in the run directory.

Results go to ``analysis/<family>/`` — ``instances.parquet``, ``summary.json``, figures — written
into a hidden partial folder first and renamed into place when complete, so an interrupted
analysis never looks finished. The summary is merged into the run's ``summary.json`` and logged.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import torch
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig

from attn_study.build import component
from attn_study.io import read_json, write_json_atomic

log = logging.getLogger(__name__)


def analysis_device(cfg: DictConfig) -> torch.device:
    wants_gpu = str(cfg.trainer.get("accelerator", "auto")) in ("auto", "gpu", "cuda")
    return torch.device("cuda" if wants_gpu and torch.cuda.is_available() else "cpu")


def check_analysis(cfg: DictConfig, model) -> None:
    """Fail before training when the configured analysis cannot run on this model."""
    if cfg.analysis.get("name", "none") != "none":
        analysis = component(cfg.analysis)
        if hasattr(analysis, "check_model"):
            analysis.check_model(model)


def run_analysis(cfg: DictConfig, model, datamodule, run_dir: Path, loggers: list) -> dict:
    """Run ``cfg.analysis`` on ``model`` (frozen, eval mode); return its summary metrics."""
    if cfg.analysis.get("name", "none") == "none":
        return {}
    analysis = component(cfg.analysis)
    if hasattr(analysis, "check_model"):
        analysis.check_model(model)
    model = model.to(analysis_device(cfg)).eval().requires_grad_(False)
    root = Path(run_dir) / "analysis"
    final, partial = root / analysis.name, root / f".{analysis.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    summary, frame, artefacts = analysis.run(model, datamodule, partial)
    frame.to_parquet(partial / "instances.parquet", index=False)
    write_json_atomic(partial / "summary.json", summary)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    artefacts = {name: final / Path(path).name for name, path in artefacts.items()}
    log_analysis(loggers, analysis.prefix, summary, frame, artefacts)
    print(f"analysis:  {final}", flush=True)
    return summary


def merge_summary(run_dir: Path, summary: dict) -> dict:
    """Add ``summary`` to the run's ``summary.json`` (atomically) and return the merged dict."""
    path = Path(run_dir) / "summary.json"
    merged = {**(read_json(path) if path.is_file() else {}), **summary}
    write_json_atomic(path, merged)
    return merged


def log_analysis(loggers: list, prefix: str, summary: dict, frame, artefacts: dict) -> None:
    """Metrics to every logger; to W&B also the figures, the per-instance table and histograms."""
    for lg in loggers:
        lg.log_metrics(summary)
        if isinstance(lg, WandbLogger):
            import wandb

            payload = {f"{prefix}/figures/{name}": wandb.Image(str(path))
                       for name, path in artefacts.items() if path.suffix == ".png"}
            payload[f"{prefix}/instances"] = wandb.Table(dataframe=frame)
            for column in frame.select_dtypes("number").columns:
                values = frame[column].dropna()
                if len(values) and column not in ("index", "label", "prediction"):
                    payload[f"{prefix}/hist/{column}"] = wandb.Histogram(values.to_numpy())
            if "heatmaps" in artefacts:
                payload[f"{prefix}/heatmaps"] = wandb.Html(artefacts["heatmaps"].read_text())
            lg.experiment.log(payload)
            lg.experiment.summary.update(summary)
