"""The agreement figure of one run: the mean Kendall τ-b of every two methods as a heatmap (symmetric, 1 on the
diagonal), each cell printed with its mean and the instances it holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import new_figure, save_png

from .keys import AG_METHODS, SHORT, pair_column


def tau_matrix(frame: pd.DataFrame, methods) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(the methods in the table's order, their mean τ matrix, the instances behind each cell): the mean over the
    instances where τ(a, b) is defined (NaN where none is), 1 on the diagonal."""
    ordered = [m for m in AG_METHODS if m in methods]
    k = len(ordered)
    means, counts = np.eye(k), np.zeros((k, k), dtype=int)
    for i, a in enumerate(ordered):
        for j, b in enumerate(ordered[i + 1 :], start=i + 1):
            values = frame[pair_column(a, b)].to_numpy(float)
            finite = values[np.isfinite(values)]
            means[i, j] = means[j, i] = finite.mean() if finite.size else np.nan
            counts[i, j] = counts[j, i] = finite.size
    return ordered, means, counts


def tau_matrix_figure(frame: pd.DataFrame, methods, path: Path, title: str) -> Path | None:
    """The heatmap of :func:`tau_matrix` (−1 blue, 0 white, 1 red); None with fewer than two methods."""
    ordered, means, counts = tau_matrix(frame, methods)
    if len(ordered) < 2:
        return None
    k = len(ordered)
    fig = new_figure((1.0 * k + 2.6, 0.85 * k + 1.6))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(means), vmin=-1.0, vmax=1.0, cmap="RdBu_r")
    labels = [SHORT[m] for m in ordered]
    ax.set_xticks(range(k), labels, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(k), labels, fontsize=8)
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            text = "—" if not np.isfinite(means[i, j]) else f"{means[i, j]:.2f}\nn={counts[i, j]}"
            dark = np.isfinite(means[i, j]) and abs(means[i, j]) > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    fig.colorbar(image, ax=ax, shrink=0.8, label="mean Kendall τ-b")
    ax.set_title(f"Agreement between methods: {title}", fontsize=10)
    return save_png(fig, path)
