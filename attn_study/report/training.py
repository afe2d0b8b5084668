"""Statistics tracked while the models trained (``analysis.<family>.every_n_epochs``), across runs:
one figure per statistic, the statistic against the epoch, one line per model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attn_study import families, layout
from attn_study.figures.training import curves_figure
from attn_study.report.runs import Run


def tracked_curves(runs: list[Run], family: str) -> dict[str, pd.DataFrame]:
    """Model label → its per-epoch statistics of ``family`` (runs that tracked it)."""
    curves = {}
    for run in runs:
        path = run.path / layout.ANALYSIS / family / layout.EPOCHS_CSV
        if path.is_file():
            curves[run.name] = pd.read_csv(path)
    return curves


def training_figures(runs: list[Run], out_dir: Path) -> list[Path]:
    """For every family some run tracked: one figure per statistic of ``families.TRACKED``."""
    written = []
    for family, statistics in families.TRACKED.items():
        curves = tracked_curves(runs, family)
        for statistic in statistics if curves else ():
            stem = statistic.replace("/", "_")
            path = curves_figure(
                curves,
                statistic,
                Path(out_dir) / f"epochs_{stem}.png",
                title=f"{statistic} on the dev subsample during training",
            )
            if path is not None:
                written.append(path)
    return written
