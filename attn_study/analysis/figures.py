"""Figures of Jain & Wallace (2019) from the per-instance test-battery frame, and attention heatmaps.

* :func:`jain_wallace_figures` draws, per predicted class, the paper's Fig. 2 (histogram of Kendall τ
  between attention and gradients), Fig. 6 (median output TVD under permutation vs max attention),
  Fig. 7 (histogram of ε-max JSD of adversarial attention) and Fig. 8 (ε-max JSD vs max attention).
* :func:`attention_heatmaps_html` writes one self-contained HTML page of original vs adversarial
  attention over the tokens of a few instances, like the paper's Appendix D.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas, so no pyplot state is
touched and nothing stays open; every file is written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import html
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap, to_rgba
from matplotlib.figure import Figure

__all__ = ["jain_wallace_figures", "build_figures", "attention_heatmaps_html", "FILENAMES", "class_color"]

LN2 = math.log(2.0)
DPI = 120

#: figure key → file name written by :func:`jain_wallace_figures`
FILENAMES = {
    "tau_grad_by_class": "fig2_tau_grad_by_class.png",
    "perm_tvd_vs_max_attention": "fig6_perm_median_tvd_vs_max_attention.png",
    "adv_jsd_by_class": "fig7_adv_emax_jsd_by_class.png",
    "adv_jsd_vs_max_attention": "fig8_adv_emax_jsd_vs_max_attention.png",
}

# the paper's colours for two classes: purple = predicted negative (0), orange = predicted positive (1)
_BINARY_COLORS = ("#7b3294", "#e66101")
_HIST_BINS = 40
_DENSITY_BINS = 30
# below this many points in a class panel a 2-D histogram is mostly empty bins: draw a scatter instead
_MIN_POINTS_FOR_DENSITY = 50
_PANEL_COLS = 5


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------

def class_color(k: int, n_classes: int) -> str | tuple:
    """Colour of predicted class ``k`` (stable across figures): the paper's purple/orange for ≤ 2
    classes, else tab10 (≤ 10) or tab20."""
    if n_classes <= 2:
        return _BINARY_COLORS[k % 2]
    cmap = colormaps["tab10" if n_classes <= 10 else "tab20"]
    return cmap(k % cmap.N)


def _class_name(k: int, label_names: Sequence[str]) -> str:
    return str(label_names[k]) if 0 <= k < len(label_names) else f"class {k}"


def _columns(df: pd.DataFrame, needed: Sequence[str]) -> pd.DataFrame | None:
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


def _n_classes(sub: pd.DataFrame, label_names: Sequence[str]) -> int:
    return max(len(label_names), int(sub["prediction"].max()) + 1, 1)


def new_figure(figsize) -> Figure:
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _umask() -> int:
    # read, not set-and-restore: os.umask would briefly change it for every thread of the process
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _publish(tmp: str, path: Path) -> None:
    """Give the temporary file ordinary permissions (mkstemp makes it 0600) and move it into place."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def save_png(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fig.savefig(fh, format="png", dpi=DPI)
        _publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        fig.clear()
    return path


def _write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        _publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _suptitle(fig: Figure, what: str, title: str) -> None:
    fig.suptitle(f"{title} — {what}" if title else what)


# ------------------------------------------------------------------------------------------------
# figure builders (each returns a Figure, or None when its data is missing)
# ------------------------------------------------------------------------------------------------

