"""Jain & Wallace (2019) figures from the per-instance frame of their test battery.

Per predicted class: Fig. 2 (histogram of Kendall τ between attention and gradients), Fig. 6 (median
output TVD under permutation vs max attention), Fig. 7 (histogram of ε-max JSD of adversarial
attention) and Fig. 8 (ε-max JSD vs max attention).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap, to_rgba
from matplotlib.figure import Figure

from attn_study.figures.common import (
    class_color,
    class_name,
    n_classes,
    new_figure,
    numeric_columns,
    save_png,
    suptitle,
)

LN2 = math.log(2.0)

#: figure key → file name written by :func:`jain_wallace_figures`
FILENAMES = {
    "tau_grad_by_class": "fig2_tau_grad_by_class.png",
    "perm_tvd_vs_max_attention": "fig6_perm_median_tvd_vs_max_attention.png",
    "adv_jsd_by_class": "fig7_adv_emax_jsd_by_class.png",
    "adv_jsd_vs_max_attention": "fig8_adv_emax_jsd_vs_max_attention.png",
}

_HIST_BINS = 40
_DENSITY_BINS = 30
# below this many points in a class panel a 2-D histogram is mostly empty bins: draw a scatter instead
_MIN_POINTS_FOR_DENSITY = 50
_PANEL_COLS = 5


def _histogram_by_class(df, column, label_names, title, *, lo, hi, xlabel, what, symbol) -> Figure | None:
    sub = numeric_columns(df, [column])
    if sub is None:
        return None
    n_cls = n_classes(sub, label_names)
    fig = new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    bins = np.linspace(lo, hi, _HIST_BINS + 1)
    for k, group in sub.groupby("prediction", sort=True):
        values = np.clip(group[column].to_numpy(), lo, hi)
        color = class_color(int(k), n_cls)
        weights = np.full(len(values), 1.0 / len(values))  # each class sums to 1: comparable shapes
        mean = float(values.mean())
        label = f"{class_name(int(k), label_names)} (n={len(values)}, mean {symbol}={mean:.3f})"
        ax.hist(values, bins=bins, weights=weights, color=color, alpha=0.4, histtype="stepfilled")
        ax.hist(values, bins=bins, weights=weights, color=color, histtype="step", linewidth=1.4, label=label)
        ax.axvline(mean, color=color, linestyle="--", linewidth=1.2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of instances of the predicted class")
    ax.grid(alpha=0.3)
    ax.legend(title="predicted class (dashed: mean)", fontsize="small", title_fontsize="small")
    suptitle(fig, what, title)
    return fig


def _density_by_class(df, x_col, label_names, title, *, x_range, xlabel, what) -> Figure | None:
    sub = numeric_columns(df, [x_col, "max_attention"])
    if sub is None:
        return None
    n_cls = n_classes(sub, label_names)
    groups = list(sub.groupby("prediction", sort=True))
    ncols = min(len(groups), _PANEL_COLS)
    nrows = math.ceil(len(groups) / ncols)
    fig = new_figure((3.3 * ncols + 0.8, 3.1 * nrows + 0.7))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    x_lo, x_hi = x_range(sub[x_col].to_numpy())
    x_bins = np.linspace(x_lo, x_hi, _DENSITY_BINS + 1)
    y_bins = np.linspace(0.0, 1.0, _DENSITY_BINS + 1)
    for ax, (k, group) in zip(axes.flat, groups):
        x = np.clip(group[x_col].to_numpy(), x_lo, x_hi)
        y = np.clip(group["max_attention"].to_numpy(), 0.0, 1.0)
        color = class_color(int(k), n_cls)
        if len(x) >= _MIN_POINTS_FOR_DENSITY:
            cmap = LinearSegmentedColormap.from_list(f"white_to_{k}", [(1, 1, 1, 1), to_rgba(color)])
            *_, image = ax.hist2d(x, y, bins=[x_bins, y_bins], cmap=cmap, cmin=1)
            fig.colorbar(image, ax=ax, label="instances", shrink=0.85)
        else:
            ax.scatter(x, y, s=22, color=color, alpha=0.6, edgecolors="none")
        ax.set_title(f"predicted {class_name(int(k), label_names)} (n={len(x)})", fontsize="medium")
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax in axes[-1, :]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(r"max attention  $\max\,\hat{\alpha}$")
    suptitle(fig, what, title)
    return fig


def _tvd_range(x: np.ndarray) -> tuple[float, float]:
    # TVD lies in [0, 1]; most permutation changes are tiny, so zoom to the data (at least [0, 0.05])
    return 0.0, float(min(1.0, max(0.05, 1.05 * np.max(x))))


def _jsd_range(_x: np.ndarray) -> tuple[float, float]:
    return 0.0, LN2


_BUILDERS: dict[str, Callable[[pd.DataFrame, Sequence[str], str], Figure | None]] = {
    "tau_grad_by_class": lambda df, names, title: _histogram_by_class(
        df,
        "tau_grad",
        names,
        title,
        lo=-1.0,
        hi=1.0,
        symbol="τ",
        xlabel=r"Kendall $\tau_g$ (attention vs gradient importance)",
        what="Kendall τ between attention and gradients (Fig. 2)",
    ),
    "perm_tvd_vs_max_attention": lambda df, names, title: _density_by_class(
        df,
        "perm_median_tvd",
        names,
        title,
        x_range=_tvd_range,
        xlabel=r"median output change $\Delta\hat{y}^{med}$ (TVD)",
        what="median Δŷ under attention permutation vs max attention (Fig. 6)",
    ),
    "adv_jsd_by_class": lambda df, names, title: _histogram_by_class(
        df,
        "adv_emax_jsd",
        names,
        title,
        lo=0.0,
        hi=LN2,
        symbol="JSD",
        xlabel=r"$\epsilon$-max JSD (adversarial vs original attention; at most ln 2)",
        what="ε-max JSD of adversarial attention (Fig. 7)",
    ),
    "adv_jsd_vs_max_attention": lambda df, names, title: _density_by_class(
        df,
        "adv_emax_jsd",
        names,
        title,
        x_range=_jsd_range,
        xlabel=r"$\epsilon$-max JSD",
        what="ε-max JSD vs max attention (Fig. 8)",
    ),
}


def build_figures(df: pd.DataFrame, label_names: Sequence[str], title: str = "") -> dict[str, Figure]:
    """The Jain & Wallace figures as unsaved :class:`Figure` objects, keyed as in :data:`FILENAMES`;
    a figure whose columns are missing or all-NaN is left out."""
    figures = {}
    for key, build in _BUILDERS.items():
        fig = build(df, list(label_names), title)
        if fig is not None:
            figures[key] = fig
    return figures


def jain_wallace_figures(df: pd.DataFrame, out_dir: Path, label_names: list[str], title: str = "") -> dict[str, Path]:
    """Write Figs. 2, 6, 7, 8 of Jain & Wallace (2019) for one test battery into ``out_dir``.

    ``df`` has one row per instance with ``prediction`` (predicted class id), ``max_attention``,
    ``tau_grad``, ``perm_median_tvd`` and ``adv_emax_jsd``; colours and panels are per predicted
    class. Rows with NaN in a figure's columns are dropped for that figure; a figure whose columns
    are absent or all-NaN is skipped. Returns ``{key: path}`` for the figures written (keys and
    file names in :data:`FILENAMES`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {key: save_png(fig, out_dir / FILENAMES[key]) for key, fig in build_figures(df, label_names, title).items()}
