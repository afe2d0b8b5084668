"""One run: train, select on dev, test the best checkpoint, write ``summary.json``.

Run directory contract (DESIGN.md): ``.hydra/`` (written by Hydra), ``summary.json``,
``checkpoints/``, ``csv/metrics.csv``, ``wandb/`` (offline run), ``analysis/<family>/``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf

from attn_study.analysis.runner import check_analysis, run_analysis
from attn_study.build import build_datamodule, build_model, component
from attn_study.io import write_json_atomic

log = logging.getLogger(__name__)


def flat_config(cfg: DictConfig) -> dict:
    """The resolved config as a flat ``a/b/c → value`` dict, for loggers' run tables."""
    out = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}/")
        else:
            out[prefix.rstrip("/")] = node if not isinstance(node, list) else str(node)

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def build_loggers(cfg: DictConfig, run_dir: Path) -> list:
    loggers = []
    for name, node in (cfg.get("logger") or {}).items():
        if node is None:
            continue
        loggers.append(component(node, drop=(), save_dir=str(run_dir)))
        log.debug("logger %s enabled", name)
    return loggers


def train_and_test(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Train ``cfg``'s model, test the checkpoint best on dev, write and return the summary."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_file = run_dir / ".hydra" / "config.yaml"
    if not config_file.is_file():  # Hydra's CLI writes it; runs composed in Python need it too
        config_file.parent.mkdir(exist_ok=True)
        OmegaConf.save(cfg, config_file)
    started = time.time()
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    datamodule = build_datamodule(cfg)
    datamodule.setup()
    module = build_model(cfg, datamodule)
    check_analysis(cfg, module.model)

    loggers = build_loggers(cfg, run_dir)
    for lg in loggers:
        lg.log_hyperparams(flat_config(cfg))
    checkpoint = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename="best", monitor=cfg.checkpoint.monitor,
        mode=cfg.checkpoint.mode, save_last=False, enable_version_counter=False,
    )
    callbacks = [checkpoint]
    if cfg.early_stopping.enabled:
        callbacks.append(EarlyStopping(monitor=cfg.checkpoint.monitor, mode=cfg.checkpoint.mode,
                                       patience=cfg.early_stopping.patience))
    trainer: L.Trainer = component(cfg.trainer, logger=loggers or False, callbacks=callbacks,
                                   default_root_dir=str(run_dir))
    fit_started = time.time()
    trainer.fit(module, datamodule=datamodule)
    fit_seconds = time.time() - fit_started
    tested = trainer.test(module, datamodule=datamodule, ckpt_path=checkpoint.best_model_path or None,
                          verbose=False)[0]

    stats = datamodule.data.stats
    summary = {k: float(v) for k, v in tested.items()}
    summary.update({
        "val/acc_best": float(module.val_acc_best.compute()) if module.val_acc_best.update_count else float("nan"),
        "train/epochs": trainer.current_epoch,
        "train/seconds": fit_seconds,
        "train/seconds_per_epoch": fit_seconds / max(trainer.current_epoch, 1),
        "data/vocab_size": stats["vocab_size"],
        **{f"data/{split}_size": stats[split]["kept"] for split in ("train", "dev", "test")},
    })
    summary.update(run_analysis(cfg, module.model, datamodule, run_dir, loggers))
    summary["run/seconds"] = time.time() - started
    for lg in loggers:
        lg.log_metrics({k: v for k, v in summary.items() if k.split("/")[0] in ("val", "train", "data", "run")})
        if isinstance(lg, WandbLogger):
            lg.experiment.summary.update(summary)
        lg.finalize("success")
    write_json_atomic(run_dir / "summary.json", summary)
    report_locations(run_dir, loggers, summary)
    return summary


def report_locations(run_dir: Path, loggers: list, summary: dict) -> None:
    lines = [f"test/acc {summary.get('test/acc', float('nan')):.4f}  (val/acc_best {summary['val/acc_best']:.4f})",
             f"results:  {run_dir / 'summary.json'}"]
    for lg in loggers:
        if isinstance(lg, WandbLogger):
            wandb_dir = Path(lg.experiment.dir).parent
            lines.append(f"W&B run:  {wandb_dir}  (upload: wandb sync {wandb_dir})")
    print("\n".join(lines), flush=True)