def _histogram_by_class(df, column, label_names, title, *, lo, hi, xlabel, what, symbol) -> Figure | None:
    sub = _columns(df, [column])
    if sub is None:
        return None
    n_classes = _n_classes(sub, label_names)
    fig = new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    bins = np.linspace(lo, hi, _HIST_BINS + 1)
    for k, group in sub.groupby("prediction", sort=True):
        values = np.clip(group[column].to_numpy(), lo, hi)
        color = class_color(int(k), n_classes)
        weights = np.full(len(values), 1.0 / len(values))  # each class sums to 1: comparable shapes
        mean = float(values.mean())
        label = f"{_class_name(int(k), label_names)} (n={len(values)}, mean {symbol}={mean:.3f})"
        ax.hist(values, bins=bins, weights=weights, color=color, alpha=0.4, histtype="stepfilled")
        ax.hist(values, bins=bins, weights=weights, color=color, histtype="step", linewidth=1.4, label=label)
        ax.axvline(mean, color=color, linestyle="--", linewidth=1.2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of instances of the predicted class")
    ax.grid(alpha=0.3)
    ax.legend(title="predicted class (dashed: mean)", fontsize="small", title_fontsize="small")
    _suptitle(fig, what, title)
    return fig


def _density_by_class(df, x_col, label_names, title, *, x_range, xlabel, what) -> Figure | None:
    sub = _columns(df, [x_col, "max_attention"])
    if sub is None:
        return None
    n_classes = _n_classes(sub, label_names)
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
        color = class_color(int(k), n_classes)
        if len(x) >= _MIN_POINTS_FOR_DENSITY:
            cmap = LinearSegmentedColormap.from_list(f"white_to_{k}", [(1, 1, 1, 1), to_rgba(color)])
            *_, image = ax.hist2d(x, y, bins=[x_bins, y_bins], cmap=cmap, cmin=1)
            fig.colorbar(image, ax=ax, label="instances", shrink=0.85)
        else:
            ax.scatter(x, y, s=22, color=color, alpha=0.6, edgecolors="none")
        ax.set_title(f"predicted {_class_name(int(k), label_names)} (n={len(x)})", fontsize="medium")
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax in axes[-1, :]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(r"max attention  $\max\,\hat{\alpha}$")
    _suptitle(fig, what, title)
    return fig


def _tvd_range(x: np.ndarray) -> tuple[float, float]:
    # TVD lies in [0, 1]; most permutation changes are tiny, so zoom to the data (at least [0, 0.05])
    return 0.0, float(min(1.0, max(0.05, 1.05 * np.max(x))))


def _jsd_range(_x: np.ndarray) -> tuple[float, float]:
    return 0.0, LN2


_BUILDERS: dict[str, Callable[[pd.DataFrame, Sequence[str], str], Figure | None]] = {
    "tau_grad_by_class": lambda df, names, title: _histogram_by_class(
        df, "tau_grad", names, title, lo=-1.0, hi=1.0, symbol="τ",
        xlabel=r"Kendall $\tau_g$ (attention vs gradient importance)",
        what="Kendall τ between attention and gradients (Fig. 2)"),
    "perm_tvd_vs_max_attention": lambda df, names, title: _density_by_class(
        df, "perm_median_tvd", names, title, x_range=_tvd_range,
        xlabel=r"median output change $\Delta\hat{y}^{med}$ (TVD)",
        what="median Δŷ under attention permutation vs max attention (Fig. 6)"),
    "adv_jsd_by_class": lambda df, names, title: _histogram_by_class(
        df, "adv_emax_jsd", names, title, lo=0.0, hi=LN2, symbol="JSD",
        xlabel=r"$\epsilon$-max JSD (adversarial vs original attention; at most ln 2)",
        what="ε-max JSD of adversarial attention (Fig. 7)"),
    "adv_jsd_vs_max_attention": lambda df, names, title: _density_by_class(
        df, "adv_emax_jsd", names, title, x_range=_jsd_range,
        xlabel=r"$\epsilon$-max JSD",
        what="ε-max JSD vs max attention (Fig. 8)"),
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


# ------------------------------------------------------------------------------------------------
# heatmaps
# ------------------------------------------------------------------------------------------------

_ORIGINAL_RGB = (31, 119, 180)     # blue
_ADVERSARIAL_RGB = (214, 39, 40)   # red

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto;
       max-width: 60em; color: #222; line-height: 1.45; }
h1 { font-size: 1.35em; }
.note { color: #555; font-size: 0.9em; }
.example { border: 1px solid #ddd; border-radius: 6px; padding: 0.8em 1em; margin: 1em 0; }
.example h2 { font-size: 1.05em; margin: 0 0 0.3em 0; font-family: monospace; }
.meta { margin: 0 0 0.6em 0; font-size: 0.95em; }
.row { margin: 0.35em 0; }
.row-label { display: inline-block; min-width: 7.5em; font-weight: 600; font-size: 0.9em; color: #444; }
.tok { padding: 0.05em 0.18em; margin: 0 0.02em; border-radius: 3px; white-space: pre-wrap; }
.tok.dark { color: #fff; }
.change { font-size: 0.95em; margin: 0.5em 0 0 0; }
.none { color: #a33; font-style: italic; }
.warn { color: #a60; font-size: 0.85em; }
"""


def _fmt(x, spec: str = ".3f") -> str:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return "n/a"
    return format(value, spec) if math.isfinite(value) else "n/a"


def _alphas(weights: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(weights as floats, shading alpha = weight / max weight ∈ [0, 1]; 0 for NaN/negative)."""
    w = np.asarray(list(weights), dtype=float)
    shade = np.where(np.isfinite(w), np.clip(w, 0.0, None), 0.0)
    top = shade.max() if shade.size else 0.0
    alpha = shade / top if top > 0 else np.zeros_like(shade)
    return w, alpha


def _token_row(name: str, tokens: Sequence[str], weights: Sequence[float], rgb: tuple[int, int, int]) -> str:
    w, alpha = _alphas(weights)
    r, g, b = rgb
    spans = []
    for tok, weight, a in zip(tokens, w, alpha):
        dark = " dark" if a > 0.55 else ""
        spans.append(f'<span class="tok{dark}" style="background-color: rgba({r}, {g}, {b}, {a:.3f})" '
                     f'title="{_fmt(weight, ".4g")}">{html.escape(str(tok))}</span>')
    return f'<div class="row"><span class="row-label">{html.escape(name)}</span> ' + " ".join(spans) + "</div>"


def _example_html(ex: dict) -> str:
    uid = html.escape(str(ex.get("uid", "")))
    tokens = [str(t) for t in ex.get("tokens", [])]
    attention = list(ex.get("attention") or [])
    adversarial = ex.get("adversarial")
    adversarial = None if adversarial is None else list(adversarial)
    lengths = [len(tokens), len(attention)] + ([] if adversarial is None else [len(adversarial)])
    n = min(lengths)
    parts = ['<section class="example">', f"<h2>{uid}</h2>",
             f'<p class="meta">gold: <b>{html.escape(str(ex.get("label", "")))}</b> &middot; '
             f'predicted: <b>{html.escape(str(ex.get("prediction", "")))}</b> '
             f'(p = {_fmt(ex.get("probability"))})</p>']
    if len(set(lengths)) > 1:
        warnings.warn(f"heatmap {ex.get('uid')!r}: {len(tokens)} tokens but {lengths[1:]} weights; "
                      f"showing the first {n}", stacklevel=3)
        parts.append(f'<p class="warn">{len(tokens)} tokens vs {", ".join(map(str, lengths[1:]))} '
                     f"weights: only the first {n} are shown</p>")
    parts.append(_token_row("Original", tokens[:n], attention[:n], _ORIGINAL_RGB))
    if adversarial is None:
        parts.append('<p class="change none">no adversary within ε</p>')
    else:
        parts.append(_token_row("Adversarial", tokens[:n], adversarial[:n], _ADVERSARIAL_RGB))
        parts.append(f'<p class="change">&Delta;&#375; (TVD from the original output): '
                     f'<b>{_fmt(ex.get("adv_tvd"))}</b> &middot; JSD(adversarial, original attention): '
                     f'<b>{_fmt(ex.get("adv_jsd"))}</b></p>')
    parts.append("</section>")
    return "\n".join(parts)


def attention_heatmaps_html(examples: list[dict], path: Path, title: str) -> Path:
    """Write one self-contained HTML page (inline CSS, no scripts, no external resources) of
    original vs adversarial attention heatmaps, like Jain & Wallace (2019) Appendix D.

    Each example has ``uid``, ``tokens``, ``label`` and ``prediction`` (class names), ``probability``
    (of the predicted class), ``attention``, ``adversarial`` (or None: "no adversary within ε"),
    ``adv_tvd`` and ``adv_jsd`` (or None). A token's background opacity is its weight over the row's
    maximum weight, its tooltip the weight. All text is HTML-escaped. If tokens and weights differ
    in length, the common prefix is shown with a visible note (and a warning). Written atomically.
    """
    path = Path(path)
    safe_title = html.escape(str(title))
    body = "\n".join(_example_html(ex) for ex in examples) if examples else '<p class="none">no examples</p>'
    doc = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{safe_title}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{safe_title}</h1>
<p class="note">Shading of each token &prop; its weight / the largest weight in that row
(<span style="color: rgb{_ORIGINAL_RGB}">blue</span>: original attention,
<span style="color: rgb{_ADVERSARIAL_RGB}">red</span>: adversarial attention); hover a token for its weight.
&Delta;&#375; is the total variation distance between the model's outputs under the two attentions.</p>
{body}
</body>
</html>
"""
    return _write_text(path, doc)
