"""Tables as Markdown, CSV and LaTeX; one self-contained HTML page (figures embedded as data URIs).

Numbers are printed one way per kind, everywhere (:data:`FORMATS`; a table names its columns' kinds, and
p-value and count columns are also known by their names): a mean, τ or entropy with 3 decimals
(:func:`format_number`; a nonzero value that would round to 0, ``< 0.001``: never scientific notation), a
percentage as ``9.5 %`` (:func:`format_percent`), a fraction of instances as a percentage too
(:func:`format_fraction`: 0.25 → ``25.0 %``), a ratio as ``2.0×`` (:func:`format_ratio`), a duration as
``4 min 05 s`` (:func:`format_duration`), a count as an integer, a p-value with 3 decimals from 0.001 up
and two significant digits below (:func:`format_p`, ``1.1e-09``: the one kind in scientific notation, and a
table that shows one says so in its caption); "—" only for a missing value (the caption says why), ±inf as
"∞"/"−∞" (LaTeX ``$\\infty$``). CSV files hold the numbers themselves. A Markdown cell keeps its table whole
whatever text it holds: ``|`` escaped, a line break as ``<br>``."""

from __future__ import annotations

import base64
import html
import io
import math
import re
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

MISSING = "—"


def _missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def format_number(value, digits: int = 3) -> str:
    """A number as the tables print it: ``digits`` decimals; ``< 0.001`` (``> −0.001``) where those would show a
    nonzero value as 0; "∞"/"−∞"; integers as integers; "—" for a missing value."""
    if _missing(value):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value != 0 and abs(value) < 0.5 * 10.0**-digits:
        smallest = f"{10.0**-digits:.{digits}f}"
        return f"< {smallest}" if value > 0 else f"> −{smallest}"
    return f"{value:.{digits}f}"


def _special(value) -> str | None:
    """What every kind prints alike: "—" for a missing value, "∞"/"−∞"; None for a finite number."""
    if _missing(value):
        return MISSING
    if isinstance(value, (int, float, np.integer, np.floating)) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return None


def format_percent(value, digits: int = 1) -> str:
    """A value already in percent: ``9.5 %`` (``digits`` decimals)."""
    return _special(value) or f"{float(value):.{digits}f}\u00a0%"


def format_fraction(value, digits: int = 1) -> str:
    """A fraction of instances (0 … 1) as a percentage: 0.25 → ``25.0 %``, so that it never reads as a mean."""
    return _special(value) or format_percent(100 * float(value), digits)


def format_ratio(value, digits: int = 1) -> str:
    """A ratio of two counts or shares: ``2.0×``."""
    return _special(value) or f"{float(value):.{digits}f}×"


def format_count(value) -> str:
    """A count as an integer (``10``, never ``10.0``)."""
    special = _special(value)
    if special:
        return special
    return str(int(value)) if float(value) % 1 == 0 else format_number(value)


def format_duration(seconds) -> str:
    """Seconds as a reader wants them: ``1.2 s`` under 10 s, ``42 s``, ``4 min 05 s``, ``2 h 03 min``."""
    special = _special(seconds)
    if special:
        return special
    seconds = float(seconds)
    if seconds < 10:
        return f"{seconds:.1f}\u00a0s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}\u00a0s"
    if whole < 3600:
        return f"{whole // 60}\u00a0min {whole % 60:02d}\u00a0s"
    minutes = round(seconds / 60)
    return f"{minutes // 60}\u00a0h {minutes % 60:02d}\u00a0min"


def format_p(p) -> str:
    """A p-value as a reader wants it: 3 decimals from 0.001 up, else two significant digits in scientific
    notation (1e-9 is not 0.000); below the smallest positive double, "< 1e-300"; missing as "—"."""
    if _missing(p) or not np.isfinite(p):
        return MISSING
    if p >= 0.001:
        return f"{p:.3f}"
    return f"{p:.1e}" if p > 1e-300 else "< 1e-300"


#: a column's kind → how its numbers are printed (text is printed as it is)
FORMATS = {
    "number": format_number,
    "percent": format_percent,
    "fraction": format_fraction,
    "ratio": format_ratio,
    "count": format_count,
    "duration": format_duration,
    "p": format_p,
}


