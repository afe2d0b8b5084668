"""Analyse a trained run again: rebuild its data and model from the run directory, load the
checkpoint, run the chosen analysis, store the results beside the training results."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attn_study.errors import UserError


def locate(ckpt_path: str) -> tuple[Path, Path]:
    """(run directory, checkpoint file) from a run directory or a checkpoint path."""
    path = Path(ckpt_path).expanduser().resolve()
    if path.is_dir():
        run_dir, ckpt = path, path / "checkpoints" / "best.ckpt"
    else:
        ckpt = path
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    if not ckpt.is_file():
        raise UserError(f"ckpt_path={ckpt_path}: no checkpoint at {ckpt}; give a run directory or its .ckpt file")
    if not (run_dir / ".hydra" / "config.yaml").is_file():
        raise UserError(f"ckpt_path={ckpt_path}: {run_dir} has no .hydra/config.yaml; give a directory made by attn-study")
    return run_dir, ckpt


def analyze(cfg: DictConfig) -> dict:
    """Run ``cfg.analysis`` on the run at ``cfg.ckpt_path``; return the merged summary."""
    from attn_study.analysis.runner import merge_summary, run_analysis
    from attn_study.build import build_datamodule, build_model
    from attn_study.run import build_loggers

    run_dir, ckpt = locate(cfg.ckpt_path)
    run_cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    run_cfg.analysis = cfg.analysis
    run_cfg.seed = cfg.seed
    if cfg.device != "auto":
        run_cfg.trainer.accelerator = "cpu" if cfg.device == "cpu" else "gpu"
    datamodule = build_datamodule(run_cfg)
    datamodule.setup()
    module = build_model(run_cfg, datamodule)
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    module.load_state_dict(state)
    loggers = []
    if cfg.use_loggers:
        if run_cfg.get("logger") and "wandb" in run_cfg.logger:
            run_cfg.logger.wandb.job_type = "analyze"
        loggers = build_loggers(run_cfg, run_dir)
    summary = run_analysis(run_cfg, module.model, datamodule, run_dir, loggers)
    for lg in loggers:
        lg.finalize("success")
    return merge_summary(run_dir, summary)
