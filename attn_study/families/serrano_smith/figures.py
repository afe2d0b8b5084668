"""Serrano & Smith (2019) figures from the per-instance frame of their erasure tests: Fig 3 (ΔJS vs
Δα), Fig 4 (negative ΔJS by Δα), Figs 5/6/10 (fraction of items removed before a flip), Fig 11
(attention mass removed) and the single-weight flip tables (Table 2, Figs 9, 12, 13)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from attn_study.figures.common import new_figure, save_png, suptitle

from .keys import RANKING_LABELS, RANKINGS, SINGLE_TABLES, single_flip_columns

#: figure key → file name
FILENAMES = {
    "delta_js_vs_delta_alpha": "fig3_delta_js_vs_delta_alpha.png",
    "negative_delta_js": "fig4_negative_delta_js.png",
    "frac_removed": "fig5_frac_removed.png",
    "mass_removed": "fig11_mass_removed.png",
    "flip_tables": "fig9_flip_tables.png",
}


def _finite(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame | None:
    if any(c not in frame.columns for c in columns):
        return None
    sub = frame[list(columns)].apply(pd.to_numeric, errors="coerce").astype(float)
    sub = sub[np.isfinite(sub.to_numpy()).all(axis=1)]
    return None if sub.empty else sub


def delta_js_figure(frame: pd.DataFrame, title: str = ""):
    """Fig 3: ΔJS = JS(p, q_i*) − JS(p, q_r) against Δα = α_i* − α_r, one point per instance."""
    sub = _finite(frame, ["delta_alpha", "delta_js"])
    if sub is None:
        return None
    fig = new_figure((6.4, 4.4))
    ax = fig.add_subplot()
    x, y = sub["delta_alpha"].to_numpy(), sub["delta_js"].to_numpy()
    negative = y < 0
    ax.scatter(
        x[~negative],
        y[~negative],
        s=9,
        alpha=0.45,
        color="#1f77b4",
        edgecolors="none",
        label=f"ΔJS ≥ 0 ({int((~negative).sum())})",
    )
    ax.scatter(
        x[negative],
        y[negative],
        s=9,
        alpha=0.7,
        color="#d95f02",
        edgecolors="none",
        label=f"ΔJS < 0 ({int(negative.sum())})",
    )
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(r"$\Delta\alpha = \alpha_{i^*} - \alpha_r$")
    ax.set_ylabel(r"$\Delta JS = JS(p, q_{\{i^*\}}) - JS(p, q_{\{r\}})$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    suptitle(fig, f"ΔJS vs Δα, n={len(sub)} (Fig. 3)", title)
    return fig


def negative_delta_js_figure(frame: pd.DataFrame, title: str = "", bins: int = 20):
    """Fig 4: counts of the instances with ΔJS < 0, binned by Δα."""
    sub = _finite(frame, ["delta_alpha", "delta_js"])
    if sub is None:
        return None
    x = sub["delta_alpha"].to_numpy()[sub["delta_js"].to_numpy() < 0]
    fig = new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    ax.hist(np.clip(x, 0.0, 1.0), bins=np.linspace(0.0, 1.0, bins + 1), color="#d95f02", alpha=0.8, edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(r"$\Delta\alpha = \alpha_{i^*} - \alpha_r$")
    ax.set_ylabel(r"instances with $\Delta JS < 0$")
    ax.grid(alpha=0.3)
    suptitle(fig, f"negative ΔJS: {len(x)} of {len(sub)} instances (Fig. 4)", title)
    return fig


def _boxplot_figure(frame: pd.DataFrame, rankings: Sequence[str], column: str, ylabel: str, what: str, title: str):
    data, labels = [], []
    for name in rankings:
        col = f"{name}_{column}"
        if col not in frame.columns:
            continue
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(float)
        included = frame["length"].to_numpy(float) >= 2 if "length" in frame.columns else np.ones(len(values), bool)
        flipped = values[np.isfinite(values)]
        never = int(included.sum()) - len(flipped)
        data.append(flipped if len(flipped) else np.array([np.nan]))
        labels.append(f"{RANKING_LABELS.get(name, name)}\nn={len(flipped)}, never={never}")
    if not data or all(np.isnan(d).all() for d in data):
        return None
    fig = new_figure((1.9 * len(data) + 2.0, 4.4))
    ax = fig.add_subplot()
    ax.boxplot(data, whis=1.5, showfliers=True, flierprops={"markersize": 3, "alpha": 0.4})
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize="small")
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    suptitle(fig, what, title)
    return fig


def flip_tables_figure(frame: pd.DataFrame, title: str = ""):
    """Figs 9, 12, 13: the single-weight 2×2 decision-flip tables (percent of instances)."""
    panels = []
    for key, ranking in SINGLE_TABLES.items():
        sub = _finite(frame, list(single_flip_columns(key)))
        if sub is None:
            continue
        top, rnd = sub.iloc[:, 0].to_numpy() > 0.5, sub.iloc[:, 1].to_numpy() > 0.5
        table = 100.0 * np.array(
            [[np.mean(top & rnd), np.mean(top & ~rnd)], [np.mean(~top & rnd), np.mean(~top & ~rnd)]]
        )
        panels.append((ranking, table, len(sub)))
    if not panels:
        return None
    fig = new_figure((3.6 * len(panels) + 0.6, 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colors = np.array([[0.85, 0.92, 1.0], [0.55, 0.75, 1.0], [1.0, 0.75, 0.5], [0.93, 0.93, 0.93]])
    for ax, (ranking, table, n) in zip(axes, panels):
        ax.imshow(colors.reshape(2, 2, 3), aspect="equal")
        for (i, j), v in np.ndenumerate(table):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize="large")
        ax.set_xticks([0, 1], ["yes", "no"])
        ax.set_yticks([0, 1], ["yes", "no"])
        ax.set_xlabel("erase random r: decision flip?")
        ax.set_ylabel(f"erase top ({RANKING_LABELS[ranking]}): flip?")
        ax.set_title(f"i* by {RANKING_LABELS[ranking]} (n={n})", fontsize="medium")
    suptitle(fig, "single-weight decision flips, % (Table 2, Figs. 9, 12, 13)", title)
    return fig


def build_figures(frame: pd.DataFrame, rankings: Sequence[str] = RANKINGS, title: str = "") -> dict:
    """The Serrano & Smith figures as unsaved Figures keyed as :data:`FILENAMES`; a figure whose
    columns are missing or all-NaN is left out."""
    builders = {
        "delta_js_vs_delta_alpha": lambda: delta_js_figure(frame, title),
        "negative_delta_js": lambda: negative_delta_js_figure(frame, title),
        "frac_removed": lambda: _boxplot_figure(
            frame,
            rankings,
            "frac",
            "fraction of items removed at the first decision flip",
            "fraction of items removed before the decision flips (Figs. 5, 6, 10)",
            title,
        ),
        "mass_removed": lambda: _boxplot_figure(
            frame,
            rankings,
            "mass",
            "original attention mass removed at the first decision flip",
            "attention mass removed before the decision flips (Fig. 11)",
            title,
        ),
        "flip_tables": lambda: flip_tables_figure(frame, title),
    }
    figures = {}
    for key, build in builders.items():
        fig = build()
        if fig is not None:
            figures[key] = fig
    return figures


def serrano_smith_figures(
    frame: pd.DataFrame, out_dir: Path, rankings: Sequence[str] = RANKINGS, title: str = ""
) -> dict[str, Path]:
    """Write Figs 3, 4, 5 (fraction removed), 11 (mass removed) and the flip tables into ``out_dir``
    (atomically); returns ``{key: path}`` for those written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {key: save_png(fig, out_dir / FILENAMES[key]) for key, fig in build_figures(frame, rankings, title).items()}
