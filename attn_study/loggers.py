"""The run's loggers (``cfg.logger``: W&B offline by default, CSV), the W&B login checked before anything runs, and
where they wrote, said on the console."""

from __future__ import annotations

import logging
import netrc
import os
import sys
from pathlib import Path

from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig

from attn_study.build import (
    component,
)
from attn_study.errors import UserError

log = logging.getLogger(__name__)


def finish_wandb(exit_code: int = 0) -> None:
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
        loggers.append(component(node, drop=(), option=f"logger.{name}", save_dir=str(run_dir), **extra))
        log.debug("logger %s enabled", name)
    return loggers


def describe_locations(run_dir: Path, loggers: list, summary: dict) -> str:
    def number(key):
        value = summary.get(key)
        return "undefined" if value is None else f"{value:.4f}"

    chosen_by = next((k for k in summary if k.startswith("val/") and k.endswith("_best")), "val/acc_best")
    lines = [
        f"test/acc {number('test/acc')}  ({chosen_by} {number(chosen_by)})",
        f"results:  {run_dir / 'summary.json'}",
    ]
    for lg in loggers:
        if isinstance(lg, WandbLogger):
            wandb_dir = Path(lg.experiment.dir).parent
            lines.append(f"W&B run:  {wandb_dir}  (upload: wandb sync {wandb_dir})")
    return "\n".join(lines)
