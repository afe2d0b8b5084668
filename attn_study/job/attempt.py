"""One attempt of a run: build its plan (``build_plan``: the data, the model, the runs it stands on, the
analyses), train (resuming from a checkpoint), test the checkpoint best on dev — the analyses run as callbacks of
that test — and publish the summary (``summary.publish``)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.plugins import TorchCheckpointIO
from lightning.pytorch.plugins.environments import SLURMEnvironment
from omegaconf import DictConfig

from attn_study import layout, tracking
from attn_study.io import atomic_open
from attn_study.job import memory, saved, state
from attn_study.job.checks import check_recipe
from attn_study.job.components import build_callbacks, component, model_seed
from attn_study.job.loggers import build_loggers, check_wandb_login
from attn_study.job.plan import Plan, build_plan, check_plan
from attn_study.job.summary import answer, finite_summary, publish, training_summary
from attn_study.models.selector import soft_token_attention
from attn_study.progress import training_bar

log = logging.getLogger(__name__)


def train_and_test(
    plan: Plan | DictConfig,
    run_dir: str | Path,
    resume_from: Path | None = None,
    details: dict | None = None,
    attempt: int = 1,
    wandb_id: str | None = None,
) -> dict:
    """Build ``plan`` (``check_plan``'s: its config checked once, there; a config given instead is checked into
    one) and train its model (continuing from
    ``resume_from``, a Lightning checkpoint, when given), test the checkpoint best on dev, analyse, write and return
    the summary. ``details``, when given, receives the class names and where the loggers wrote; ``attempt`` is this
    attempt's number; ``wandb_id`` the W&B run to log to (the run's own over its attempts; None: a new one)."""
    plan = plan if isinstance(plan, Plan) else check_plan(plan)
    cfg, run_dir = plan.cfg, Path(run_dir)
    started = time.time()
    memory.reset_peak()
    _prepare(cfg, run_dir)
    build_plan(plan, run_dir)
    module, datamodule = plan.module, plan.datamodule
    loggers = build_loggers(cfg, run_dir, wandb_id)
    labels = [str(name) for name in datamodule.data.label_names]
    for lg in loggers:
        lg.log_hyperparams(tracking.logged_config(cfg, tracking.in_multirun(), **tracking.run_metadata(labels)))
    trainer = _trainer(cfg, run_dir, loggers, plan.analyses)
    if resume_from is not None:
        print(f"resuming training from {resume_from}", flush=True)
    if details is not None:
        details["stage"] = "training"  # what fails from here on leaves a failed run to read (run.run)
    trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None)
    tested = _test(trainer, module, datamodule, run_dir)
    summary = {**training_summary(trainer, module, datamodule, tested), **plan.data_metrics}
    for analysis in plan.analyses:
        summary.update(analysis.summary)
    # this attempt's wall time and the earlier attempts' training (what they did after their last checkpoint
    # is lost with them)
    summary["run/seconds"] = time.time() - started + module.seconds_before
    summary["run/attempts"] = attempt
    summary.update(memory.peak_mib())  # this attempt's peak, analyses included
    summary, undefined = finite_summary(summary)
    summary.update(undefined=undefined, warnings=plan.warnings)
    locations = publish(summary, loggers, run_dir, trainer.global_step)
    if details is not None:
        details["labels"] = labels
        details["warnings"] = plan.warnings
        details["torch_threads"] = torch.get_num_threads()
        if plan.roar is not None:  # what the data was masked by (ROAR: attn_study/roar/)
            details["roar"] = plan.roar
    print(answer(summary), locations, sep="\n", flush=True)
    return summary


def _prepare(cfg: DictConfig, run_dir: Path) -> None:
    """The recipe's lines on what it cannot reproduce, the run's record, the W&B login, torch's threads and the
    model's seed."""
    check_recipe(cfg)  # its warnings (the plan checked it, quietly)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / layout.RECORD / layout.CONFIG).is_file():  # run() writes it; runs composed in Python need it too
        state.write_record(run_dir, cfg)
    if (cfg.get("logger") or {}).get("wandb"):
        check_wandb_login(cfg.logger.wandb)  # before the data is read, not after
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    L.seed_everything(model_seed(cfg), workers=True, verbose=False)


def _trainer(cfg: DictConfig, run_dir: Path, loggers: list, analyses: list) -> L.Trainer:
    extra = {}
    if SLURMEnvironment.detect():  # submitit requeues on time-out and we resume from last.ckpt;
        extra["plugins"] = [SLURMEnvironment(auto_requeue=False)]  # Lightning's own requeue stays off
    bar = [training_bar()] if cfg.trainer.get("enable_progress_bar", True) else []
    return component(
        cfg.trainer,
        option="trainer",
        logger=loggers or False,
        callbacks=build_callbacks(cfg, run_dir) + bar + analyses,
        default_root_dir=str(run_dir),
        plugins=[AtomicCheckpointIO(), *extra.pop("plugins", [])],
        **extra,
    )


def _test(trainer: L.Trainer, module, datamodule, run_dir: Path) -> dict:
    """Test the checkpoint best on dev (the analyses run as its callbacks); each test instance's α and ŷ
    recorded for a model with attention over tokens (what other runs compare with): all of them, those a
    test cut short (``trainer.limit_test_batches``, as ``trainer=debug``) did not see by a pass of their own."""
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint is not None else ""
    recording = soft_token_attention(module.model)
    module.test_recorder = saved.AttentionRecorder(len(datamodule.split("test"))) if recording else None
    tested = trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)[0]
    if recording:
        size = len(datamodule.split("test"))
        untested = module.test_recorder.fill(module.model, datamodule, "test")
        if untested:
            log.info(
                "%s: %d of the %d test instances were not tested (trainer.limit_test_batches): recorded by a pass "
                "of their own",
                layout.ATTENTION,
                untested,
                size,
            )
        module.test_recorder.write(datamodule.split("test"), run_dir / layout.ATTENTION)
    return tested


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temporary file and renamed into place: a run stopped mid-save keeps
    its previous ``last.ckpt`` intact, so it can always be resumed."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as handle:
            torch.save(checkpoint, handle)