def is_p_column(name) -> bool:
    """A column of p-values: named ``p``, ``p …``, ``… p`` or ``…_p``."""
    name = str(name)
    return name == "p" or name.startswith("p ") or name.endswith((" p", "_p")) or "p-value" in name


#: counts: printed and written as integers (a column that also holds a missing value stays integral)
_COUNT = re.compile(r"(^|[ _/(])(n|seeds|runs|pairs|epochs|attempts|instances|λ values)\)?$")


def is_count_column(name) -> bool:
    return bool(_COUNT.search(str(name)))


def with_integer_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Count columns (:func:`is_count_column`) whose values are all whole numbers as pandas' nullable
    ``Int64``: ``10``, never ``10.0``, in the CSV and the printed tables alike."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if not is_count_column(column) or not pd.api.types.is_numeric_dtype(values):
            continue
        present = values.dropna()
        if len(present) and np.isfinite(present.astype(float)).all() and (present.astype(float) % 1 == 0).all():
            out[column] = values.astype("Int64")
    return out


def column_kind(name, kinds: dict | None = None) -> str:
    """A column's kind (:data:`FORMATS`): as ``kinds`` names it, else a p-value or count column by its name, else
    ``number``."""
    if kinds and name in kinds:
        return kinds[name]
    return "p" if is_p_column(name) else "count" if is_count_column(name) else "number"


