"""The run's loggers (``cfg.logger``: W&B offline by default, CSV), the W&B login checked before anything runs, and
where they wrote, said on the console.

The W&B *history* holds what has a time axis: ``train/…`` and ``val/…`` once per epoch (``val/<family>/…`` too),
plotted against ``epoch`` (0 = the first epoch), each with its min, max and last value in the summary; anything else
Lightning logs goes to the run summary (:class:`RunLogger`; the final values: ``attn_study.tracking``)."""

from __future__ import annotations

import logging
import math
import netrc
import os
import sys
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

from attn_study import keys
from attn_study.errors import UserError
from attn_study.job.components import component

log = logging.getLogger(__name__)

#: the namespaces logged once per epoch: the history's keys (everything else is a final value)
TIMED = ("train", "val")
#: W&B's step metric of the per-epoch keys (Lightning's epoch counter: 0 = the first epoch)
EPOCH = "epoch"


def finish_wandb(exit_code: int) -> None:
    """End the active W&B run, so the next job of an in-process sweep starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=exit_code)


def check_wandb_login(node) -> None:
    """Online W&B needs a login: say so in one line, before anything runs."""
    mode = os.environ.get("WANDB_MODE") or node.get("mode") or "online"
    if mode != "online" or os.environ.get("WANDB_API_KEY"):
        return
    try:
        if netrc.netrc().authenticators("api.wandb.ai"):
            return
    except (OSError, netrc.NetrcParseError):
        pass
    raise UserError(
        "logger.wandb.mode=online needs a W&B login: run `wandb login` or set WANDB_API_KEY "
        "(or keep the default logger.wandb.mode=offline and `wandb sync` later)"
    )


def build_loggers(cfg: DictConfig, run_dir: Path, wandb_id: str | None = None) -> list:
    """The loggers of ``cfg.logger``, writing into ``run_dir``; W&B's run is ``wandb_id`` when given (resumed,
    offline too: ``wandb sync`` uploads a run's offline attempts as one run)."""
    loggers = []
    for name, node in (cfg.get("logger") or {}).items():
        if node is None:
            continue
        extra = {}
        if name == "wandb":
            check_wandb_login(node)
            extra = {"id": wandb_id, "resume": "allow"} if wandb_id else {}
            if node.get("group") is None:  # a run of its own: its group is its directory (its analyses join it)
                extra["group"] = Path(run_dir).name
        loggers.append(component(node, drop=(), option=f"logger.{name}", save_dir=str(run_dir), **extra))
        log.debug("logger %s enabled", name)
    return loggers


def describe_locations(run_dir: Path, loggers: list) -> str:
    """Where the run's results went: its ``summary.json`` and, with W&B, the offline run and how to upload it."""
    lines = [f"results:  {run_dir / 'summary.json'}"]
    for lg in loggers:
        if isinstance(lg, WandbLogger):
            wandb_dir = Path(lg.experiment.dir).parent
            lines.append(f"W&B run:  {wandb_dir}  (upload: wandb sync {wandb_dir})")
    return "\n".join(lines)


def defined(metrics: dict) -> dict:
    """``metrics`` without its undefined (non-finite) values: an epoch that cannot be chosen as the best checkpoint
    logs its ``val/acc``, ``val/f1``, ``val/auroc`` as NaN for model selection (its real values are under
    ``val/early/``); a history holds no NaN, so W&B's min and max stay numbers."""
    return {k: v for k, v in metrics.items() if not (isinstance(v, (int, float)) and not math.isfinite(v))}


class RunLogger(WandbLogger):
    """Lightning's ``WandbLogger`` whose history holds only what has a time axis (the module docstring):
    ``train/…`` and ``val/…`` go to the history at the global step, declared against ``epoch`` with their
    min, max and last in the summary, undefined values left out (:func:`defined`); anything else Lightning logs
    (``test/…``) to the run summary."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:  # Lightning passes it always; wandb warns it does nothing
            self._wandb_init.pop("anonymous", None)
        self._declared: set[str] = set()

    @rank_zero_only
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        timed = {k: v for k, v in defined(metrics).items() if k == EPOCH or keys.namespace(k) in TIMED}
        final = {k: v for k, v in metrics.items() if k not in timed}
        if final:
            self.experiment.summary.update(final)
        if not set(timed) - {EPOCH}:
            return
        run = self.experiment
        if EPOCH not in self._declared:
            run.define_metric(EPOCH, hidden=True)
            self._declared.add(EPOCH)
        for key in sorted(set(timed) - self._declared):
            run.define_metric(key, step_metric=EPOCH, summary="min,max,last")
            self._declared.add(key)
        if step is None:
            run.log(timed)
        else:  # an explicit step: rows of one epoch share it, and a resumed attempt continues the history
            run.log({**timed, "trainer/global_step": step}, step=step)


class RunCSVLogger(CSVLogger):
    """Lightning's ``CSVLogger`` whose rows hold no undefined values (:func:`defined`: an empty cell instead of
    ``nan``)."""

    @rank_zero_only
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        super().log_metrics(defined(metrics), step)
