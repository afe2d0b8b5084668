"""The sanity-check figure: rank correlation of each method's explanation with the trained model's against the
randomisation stage (cumulative, from the top), one line per method, mean with its 95 % bootstrap interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import column_curve, new_figure, save_png

from .keys import HEADLINE, STATISTICS

PANELS = HEADLINE  # |ρ| and |ρ| of |scores| (the signed ρ: sn/<method>/<stage>/spearman/… and the instances' file)


def stage_labels(stages) -> list[str]:
    """x tick labels: the trained model, then each stage with a + for the cumulative cascade."""
    return ["trained"] + [("+" if j else "") + s for j, s in enumerate(stages)]


def draw_cascade(ax, curves: dict[str, np.ndarray], stages, ylabel: str) -> None:
    """``curves``: method → (len(stages), 3) mean, CI low, CI high; the trained model is drawn at 1."""
    x = np.arange(len(stages) + 1)
    for method, values in curves.items():
        y = np.concatenate([[1.0], values[:, 0]])
        (line,) = ax.plot(x, y, marker="o", ms=3, lw=1.4, label=method, ls=":" if method == "random" else "-")
        ax.fill_between(x[1:], values[:, 1], values[:, 2], color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xticks(x, stage_labels(stages), fontsize=7)
    ax.set_xlabel("parameters re-initialised (cumulative, from the top)")
    ax.set_ylabel(ylabel, fontsize=8)
    signed = any(np.nanmin(values) < 0 for values in curves.values() if np.isfinite(values).any())
    ax.set_ylim(-1.05 if signed else -0.05, 1.05)  # a magnitude lies in [0, 1]
    ax.axhline(0, color="grey", lw=0.8, ls="--")
    ax.grid(alpha=0.3)


def stage_curve(frame: pd.DataFrame, method: str, stages, suffix: str) -> np.ndarray | None:
    return column_curve(frame, [f"{method}_{stage}_{suffix}" for stage in stages])


def sanity_figure(frame: pd.DataFrame, methods, stages, path: Path, title: str) -> Path | None:
    panels = [
        (STATISTICS[suffix][1], {m: c for m in methods if (c := stage_curve(frame, m, stages, suffix)) is not None})
        for suffix in PANELS
    ]
    panels = [(label, curves) for label, curves in panels if curves]
    if not panels:
        return None
    fig = new_figure((6.0 * len(panels), 4.2))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (label, curves) in zip(axes, panels):
        draw_cascade(ax, curves, stages, f"{label} with the trained model's explanation")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Cascading randomisation: {title} (mean, 95% bootstrap interval)", fontsize=10)
    return save_png(fig, path)
