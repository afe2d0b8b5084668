"""Text coloured by a per-token importance, one copy per method: the colour scale of the instance explorer
(``attn_study/report/explorer.py``, whose page draws it in the browser from :data:`SCALE`) and of the coloured
cells of a family's W&B table (:func:`coloured_text_html`), defined once here.

Each copy is shaded on its own scale: a token's shade is s_t = v_t / max_u |v_u| over the copy's finite scores
(in [−1, 1]; 0 when every score is 0), drawn as a background of opacity |s_t| in blue where v_t > 0 and orange
where v_t < 0, white text from opacity :data:`DARK` up; a missing score (NaN) is left unshaded."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import numpy as np

POSITIVE = (31, 119, 180)  # blue
NEGATIVE = (230, 97, 1)  # orange
DARK = 0.55
#: what the explorer's script colours with (the same rule as :func:`colour`)
SCALE = {"positive": POSITIVE, "negative": NEGATIVE, "dark": DARK}


def scale(values: Sequence[float]) -> float:
    """The copy's full-colour value: the largest finite |score| (0 when there is none)."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    return float(v.max()) if v.size else 0.0


def shades(values: Sequence[float]) -> np.ndarray:
    """s_t = v_t / max_u |v_u| ∈ [−1, 1] (all 0 when the largest is 0); NaN where v_t is not finite."""
    v = np.asarray(values, dtype=float)
    top = scale(v)
    out = np.where(np.isfinite(v), v / top if top > 0 else 0.0, np.nan)
    return np.clip(out, -1.0, 1.0)


def colour(shade: float) -> str:
    """The CSS background of a token of shade ``shade``: ``rgba(r, g, b, |shade|)``; transparent for NaN."""
    if not math.isfinite(shade):
        return "transparent"
    r, g, b = POSITIVE if shade >= 0 else NEGATIVE
    return f"rgba({r}, {g}, {b}, {abs(shade):.3f})"


def _number(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "n/a"


def coloured_text_html(tokens: Sequence[str], scores: Mapping[str, Sequence[float]]) -> str:
    """An HTML fragment (inline styles only: a W&B ``Html`` cell, or any page) with the text once per method of
    ``scores`` (method → a score per token of ``tokens``), each copy shaded on its own scale (the module's rule),
    its full-colour value beside the method's name and each token's score as its tooltip. All text is escaped."""
    rows = []
    for method, values in scores.items():
        values = np.asarray(values, dtype=float)
        if len(values) != len(tokens):
            raise ValueError(f"{method}: {len(values)} scores for {len(tokens)} tokens")
        spans = []
        for token, value, shade in zip(tokens, values, shades(values)):
            ink = "color: #fff; " if math.isfinite(shade) and abs(shade) > DARK else ""
            spans.append(
                f'<span style="{ink}background-color: {colour(shade)}; padding: 0 2px; border-radius: 2px" '
                f'title="{_number(value)}">{html.escape(str(token))}</span>'
            )
        rows.append(
            '<div style="margin: 0 0 6px 0; line-height: 1.6">'
            f'<div style="font: 600 12px sans-serif; color: #444">{html.escape(method)} '
            '<span style="font-weight: 400; color: #777">'
            f"(full colour: |score| = {_number(scale(values))})</span></div>" + " ".join(spans) + "</div>"
        )
    return f'<div style="font: 14px sans-serif">{"".join(rows)}</div>'
