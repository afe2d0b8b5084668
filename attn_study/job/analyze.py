"""Analyse a trained run again: rebuild its data and model from the run directory, load the
checkpoint and test it with the chosen analyses as callbacks — the code path of ``attn-study``."""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from attn_study import layout, tracking
from attn_study.config import family_names
from attn_study.errors import UserError
from attn_study.families import REGISTRY
from attn_study.job import saved, stopping
from attn_study.models.selector import soft_token_attention
from attn_study.sweep.record import wandb_group


def analysis_config(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """The run's own config (resolved, so its data and model are the trained ones whatever ``cfg``
    says), with ``cfg``'s analyses; their ``seed`` is the run's unless ``cfg.seed`` is set."""
    run_cfg = saved.run_config(run_dir)
    chosen = cfg.get("analysis") or {}  # analysis=none / []: nothing chosen, refused in one line by analyze()
    analysis = OmegaConf.create(OmegaConf.to_container(chosen) if OmegaConf.is_config(chosen) else chosen)
    seed = run_cfg.seed if cfg.get("seed") is None else cfg.seed
    chosen = OmegaConf.merge({"seed": seed}, {"analysis": analysis})
    OmegaConf.resolve(chosen)  # the analyses' ${seed}
    with open_dict(run_cfg):
        run_cfg.analysis = chosen.analysis
        if cfg.device != "auto":
            run_cfg.trainer.accelerator = "cpu" if cfg.device == "cpu" else "gpu"
        if run_cfg.get("logger") and "wandb" in run_cfg.logger:  # the training run's tags and group, its own name
            run_cfg.logger.wandb.job_type = "analyze"
            when = time.strftime("%Y%m%d-%H%M%S")  # two analyses of one run are two W&B runs, named apart
            run_cfg.logger.wandb.name = f"{run_cfg.logger.wandb.name}-analyze-{family_names(chosen.analysis)}-{when}"
            if run_cfg.logger.wandb.get("group") is None:  # the training run's: its sweep's, else its directory's
                run_cfg.logger.wandb.group = wandb_group(run_dir.parent) or run_dir.name
        if run_cfg.get("logger") and "csv" in run_cfg.logger:  # training's csv/metrics.csv and earlier analyses' stay
            run_cfg.logger.csv.version = next_version(run_dir / layout.CSV, "analyze")
    return run_cfg


def next_version(folder: Path, stem: str) -> str:
    """``<stem>_<n>``, n the first of 1, 2, … that ``folder`` does not hold (each analysis logs beside the earlier
    ones, none replaced)."""
    n = 1
    while (Path(folder) / f"{stem}_{n}").exists():
        n += 1
    return f"{stem}_{n}"


def analysis_record(run_cfg: DictConfig, run_dir: Path, labels: list[str]) -> dict:
    """The config an ``attn-study-analyze`` run logs: the analysed run's (``sweep/name`` when it was a sweep
    job: its directory lies in a sweep's, as its training logged it), its class names and this code's version,
    and the link to it — ``analyze/of``, the W&B id of its training run, and ``analyze/run``, its directory's
    name."""
    from attn_study.job import state

    return tracking.logged_config(
        run_cfg,
        in_sweep=wandb_group(run_dir.parent) is not None,
        **tracking.run_metadata(labels),
        **{"analyze/of": state.read_status(run_dir).get("wandb_id", "unknown"), "analyze/run": run_dir.name},
    )


def analyze(cfg: DictConfig) -> dict:
    """Test the run at ``cfg.ckpt_path`` with ``cfg.analysis``; return the rebuilt run summary."""
    from attn_study.job import state
    from attn_study.job.checks import ensure_writable

    run_dir, ckpt = saved.locate(cfg.ckpt_path)
    force = bool(cfg.get("force"))
    saved.require_complete(run_dir, "ckpt_path", force)
    complete = state.is_complete(run_dir)
    ensure_writable(run_dir, "ckpt_path (a copy of the run directory you can write to)")
    with state.claim(run_dir) as held:  # one process at a time trains or analyses a run
        if not held:
            raise UserError(f"{run_dir} is being trained or analysed by {state.claimed_by(run_dir)}; wait for it")
        return _analyze_held(cfg, run_dir, ckpt, complete)


def _analyze_held(cfg: DictConfig, run_dir: Path, ckpt: Path, complete: bool) -> dict:
    """:func:`analyze` under the run's claim."""
    from attn_study.job.checks import out_of_space
    from attn_study.job.components import component
    from attn_study.job.loggers import build_loggers
    from attn_study.job.plan import build_plan, check_plan
    from attn_study.job.summary import answer, rebuild_summary

    run_cfg = analysis_config(cfg, run_dir)
    try:
        plan = check_plan(run_cfg)
    except UserError as err:
        if "analysis." in str(err).split(":")[0]:  # the families' options, as given here
            raise
        raise UserError(
            f"{run_dir} was made by another version of attn_study, whose config this one does not know: {err}"
        ) from None
    if not plan.analyses:
        raise UserError(f"attn-study-analyze: no analysis chosen; give analysis=[…] from {list(REGISTRY)}")
    build_plan(plan, run_dir, training=False)
    datamodule, module, analyses = plan.datamodule, plan.module, plan.analyses
    saved.load_state(module, ckpt)
    loggers = build_loggers(run_cfg, run_dir) if cfg.use_loggers else []
    for lg in loggers:
        lg.log_hyperparams(analysis_record(run_cfg, run_dir, [str(n) for n in datamodule.data.label_names]))
    trainer = component(
        run_cfg.trainer,
        option="trainer",
        logger=loggers or False,
        callbacks=analyses,
        default_root_dir=str(run_dir),
        enable_checkpointing=False,
        enable_progress_bar=False,
    )

    def stop(signal_name: str) -> None:  # what a signal leaves: a consistent record, loggers ended as stopped
        tidy(run_dir)
        tracking.finish(loggers, signal_name, 128 + int(getattr(signal, signal_name)))

    with stopping.on_stop(stop):
        try:
            trainer.test(module, datamodule=datamodule, verbose=False)
        except Exception as err:  # a family that failed: the folders it and the later ones left are the old ones
            with contextlib.suppress(OSError):  # a full disk may not take the rebuilt summary either
                tidy(run_dir)
            full = out_of_space(err, run_dir, "ckpt_path (a copy of the run directory on another disk)")
            if full is None:
                raise
            raise full from None
        # a run from before the file existed gets it — a complete one only: an unfinished run analysed with
        # force=true must not look like a base other runs can build on
        if complete and soft_token_attention(module.model) and not (run_dir / layout.ATTENTION).is_file():
            saved.write_attention(module.model, datamodule, run_dir / layout.ATTENTION)
        tracking.finish(loggers)
        summary = rebuild_summary(run_dir)
        print(answer(summary, [analysis.name for analysis in analyses]), flush=True)
        return summary


def tidy(run_dir: Path) -> None:
    """What an analysis stopped mid-way (SIGINT, SIGTERM) or failed in one of its families leaves: no half-written
    family folder (``analysis/.<family>.partial``, where a family writes before renaming it into place) and a
    ``summary.json`` with the keys of the family folders present — each family's folder and its part of the summary
    both the new results (it finished) or both the old (it did not)."""
    from attn_study.job.summary import rebuild_summary

    for partial in (Path(run_dir) / layout.ANALYSIS).glob(".*.partial"):
        shutil.rmtree(partial, ignore_errors=True)
    rebuild_summary(run_dir)