def format_value(value, kind: str = "number") -> str:
    """``value`` printed as its kind: text as it is, a bool as True/False, a number by :data:`FORMATS`."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if kind == "number" and isinstance(value, (int, np.integer)):
        return str(int(value))
    return FORMATS[kind](value)


def _cells(frame: pd.DataFrame, kinds: dict | None = None):
    """Each row of ``frame`` as printed strings, each column by its kind (:func:`column_kind`)."""
    columns = [column_kind(c, kinds) for c in frame.columns]
    for row in frame.itertuples(index=False):
        yield [format_value(v, kind) for v, kind in zip(row, columns)]


def markdown_cell(text) -> str:
    """``text`` as one Markdown table cell: ``|`` escaped, each line break (``\\n``, ``\\r``, U+2028, …) a ``<br>``, so
    no text ends its row or its cell early."""
    return "<br>".join(str(text).replace("|", "\\|").splitlines())


def markdown(frame: pd.DataFrame, kinds: dict | None = None) -> str:
    header = "| " + " | ".join(markdown_cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(markdown_cell(c) for c in cells) + " |" for cells in _cells(frame, kinds)]
    return "\n".join([header, rule, *rows]) + "\n"


_LATEX_TEXT = {
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
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "—": "---",
    "–": "--",
    "…": r"\ldots{}",
    "“": "``",
    "”": "''",
    "‘": "`",
    "’": "'",
    "\u00a0": "~",
}
_LATEX_MATH = {
    "±": r"\pm",
    "×": r"\times",
    "≤": r"\leq",
    "≥": r"\geq",
    "≠": r"\neq",
    "≈": r"\approx",
    "∝": r"\propto",
    "∞": r"\infty",
    "−": "-",
    "→": r"\rightarrow",
    "←": r"\leftarrow",
    "·": r"\cdot",
    "‖": r"\|",
    "∖": r"\setminus",
    "²": "^2",
    "³": "^3",
    "ŷ": r"\hat{y}",
    "*": "^*",
}
_GREEK_CAPITALS = {"Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega"}
_SUBSCRIPT = re.compile(r"_(\{[A-Za-z0-9_,]+\}|[A-Za-z0-9]+)")


def _math_code(ch: str) -> str | None:
    """LaTeX math for a character that needs math mode (Greek letters, ±, ≤, ∞, …), else None."""
    if ch in _LATEX_MATH:
        return _LATEX_MATH[ch]
    name = unicodedata.name(ch, "")
    for case in ("SMALL", "CAPITAL"):
        prefix = f"GREEK {case} LETTER "
        if name.startswith(prefix) and " " not in name[len(prefix) :]:
            letter = name[len(prefix) :].capitalize().replace("Lamda", "Lambda")
            if case == "SMALL":
                return "o" if letter == "Omicron" else "\\" + letter.lower()
            return "\\" + letter if letter in _GREEK_CAPITALS else "\\mathrm{" + letter[0] + "}"
    return None


def _latex_segments(text: str) -> list[tuple[bool, str]]:
    """``text`` as (is_math, LaTeX) pieces: special characters escaped, symbols in math mode, a symbol's
    subscript (``τ_g``, ``τ_{loo}``) a math subscript, a combining tilde or hat over its letter."""
    text = " ".join(unicodedata.normalize("NFC", str(text)).splitlines())  # a blank line would end the table's row
    pieces: list[tuple[bool, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        accent = {"\u0303": r"\tilde", "\u0302": r"\hat"}.get(text[i + 1] if i + 1 < len(text) else "")
        if accent:
            base = _math_code(ch) or (ch if ch.isascii() and ch.isalnum() else "?")
            pieces.append((True, f"{accent}{{{base}}}"))
            i += 2
            continue
        code = _math_code(ch)
        if code is not None:
            sub = _SUBSCRIPT.match(text, i + 1)
            if sub and not code.startswith(("^", "-")):
                inner = sub.group(1).strip("{}")
                code += "_{\\mathrm{" + inner.replace("_", r"\_") + "}}"
                i = sub.end()
            else:
                i += 1
            pieces.append((True, code))
            continue
        if ch in _LATEX_TEXT:
            pieces.append((False, _LATEX_TEXT[ch]))
        elif ch.isascii():
            pieces.append((False, ch))
        else:  # an accented letter → its base letter; anything else unknown → "?"
            plain = "".join(c for c in unicodedata.normalize("NFKD", ch) if c.isascii())
            pieces.append((False, plain or "?"))
        i += 1
    return pieces


def latex_escape(text: str) -> str:
    """``text`` as LaTeX source for a booktabs table: ASCII only, ``_ % & # $ { }`` escaped, Greek letters and
    symbols (τ, ±, ≤, ∞, …) in math mode, ``τ_g`` as :math:`\\tau_{\\mathrm{g}}`; adjacent math joined."""
    out, math_run = [], []
    for is_math, piece in _latex_segments(text):
        if is_math:
            math_run.append(piece)
            continue
        if math_run:
            out.append("$" + " ".join(math_run) + "$")
            math_run = []
        out.append(piece)
    if math_run:
        out.append("$" + " ".join(math_run) + "$")
    return "".join(out)


#: what a document needs to compile the tables this module writes
LATEX_PREAMBLE = r"\usepackage{booktabs}"


def latex(frame: pd.DataFrame, caption: str, kinds: dict | None = None) -> str:
    """A booktabs ``table`` environment (needs :data:`LATEX_PREAMBLE`); ±inf as ``$\\infty$``."""
    columns = "l" * len(frame.columns)
    lines = [
        f"% needs {LATEX_PREAMBLE}",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        " & ".join(latex_escape(str(c)) for c in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in cells) + r" \\" for cells in _cells(frame, kinds)]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


#: a p-value as :func:`format_p` prints it below 0.001
_SCIENTIFIC = re.compile(r"\d\.\de-\d+")
#: what a caption says when its table shows a p-value in scientific notation
P_NOTE = "; p-values under 0.001 in scientific notation (1.1e-09 = 1.1 × 10⁻⁹)"


def with_p_note(caption: str, frame: pd.DataFrame, kinds: dict | None = None) -> str:
    """``caption``, saying so (:data:`P_NOTE`) when a cell of ``frame`` as printed holds a p-value in scientific
    notation."""
    shown = any(_SCIENTIFIC.search(cell) for cells in _cells(frame, kinds) for cell in cells)
    return caption.rstrip().rstrip(".") + P_NOTE if shown else caption


def sentence(caption: str) -> str:
    """A caption as a sentence: a full stop added unless it ends in one (or in ? or !)."""
    caption = caption.rstrip()
    return caption if caption.endswith((".", "?", "!")) else caption + "."


def write_table(
    frame: pd.DataFrame,
    out_dir: Path,
    stem: str,
    caption: str,
    display: pd.DataFrame | None = None,
    kinds: dict | None = None,
) -> dict:
    """``<stem>.csv`` (the numbers, full precision, counts as integers), ``.md`` and ``.tex`` (``display``, or
    the frame, each column printed as its kind: :func:`column_kind`; the caption :func:`with_p_note`). Returns the
    table as shown: its stem, caption, printed frame and kinds."""
    frame = with_integer_counts(frame)
    shown = frame if display is None else with_integer_counts(display)
    caption = with_p_note(caption, shown, kinds)
    frame.to_csv(out_dir / f"{stem}.csv", index=False)
    (out_dir / f"{stem}.md").write_text(f"**{sentence(caption)}**\n\n" + markdown(shown, kinds))
    (out_dir / f"{stem}.tex").write_text(latex(shown, sentence(caption), kinds))
    return {"stem": stem, "caption": caption, "frame": shown, "kinds": kinds}


#: a table of this many columns or more is printed smaller (``table.wide``)
WIDE = 12


def html_table(frame: pd.DataFrame, kinds: dict | None = None) -> str:
    head = "".join(f"<th>{html_label(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_label(c, breaks=True)}</td>" for c in cells) + "</tr>"
        for cells in _cells(frame, kinds)
    )
    wide = " class='wide'" if len(frame.columns) >= WIDE else ""  # smaller print, so that it fits 1280 pixels
    return f"<table{wide}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: a one-letter symbol's subscript or superscript as the papers write it: ``τ_g``, ``τ_{loo}``, ``g_{h_i}``, ``x^2``;
#: the symbol starts a word (after a space, ``(`` or ``{``: not in a path or a key); a Greek letter's script may be a
#: word (``τ_loo``), a Latin letter's is one character (``i_p``, not ``every_n_epochs``)
_SCRIPT = re.compile(r"(?<![^\s({])(\w)([_^])(\{|(?<=[^\x00-\x7f][_^])[^\W_]+|\w(?!\w))")


#: where a long name (a run's folder, a key) may break across lines: after these characters
_BREAKS = re.compile(r"([,/=_])")


def html_label(text: str, breaks: bool = False) -> str:
    """``text`` as HTML, the papers' TeX-like sub- and superscripts (``τ_{loo}``, ``H̃(g_{h_i}(x))``, ``τ_g``)
    as ``<sub>``/``<sup>``: a reader never sees ``_{``. Only a one-letter symbol's script is one (``τ_g``, not
    ``every_n_epochs`` or ``class_0``). ``breaks``: a long name may break after ``, / = _`` (``<wbr>``)."""

    def escape(part: str) -> str:
        part = html.escape(part)
        return _BREAKS.sub(r"\1<wbr>", part) if breaks else part

    out, i = [], 0
    text = str(text)
    while i < len(text):
        match = _SCRIPT.search(text, i)
        if match is None:
            out.append(escape(text[i:]))
            break
        out.append(escape(text[i : match.start(2)]))
        tag = "sub" if match.group(2) == "_" else "sup"
        if match.group(3) == "{":
            end = _closing_brace(text, match.end(3))
            if end is None:  # unbalanced: printed as it is
                out.append(escape(text[match.start(2) :]))
                break
            inner, i = text[match.end(3) : end], end + 1
        else:
            inner, i = match.group(3), match.end(3)
        out.append(f"<{tag}>{html_label(inner)}</{tag}>")
    return "".join(out)


def _closing_brace(text: str, start: int) -> int | None:
    depth = 1
    for j in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return j
    return None


def embedded_png(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).name)}" src="data:image/png;base64,{data}">'


def thumbnail(path: Path, href: str, width: int = 220) -> str:
    """A link to ``href`` showing ``path`` (a PNG) shrunk to ``width`` pixels, embedded in the page."""
    from PIL import Image

    with Image.open(path) as image:
        image.thumbnail((width, width * 4))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    name = html.escape(Path(path).name)
    return (
        f"<a class='thumb' href='{html.escape(href)}' title='{name}'>"
        f'<img alt="{name}" src="data:image/png;base64,{data}"><span>{name}</span></a>'
    )


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1.5em;max-width:1240px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:12px}
th,td{border:1px solid #ccc;padding:2px 4px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f2f2f2}img{max-width:100%;margin:.5em 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2em}
table.wide{font-size:11px}table.wide th,table.wide td{padding:1px 3px}
.bad td{background:#fff0f0}.note{color:#555;font-size:13px}.mixed{color:#8a4b00}
h3{margin:1.2em 0 .2em}ul.summary{font-size:13px;padding-left:1.2em}ul.summary li{margin:.15em 0}
table.paper th{font-weight:600}
details{display:inline-block;vertical-align:top;border-radius:3px;padding:0 3px}
details summary{cursor:pointer;list-style:none}details summary::-webkit-details-marker{display:none}
details .more{white-space:normal;max-width:22em;font-size:11px;color:#333;padding:2px 0}
.v-ok{background:#d4efd4}.v-bad{background:#f6caca}.v-why{background:#fbe0b8}.v-nc{background:#e2e2e2}
.v-nv{background:#fbf1bd}.v-nr{color:#777}.legend{display:inline-block;padding:0 6px;margin-right:6px}
.thumb{display:inline-block;margin:4px;text-align:center;font-size:11px;vertical-align:top;max-width:230px}
.thumb img{display:block;border:1px solid #ddd;margin:0 auto 2px}
p.lead{font-size:15px;margin:.3em 0 .8em}h1{margin-bottom:.2em}
details.section{display:block;padding:0}details.section>summary{display:list-item;list-style:disclosure-closed inside}
details.section[open]>summary{list-style-type:disclosure-open}"""


