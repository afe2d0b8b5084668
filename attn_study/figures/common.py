"""What every figure shares: a Figure on the Agg canvas (no pyplot state, nothing left open),
atomic PNG files with ordinary permissions, class colours and titles. A saved figure keeps every text whole:
titles and long labels are wrapped (never shortened), and the PNG takes in whatever still reaches past the figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator

from attn_study.io import atomic_open
from attn_study.stats import bootstrap_ci

DPI = 120
# the paper's colours for two classes: purple = predicted negative (0), orange = predicted positive (1)
_BINARY_COLORS = ("#7b3294", "#e66101")


def class_color(k: int, n_classes: int) -> str | tuple:
    """Colour of predicted class ``k`` (stable across figures): the paper's purple/orange for ≤ 2
    classes, else tab10 (≤ 10) or tab20."""
    if n_classes <= 2:
        return _BINARY_COLORS[k % 2]
    cmap = colormaps["tab10" if n_classes <= 10 else "tab20"]
    return cmap(k % cmap.N)


def class_name(k: int, label_names: Sequence[str]) -> str:
    return str(label_names[k]) if 0 <= k < len(label_names) else f"class {k}"


def numeric_columns(df: pd.DataFrame, needed: Sequence[str]) -> pd.DataFrame | None:
    """Numeric copy of ``prediction`` + ``needed`` with non-finite rows dropped; None when a column is
    absent or all-NaN, or no row is left."""
    cols = ["prediction", *needed]
    if any(c not in df.columns for c in cols):
        return None
    sub = df[cols].apply(pd.to_numeric, errors="coerce").astype(float)
    sub = sub[np.isfinite(sub.to_numpy()).all(axis=1)]
    if sub.empty:
        return None
    sub["prediction"] = sub["prediction"].round().astype(int)
    return sub


def n_classes(sub: pd.DataFrame, label_names: Sequence[str]) -> int:
    return max(len(label_names), int(sub["prediction"].max()) + 1, 1)


def new_figure(figsize) -> Figure:
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def fit_titles(fig: Figure) -> None:
    """Wrap every axes title and the figure's title onto lines that stay inside the figure: a title wider than the
    room either side of its centre (an axes pushed right by long tick labels) would run past the PNG's edge and be
    cut. Measured on the drawn figure; a title that fits is left as it is."""
    fig.canvas.draw()
    renderer, right = fig.canvas.get_renderer(), fig.bbox.width
    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    titles += [fig._suptitle] if fig._suptitle is not None else []
    for text in titles:
        content = text.get_text()
        if not content:
            continue
        box = text.get_window_extent(renderer)
        centre = (box.x0 + box.x1) / 2
        room = 0.96 * 2 * min(centre, right - centre) if text.get_ha() == "center" else 0.96 * (right - box.x0)
        if box.x0 >= 0 and box.x1 <= right and box.width <= room:
            continue
        longest = max(len(line) for line in content.splitlines())
        width = max(12, int(longest * room / max(box.width, 1.0)))
        text.set_text(wrap_label(" ".join(content.split()), width))


#: a tick label's or legend entry's longest line, in characters: a longer one is wrapped (:func:`wrap_labels`)
LABEL_WIDTH = 40


def wrap_labels(fig: Figure, width: int = LABEL_WIDTH) -> None:
    """Every named tick label (``set_xticks(…, labels)``) and legend entry of ``fig`` on lines of at most ``width``
    characters (:func:`wrap_label`, each line of a label apart; mathtext left as it is), all of its text kept: a
    long label (a run's variant) neither squeezes its axes to nothing nor runs past the figure's edge."""

    def wrapped(label) -> str:
        text = str(label)
        if "$" in text or all(len(line) <= width for line in text.splitlines()):
            return text
        return "\n".join(wrap_label(line, width) for line in text.splitlines())

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not isinstance(axis.get_major_locator(), FixedLocator):  # a number's ticks, short by nature
                continue
            labels = [text.get_text() for text in axis.get_majorticklabels()]
            if any(wrapped(label) != label for label in labels):
                axis.set_ticklabels([wrapped(label) for label in labels])
        legend = ax.get_legend()
        for text in legend.get_texts() if legend is not None else ():
            text.set_text(wrapped(text.get_text()))


def save_png(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (atomically), its long labels wrapped (:func:`wrap_labels`) and its
    titles inside it (:func:`fit_titles`), the PNG grown to take in any text still past the figure's edge (none is
    cut), and release its contents."""
    try:
        wrap_labels(fig)
        fit_titles(fig)
        with atomic_open(Path(path), "wb") as handle:
            fig.savefig(handle, format="png", dpi=DPI, bbox_inches="tight")
    finally:
        fig.clear()
    return Path(path)


def wrap_label(text: str, width: int = 40) -> str:
    """A legend entry, tick label or title on lines of at most ``width`` characters (broken at spaces and
    after commas), so a long label never runs past its figure."""
    import textwrap

    return "\n".join(textwrap.wrap(str(text), width, break_long_words=False, break_on_hyphens=False)) or str(text)


def suptitle(fig: Figure, what: str, title: str) -> None:
    fig.suptitle(wrap_label(f"{title} — {what}" if title else what, 100))


def column_curve(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray | None:
    """(len(columns), 3): each per-instance column's mean (NaN left out) with its 95 % bootstrap interval — the
    points of a curve over the columns; None when a column is absent."""
    if any(c not in frame for c in columns):
        return None
    return np.array(
        [
            [np.nanmean(v) if np.isfinite(v).any() else np.nan, *bootstrap_ci(v)]
            for v in (frame[c].to_numpy(float) for c in columns)
        ]
    )


def panel_rows(panels, draw, title: str, path: Path) -> Path:
    """One row of two panels per ``(row title, xs, [(y label, curves), (y label, curves)])`` of ``panels``, each
    drawn by ``draw(ax, curves, xs, y label)``; the legend on the first panel; written to ``path``."""
    fig = new_figure((12.0, 3.8 * len(panels)))
    axes = fig.subplots(len(panels), 2, squeeze=False)
    for (row_title, xs, row), pair in zip(panels, axes):
        for ax, (label, curves) in zip(pair, row):
            draw(ax, curves, xs, label)
            ax.set_title(row_title, fontsize=9)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save_png(fig, path)
