"""Console entry points. ``attn-study``: train, test, analyse one configuration (Hydra app)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attn_study.errors import UserError

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")
log = logging.getLogger("attn_study")


def _quiet_third_party() -> None:
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
        logging.getLogger(name).setLevel(logging.WARNING)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def train_main(cfg: DictConfig) -> float | None:
    """Train, test and (when configured) analyse; the run directory is Hydra's output dir."""
    from attn_study.run import (
        train_and_test,  # heavy imports after Hydra has parsed --help etc.
    )

    _quiet_third_party()
    try:
        summary = train_and_test(cfg, HydraConfig.get().runtime.output_dir)
    except UserError as err:
        print(f"attn-study: error: {err}", file=sys.stderr)
        sys.exit(2)
    return summary.get("test/acc")


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="analyze")
def analyze_main(cfg: DictConfig) -> None:
    """Run an analysis on a saved checkpoint (``attn-study-analyze ckpt_path=... analysis=...``)."""
    from attn_study.analyze import analyze

    _quiet_third_party()
    try:
        analyze(cfg)
    except UserError as err:
        print(f"attn-study-analyze: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    train_main()
