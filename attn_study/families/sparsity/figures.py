"""Sparsity (Meister et al. 2021) figures of one run: normalised entropies of attention and of each
feature importance (as their Fig 2, per instance), Kendall τ of attention with each importance (Figs
1, 3), and heatmaps of the input → intermediate gradient matrix g_{h_p}(x_i) of a few instances."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import new_figure, save_png, suptitle

from .keys import SP_CORRELATIONS, SP_DISTRIBUTIONS

#: figure key → file name
FILENAMES = {
    "entropies": "fig2_entropies.png",
    "correlations": "fig1_tau_attention_vs_importance.png",
    "input_hidden": "input_hidden_gradients.png",
}
_LABEL_TOKENS = 30  # below this many tokens the heatmap axes show the tokens


def _boxes(frame: pd.DataFrame, columns: dict[str, str], ylabel: str, what: str, title: str, ylim=None):
    data = [(label, frame[c].to_numpy(float)) for c, label in columns.items() if c in frame]
    data = [(label, v[np.isfinite(v)]) for label, v in data]
    data = [(label, v) for label, v in data if len(v)]
    if not data:
        return None
    fig = new_figure((1.7 * len(data) + 2.0, 4.4))
    ax = fig.add_subplot()
    ax.boxplot(
        [v for _, v in data],
        showmeans=True,
        showfliers=False,
        meanprops={"marker": "D", "markerfacecolor": "black", "markeredgecolor": "black", "markersize": 4},
    )
    ax.set_xticks(range(1, len(data) + 1), [f"{label}\nn={len(v)}" for label, v in data], fontsize="x-small")
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    suptitle(fig, what, title)
    return fig


def _heatmaps(examples: list[dict], title: str):
    if not examples:
        return None
    ncols = min(2, len(examples))
    nrows = math.ceil(len(examples) / ncols)
    fig = new_figure((5.2 * ncols, 4.8 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, ex in zip(axes.flat, examples):
        matrix = np.asarray(ex["matrix"], dtype=float)
        image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal")
        n = matrix.shape[0]
        if n <= _LABEL_TOKENS:
            tokens = [str(t) for t in ex["tokens"][:n]]
            ax.set_xticks(range(n), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(n), tokens, fontsize=6)
        ax.set_xlabel("input token x_i")
        ax.set_ylabel("intermediate representation h_p")
        ax.set_title(str(ex["uid"]), fontsize="small")
        fig.colorbar(image, ax=ax, shrink=0.8, label="g_{h_p}(x_i)")
    for ax in axes.flat[len(examples) :]:
        ax.set_visible(False)
    suptitle(
        fig,
        "share of each input in the gradient of ‖h_p‖ (rows sum to 1; one colour scale, 0 to 1, for all); "
        "examples: the first analysed texts of ≥ 2 tokens (the shortest), chosen by length",
        title,
    )
    return fig


def sparsity_figures(frame: pd.DataFrame, heatmaps: list[dict], out_dir: Path, title: str = "") -> dict[str, Path]:
    """Write the figures whose data ``frame`` (and ``heatmaps``: uid, tokens, matrix) has into ``out_dir``."""
    entropies = {f"entropy_{name}": name for name in SP_DISTRIBUTIONS}
    taus = {f"tau_{name}": f"α vs {other}" for name, other in SP_CORRELATIONS.items()}
    figures = {
        "entropies": _boxes(
            frame, entropies, "normalised entropy H̃", "normalised entropy per instance (Fig 2)", title, (0.0, 1.02)
        ),
        "correlations": _boxes(
            frame, taus, "Kendall τ-b", "attention vs feature importance (Figs 1, 3)", title, (-1.0, 1.0)
        ),
        "input_hidden": _heatmaps(heatmaps, title),
    }
    out_dir = Path(out_dir)
    return {key: save_png(fig, out_dir / FILENAMES[key]) for key, fig in figures.items() if fig is not None}
