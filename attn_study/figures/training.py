"""Statistics of a test family measured while the model trained, against the epoch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import new_figure, save_png

_PANEL_COLS = 2
#: the epochs as the CSVs, W&B and Lightning number them
EPOCH_LABEL = "epoch (0 = first)"


def epochs_figure(epochs: pd.DataFrame, statistics: Sequence[str], path: Path, title: str = "") -> Path | None:
    """One panel per statistic of ``statistics`` present in ``epochs`` (one row per tracked epoch, a
    column per key): the statistic against the epoch as every log numbers it (Lightning's: 0 = the first).
    None when no statistic is present."""
    present = [s for s in statistics if s in epochs and np.isfinite(epochs[s].to_numpy(float)).any()]
    if not present:
        return None
    ncols = min(_PANEL_COLS, len(present))
    nrows = math.ceil(len(present) / ncols)
    fig = new_figure((4.2 * ncols + 0.4, 3.0 * nrows + 0.6))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    x = epochs["epoch"].to_numpy(int)
    for ax, statistic in zip(axes.flat, present):
        ax.plot(x, epochs[statistic].to_numpy(float), marker="o", markersize=3)
        ax.set_title(statistic, fontsize="medium")
        ax.set_xlabel(EPOCH_LABEL)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(present) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return save_png(fig, Path(path))


def curves_figure(curves: dict[str, pd.DataFrame], statistic: str, path: Path, title: str = "") -> Path | None:
    """``statistic`` against the epoch (0 = the first), one line per model: ``curves`` maps a model's label to its
    per-epoch frame. None when no model has the statistic."""
    lines = {
        label: frame
        for label, frame in curves.items()
        if statistic in frame and np.isfinite(frame[statistic].to_numpy(float)).any()
    }
    if not lines:
        return None
    fig = new_figure((7.0, 4.2))
    ax = fig.add_subplot()
    for label, frame in sorted(lines.items()):
        ax.plot(frame["epoch"].to_numpy(int), frame[statistic].to_numpy(float), marker="o", markersize=3, label=label)
    ax.set_xlabel(EPOCH_LABEL)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel(statistic)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")
    ax.set_title(title or f"{statistic} during training", fontsize=10)
    return save_png(fig, Path(path))
