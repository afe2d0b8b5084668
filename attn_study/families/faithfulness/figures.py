"""The faithfulness figure: comprehensiveness and sufficiency against the rationale size k, one line per
importance method (mean over instances with its 95 % bootstrap interval)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import column_curve, new_figure, save_png

from .keys import ff_fraction

PANELS = (
    ("comp", "comprehensiveness p(ŷ|x) − p(ŷ|x∖r_k)  (higher: more faithful)"),
    ("suff", "sufficiency p(ŷ|x) − p(ŷ|r_k)  (lower: more faithful)"),
)


def curve(frame: pd.DataFrame, method: str, short: str, fractions) -> np.ndarray | None:
    """(K, 3): mean, CI low, CI high of ``<method>_<short>_k…`` at each fraction; None when absent."""
    return column_curve(frame, [f"{method}_{short}_{ff_fraction(f)}" for f in fractions])


def draw_curves(ax, curves: dict[str, np.ndarray], fractions, ylabel: str) -> None:
    x = 100 * np.asarray(fractions, dtype=float)
    for method, values in curves.items():
        (line,) = ax.plot(
            x, values[:, 0], marker="o", ms=3, lw=1.4, label=method, ls=":" if method == "random" else "-"
        )
        ax.fill_between(x, values[:, 1], values[:, 2], color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_xticks(x, [f"{v:g}" for v in x])
    ax.set_xlabel("rationale size k (% of the tokens)")
    ax.set_ylabel(ylabel, fontsize=8)
    ax.axhline(0, color="grey", lw=0.8, ls="--")
    ax.grid(alpha=0.3)


def faithfulness_figure(frame: pd.DataFrame, methods, fractions, path: Path, title: str) -> Path | None:
    panels = [
        (label, {m: c for m in methods if (c := curve(frame, m, short, fractions)) is not None})
        for short, label in PANELS
    ]
    panels = [(label, curves) for label, curves in panels if curves]
    if not panels:
        return None
    fig = new_figure((6.0 * len(panels), 4.2))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (label, curves) in zip(axes, panels):
        draw_curves(ax, curves, fractions, label)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Faithfulness: {title} (mean, 95% bootstrap interval)", fontsize=10)
    return save_png(fig, path)
