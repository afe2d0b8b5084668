"""Tables as Markdown, CSV and LaTeX; one self-contained HTML page (figures embedded as data URIs)."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

import numpy as np
import pandas as pd


def _cell(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_p(p) -> str:
    """A p-value as a reader wants it: 3 decimals from 0.001 up, else two significant digits in scientific
    notation (1e-9 is not 0.000); below the smallest positive double, "< 1e-300"; NaN as "—"."""
    if p is None or not np.isfinite(p):
        return "—"
    if p >= 0.001:
        return f"{p:.3f}"
    return f"{p:.1e}" if p > 1e-300 else "< 1e-300"


def markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(_cell(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "τ": r"$\tau$",
    "×": r"$\times$",
    "—": "--",
    "*": r"$^*$",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex(frame: pd.DataFrame, caption: str) -> str:
    """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``)."""
    columns = "l" * len(frame.columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        " & ".join(latex_escape(str(c)) for c in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(_cell(v)) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(
    frame: pd.DataFrame, out_dir: Path, stem: str, caption: str, display: pd.DataFrame | None = None
) -> dict:
    """``<stem>.csv`` (the numbers, full precision), ``.md`` and ``.tex`` (``display``, or the frame)."""
    shown = frame if display is None else display
    frame.to_csv(out_dir / f"{stem}.csv", index=False)
    (out_dir / f"{stem}.md").write_text(f"**{caption}**\n\n" + markdown(shown))
    (out_dir / f"{stem}.tex").write_text(latex(shown, caption))
    return {"stem": stem, "caption": caption, "frame": shown}


def html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def embedded_png(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).name)}" src="data:image/png;base64,{data}">'


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}
th{background:#f2f2f2}img{max-width:100%;margin:.5em 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2em}
.bad td{background:#fff0f0}.note{color:#555;font-size:13px}"""


def html_page(title: str, sections: list[tuple[str, str]]) -> str:
    """``sections``: (heading, HTML body) pairs."""
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{content}\n" for h, content in sections)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n"
    )


def mean_ci(mean, low, high, digits: int = 3) -> str:
    """``0.412 [0.398, 0.427]``: a mean with its 95 % interval ("—" when the mean is missing)."""
    if mean is None or not np.isfinite(mean):
        return "—"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def seed_spread(a, b) -> str:
    """Whether two models' per-seed values differ beyond the spread over seeds: "beyond" when every
    seed of one lies above every seed of the other — an exact permutation test whose p-value
    2 / C(n_a + n_b, n_a) is printed (3 vs 3 seeds: 0.10) — else "within"; "—" with under 2 seeds each."""
    a = np.asarray([v for v in a if v is not None and np.isfinite(v)], dtype=float)
    b = np.asarray([v for v in b if v is not None and np.isfinite(v)], dtype=float)
    if len(a) < 2 or len(b) < 2:
        return "—"
    delta = a.mean() - b.mean()
    if a.min() > b.max() or b.min() > a.max():
        p = 2 / math.comb(len(a) + len(b), len(a))
        return f"Δ {delta:+.3f}, beyond seed spread (p = {p:.2f})"
    return f"Δ {delta:+.3f}, within seed spread"


def captioned_table(frame: pd.DataFrame, work: Path, stem: str, caption: str, display=None) -> str:
    """The table written as files (:func:`write_table`) and as HTML under its caption."""
    table = write_table(frame, work, stem, caption, display=display)
    return f"<p>{html.escape(caption)}.</p>" + html_table(table["frame"])
