"""Console entry points. ``attn-study``: train, test, analyse one configuration (Hydra app)."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from attn_study import stopping
from attn_study.errors import UserError

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")
log = logging.getLogger("attn_study")


def _quiet_third_party() -> None:
    # Lightning hints at srun whenever SLURM's tools are installed; jobs of hydra/launcher=slurm
    # already run under srun, anywhere else the hint is noise
    warnings.filterwarnings("ignore", message=".*The `srun` command is available.*")
    # Lightning's own pytree helper calls a torch API torch deprecated: nothing a user can change, shown per
    # fit and per test
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # the run manages <run dir>/checkpoints itself: emptied for a new attempt, kept to resume one
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .*checkpoints exists and is not empty")
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
        logging.getLogger(name).setLevel(logging.WARNING)


class WritableOutput(Callback):
    """Hydra callback (``hydra.callbacks.output_dir``): ``hydra.run.dir`` (a sweep's ``hydra.sweep.dir``) is a
    directory this process can write in, or ``<app>: error: …`` in one line and exit status 2 — before Hydra
    creates it, whose own error would be a traceback."""

    def __init__(self, app: str = "attn-study") -> None:
        self.app = app

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config.hydra.run.dir, "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config.hydra.sweep.dir, "hydra.sweep.dir")

    def _check(self, path, option: str) -> None:
        from attn_study.run import ensure_writable

        try:
            ensure_writable(Path(str(path)), option)
        except UserError as err:
            print(f"{self.app}: error: {err}", file=sys.stderr)
            sys.exit(2)


def _sweep_settings(cfg: DictConfig) -> bool:
    """In a multirun: the W&B group from the sweep record; torch threads = the cores a job has
    (cores / n_jobs under joblib, the allocated CPUs under SLURM).
    Returns whether this is a sweep job (whose failures are recorded, not raised)."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return False
    from attn_study.sweep.record import wandb_group

    with open_dict(cfg):
        wandb_cfg = cfg.get("logger", {}).get("wandb") if cfg.get("logger") else None
        if wandb_cfg is not None and wandb_cfg.get("group") is None:
            wandb_cfg.group = wandb_group(Path(hydra_cfg.sweep.dir))
        if cfg.get("threads") is None and "joblib" in str(hydra_cfg.launcher.get("_target_", "")).lower():
            n_jobs = int(hydra_cfg.launcher.get("n_jobs") or -1)
            cpus = os.cpu_count() or 1
            cfg.threads = max(1, cpus // (cpus if n_jobs < 1 else n_jobs))
        elif cfg.get("threads") is None and os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
            cfg.threads = int(os.environ["SLURM_CPUS_PER_TASK"])  # the job's CPUs, not the node's
    return True


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def train_main(cfg: DictConfig) -> float | None:
    """Train, test and (when configured) analyse; the run directory is Hydra's output dir. A
    complete run directory is skipped; inside a sweep a failure is recorded and the sweep goes on."""
    from attn_study.run import run  # heavy imports after Hydra has parsed --help etc.

    _quiet_third_party()
    stopping.install("attn-study", "launch the run again to resume it from its last checkpoint")
    in_sweep = _sweep_settings(cfg)
    hydra_cfg = HydraConfig.get()
    try:
        summary = run(
            cfg,
            hydra_cfg.runtime.output_dir,
            keep_going=in_sweep,
            overrides=list(hydra_cfg.overrides.task),
            hydra=hydra_cfg,
        )
    except UserError as err:
        print(f"attn-study: error: {err}", file=sys.stderr)
        sys.exit(2)
    return summary.get("test/acc") if summary else None


def unquoted_path_error(argv: list[str], options: tuple[str, ...]) -> str | None:
    """The one-line error for a path option whose value Hydra would misparse: a sweep's job directory
    (``dataset=sst,seed=13``) holds ``=`` and ``,`` and must be quoted."""
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name.lstrip("+~") in options and value[:1] not in "'\"" and ("=" in value or "," in value):
            return f"{name}={value}: quote a path holding '=' or ',' for Hydra: \"{name}='{value}'\""
    return None


def analyze_main() -> None:
    """``attn-study-analyze``: refuse an unquoted sweep-job path in one line, then run Hydra."""
    error = unquoted_path_error(sys.argv[1:], ("ckpt_path",))
    if error:
        print(f"attn-study-analyze: error: {error}", file=sys.stderr)
        sys.exit(2)
    _analyze()


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="analyze")
def _analyze(cfg: DictConfig) -> None:
    """Run an analysis on a saved checkpoint (``attn-study-analyze ckpt_path=... analysis=...``)."""
    from attn_study.analyze import analyze

    _quiet_third_party()
    stopping.install("attn-study-analyze", "the analyses it finished are kept; run it again for the others")
    try:
        if cfg.get("hf_model"):  # a pretrained checkpoint, not a run of this project
            from attn_study.analyze_pretrained import analyze_pretrained

            analyze_pretrained(cfg, HydraConfig.get().runtime.output_dir)
            return
        if OmegaConf.is_missing(cfg, "ckpt_path"):
            raise UserError("ckpt_path is required: attn-study-analyze ckpt_path=<run dir or its .ckpt> analysis=[...]")
        analyze(cfg)
    except UserError as err:
        print(f"attn-study-analyze: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    train_main()