def section_id(heading: str) -> str:
    """The anchor of a page's section (``#runs`` for "Runs"): its heading in lower-case letters, digits and ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "section"


def collapsed(summary: str, body: str) -> str:
    """``body`` closed under a line that opens it (``summary``, HTML)."""
    return f"<details class='section'><summary>{summary}</summary>{body}</details>"


def html_page(title: str, sections: list[tuple[str, str]], lead: str = "") -> str:
    """``sections``: (heading, HTML body) pairs, each heading with its :func:`section_id` (a second section of the
    same id: ``-2`` added, and so on); ``lead``: HTML shown under the title, before the first section."""
    ids: Counter = Counter()
    body = ""
    for heading, content in sections:
        ids[section_id(heading)] += 1
        n = ids[section_id(heading)]
        anchor = section_id(heading) + (f"-{n}" if n > 1 else "")
        body += f"<h2 id='{anchor}'>{html_label(heading)}</h2>\n{content}\n"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{lead}\n{body}</body></html>\n"
    )


def mean_ci(mean, low, high, digits: int = 3) -> str:
    """``0.412 [0.398, 0.427]``: a mean with its 95 % interval ("—" when the mean is missing)."""
    if _missing(mean):
        return MISSING
    if _missing(low) or _missing(high) or not (np.isfinite(low) and np.isfinite(high)):
        return format_number(mean, digits)
    return f"{format_number(mean, digits)} [{format_number(low, digits)}, {format_number(high, digits)}]"


def seed_comparison(a, b) -> dict:
    """Whether two models' per-seed values differ beyond the spread over seeds: ``beyond`` when every seed of
    one lies above every seed of the other — an exact permutation test whose p-value is 2 / C(n_a + n_b, n_a)
    (3 vs 3 seeds: 0.10; NaN when within) —, ``delta`` the difference of the means; every entry missing with
    under 2 seeds on a side."""
    a = np.asarray([v for v in a if not _missing(v) and np.isfinite(v)], dtype=float)
    b = np.asarray([v for v in b if not _missing(v) and np.isfinite(v)], dtype=float)
    if len(a) < 2 or len(b) < 2:
        return {"delta": math.nan, "beyond": None, "p": math.nan}
    beyond = bool(a.min() > b.max() or b.min() > a.max())
    p = 2 / math.comb(len(a) + len(b), len(a)) if beyond else math.nan
    return {"delta": float(a.mean() - b.mean()), "beyond": beyond, "p": p}


def seed_spread(a, b) -> str:
    """:func:`seed_comparison` as text: "Δ +0.300, beyond seed spread (p = 0.10)", "Δ …, within seed spread",
    "—" with under 2 seeds on a side."""
    c = seed_comparison(a, b)
    if c["beyond"] is None:
        return MISSING
    if c["beyond"]:
        return f"Δ {c['delta']:+.3f}, beyond seed spread (p = {c['p']:.2f})"
    return f"Δ {c['delta']:+.3f}, within seed spread"


def captioned_table(
    frame: pd.DataFrame, work: Path, stem: str, caption: str, display=None, kinds: dict | None = None
) -> str:
    """The table written as files (:func:`write_table`) and as HTML under its caption."""
    table = write_table(frame, work, stem, caption, display=display, kinds=kinds)
    return f"<p>{html_label(sentence(table['caption']))}</p>" + html_table(table["frame"], kinds)
