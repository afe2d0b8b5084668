"""Attention heatmaps: one self-contained HTML page of original vs adversarial attention over the
tokens of a few instances, like Jain & Wallace (2019) Appendix D. Every row of a page is shaded on one
scale (opacity = weight / the largest weight on the page), so rows can be compared: a near-uniform attention
is pale, a peaked one dark."""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attn_study.io import write_text_atomic

_ORIGINAL_RGB = (31, 119, 180)  # blue
_ADVERSARIAL_RGB = (214, 39, 40)  # red

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


def _weights(weights: Sequence[float]) -> np.ndarray:
    return np.asarray(list(weights), dtype=float)


def _shade(w: np.ndarray, top: float) -> np.ndarray:
    """Opacity ∈ [0, 1] of each weight on the page's scale: weight / ``top`` (0 for NaN or negative)."""
    shade = np.where(np.isfinite(w), np.clip(w, 0.0, None), 0.0)
    return np.clip(shade / top, 0.0, 1.0) if top > 0 else np.zeros_like(shade)


def _token_row(
    name: str, tokens: Sequence[str], weights: Sequence[float], rgb: tuple[int, int, int], top: float
) -> str:
    w = _weights(weights)
    alpha = _shade(w, top)
    r, g, b = rgb
    spans = []
    for tok, weight, a in zip(tokens, w, alpha):
        dark = " dark" if a > 0.55 else ""
        spans.append(
            f'<span class="tok{dark}" style="background-color: rgba({r}, {g}, {b}, {a:.3f})" '
            f'title="{_fmt(weight, ".4g")}">{html.escape(str(tok))}</span>'
        )
    return f'<div class="row"><span class="row-label">{html.escape(name)}</span> ' + " ".join(spans) + "</div>"


def page_scale(examples: list[dict]) -> float:
    """The largest finite weight of any row on the page (original or adversarial): full colour."""
    rows = [ex.get("attention") or [] for ex in examples] + [ex.get("adversarial") or [] for ex in examples]
    values = np.concatenate([_weights(r) for r in rows]) if rows else np.array([])
    values = values[np.isfinite(values)]
    return float(values.max()) if values.size else 0.0


def _example_html(ex: dict, top: float) -> str:
    uid = html.escape(str(ex.get("uid", "")))
    tokens = [str(t) for t in ex.get("tokens", [])]
    attention = list(ex.get("attention") or [])
    adversarial = ex.get("adversarial")
    adversarial = None if adversarial is None else list(adversarial)
    lengths = [len(tokens), len(attention)] + ([] if adversarial is None else [len(adversarial)])
    n = min(lengths)
    parts = [
        '<section class="example">',
        f"<h2>{uid}</h2>",
        f'<p class="meta">gold: <b>{html.escape(str(ex.get("label", "")))}</b> &middot; '
        f"predicted: <b>{html.escape(str(ex.get('prediction', '')))}</b> "
        f"(p = {_fmt(ex.get('probability'))})</p>",
    ]
    if len(set(lengths)) > 1:
        warnings.warn(
            f"heatmap {ex.get('uid')!r}: {len(tokens)} tokens but {lengths[1:]} weights; showing the first {n}",
            stacklevel=3,
        )
        parts.append(
            f'<p class="warn">{len(tokens)} tokens vs {", ".join(map(str, lengths[1:]))} '
            f"weights: only the first {n} are shown</p>"
        )
    parts.append(_token_row("Original", tokens[:n], attention[:n], _ORIGINAL_RGB, top))
    if adversarial is None:
        parts.append('<p class="change none">no adversary within ε</p>')
    else:
        parts.append(_token_row("Adversarial", tokens[:n], adversarial[:n], _ADVERSARIAL_RGB, top))
        parts.append(
            f'<p class="change">&Delta;&#375; (TVD from the original output): '
            f"<b>{_fmt(ex.get('adv_tvd'))}</b> &middot; JSD(adversarial, original attention): "
            f"<b>{_fmt(ex.get('adv_jsd'))}</b></p>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _scale_bar(top: float) -> str:
    """The page's colour scale: swatches at 0, ¼, ½, ¾ and 1 of the largest weight, with their values."""
    r, g, b = _ORIGINAL_RGB
    swatches = "".join(
        f'<span class="tok{" dark" if f > 0.55 else ""}" style="background-color: rgba({r}, {g}, {b}, {f:.2f})">'
        f"{_fmt(f * top, '.3g')}</span> "
        for f in (0.0, 0.25, 0.5, 0.75, 1.0)
    )
    return f'<p class="note">Scale (attention weight): {swatches}</p>'


def attention_heatmaps_html(examples: list[dict], path: Path, title: str, chosen: str | None = None) -> Path:
    """Write one self-contained HTML page (inline CSS, no scripts, no external resources) of
    original vs adversarial attention heatmaps, like Jain & Wallace (2019) Appendix D.

    Each example has ``uid``, ``tokens``, ``label`` and ``prediction`` (class names), ``probability``
    (of the predicted class), ``attention``, ``adversarial`` (or None: "no adversary within ε"),
    ``adv_tvd`` and ``adv_jsd`` (or None). ``chosen`` says how the examples were picked (printed under the
    title). A token's background opacity is its weight over the largest weight on the page — one scale for
    every row, drawn at the top —, its tooltip the weight. All text is HTML-escaped. If tokens and weights
    differ in length, the common prefix is shown with a visible note (and a warning). Written atomically.
    """
    path = Path(path)
    safe_title = html.escape(str(title))
    top = page_scale(examples)
    body = "\n".join(_example_html(ex, top) for ex in examples) if examples else '<p class="none">no examples</p>'
    how = f'<p class="note">Examples: {html.escape(chosen)}.</p>' if chosen else ""
    doc = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{safe_title}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{safe_title}</h1>
{how}
<p class="note">Shading of each token &prop; its weight, on one scale for every row of this page: full colour at
the largest weight shown here ({_fmt(top, ".3g")}), so rows compare directly and a near-uniform attention is pale
(<span style="color: rgb{_ORIGINAL_RGB}">blue</span>: original attention,
<span style="color: rgb{_ADVERSARIAL_RGB}">red</span>: adversarial attention); hover a token for its weight.
&Delta;&#375; is the total variation distance between the model's outputs under the two attentions.</p>
{_scale_bar(top)}
{body}
</body>
</html>
"""
    return write_text_atomic(path, doc)
