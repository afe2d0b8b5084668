"""Analyse a trained run again: rebuild its data and model from the run directory, load the
checkpoint and test it with the chosen analyses as callbacks — the code path of ``attn-study``."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

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


def run_config(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """The run's own config (resolved, so its data and model are the trained ones whatever ``cfg``
    says), with ``cfg``'s analyses; their ``seed`` is the run's unless ``cfg.seed`` is set."""
    run_cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    OmegaConf.resolve(run_cfg)
    analysis = OmegaConf.create(OmegaConf.to_container(cfg.get("analysis") or {}))
    seed = run_cfg.seed if cfg.get("seed") is None else cfg.seed
    chosen = OmegaConf.merge({"seed": seed}, {"analysis": analysis})
    OmegaConf.resolve(chosen)  # the analyses' ${seed}
    with open_dict(run_cfg):
        run_cfg.analysis = chosen.analysis
        if cfg.device != "auto":
            run_cfg.trainer.accelerator = "cpu" if cfg.device == "cpu" else "gpu"
        if run_cfg.get("logger") and "wandb" in run_cfg.logger:
            run_cfg.logger.wandb.job_type = "analyze"
        if run_cfg.get("logger") and "csv" in run_cfg.logger:  # training's csv/metrics.csv stays as it is
            run_cfg.logger.csv.version = "analyze"
    return run_cfg


def analyze(cfg: DictConfig) -> dict:
    """Test the run at ``cfg.ckpt_path`` with ``cfg.analysis``; return the rebuilt run summary."""
    from attn_study.build import build_analyses, build_datamodule, build_model, component
    from attn_study.run import _finish_wandb, build_loggers, rebuild_summary

    run_dir, ckpt = locate(cfg.ckpt_path)
    run_cfg = run_config(cfg, run_dir)
    datamodule = build_datamodule(run_cfg)
    datamodule.setup()
    module = build_model(run_cfg, datamodule)
    analyses = build_analyses(run_cfg)
    if not analyses:
        raise UserError("attn-study-analyze: no analysis chosen; e.g. analysis=[jain_wallace,serrano_smith]")
    for analysis in analyses:
        analysis.check(module.model, datamodule)
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    except Exception as err:  # truncated or not a checkpoint
        raise UserError(f"{ckpt}: not a readable checkpoint ({type(err).__name__}); train the run again") from None
    module.load_state_dict(state)
    loggers = build_loggers(run_cfg, run_dir) if cfg.use_loggers else []
    trainer = component(run_cfg.trainer, logger=loggers or False, callbacks=analyses, default_root_dir=str(run_dir),
                        enable_checkpointing=False, enable_progress_bar=False)
    trainer.test(module, datamodule=datamodule, verbose=False)
    for lg in loggers:
        lg.finalize("success")
    _finish_wandb()
    return rebuild_summary(run_dir)
