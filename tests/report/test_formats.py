"""How the report prints each kind of number (one function per kind, ``render.FORMATS``), the papers' TeX-like
labels as HTML, and captions as sentences."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from attn_study.report.render import (
    FORMATS,
    P_NOTE,
    column_kind,
    format_duration,
    format_fraction,
    format_percent,
    format_ratio,
    html_label,
    html_page,
    html_table,
    markdown,
    sentence,
    with_p_note,
    write_table,
)

NBSP = "\u00a0"


@pytest.mark.parametrize(
    "kind, value, printed",
    [
        ("percent", 9.5, f"9.5{NBSP}%"),  # Serrano & Smith's flip cells: percent, never 9.500
        ("percent", 90.0, f"90.0{NBSP}%"),
        ("fraction", 0.25, f"25.0{NBSP}%"),  # a share of instances, never like a mean (0.250)
        ("fraction", 1.0, f"100.0{NBSP}%"),
        ("ratio", 2.0, "2.0×"),  # never 2.000
        ("ratio", math.inf, "∞"),
        ("duration", 1.2, f"1.2{NBSP}s"),  # 0.020 minutes
        ("duration", 42.4, f"42{NBSP}s"),
        ("duration", 245.0, f"4{NBSP}min 05{NBSP}s"),
        ("duration", 7380.0, f"2{NBSP}h 03{NBSP}min"),
        ("count", 10.0, "10"),
        ("number", 0.41234, "0.412"),
        ("p", 1.1e-9, "1.1e-09"),
        ("p", 0.001, "0.001"),  # 3 decimals from 0.001 up
        ("p", 9.9e-4, "9.9e-04"),
    ],
)
def test_each_kind_prints_as_a_reader_expects(kind, value, printed):
    assert FORMATS[kind](value) == printed


def test_a_missing_value_is_a_dash_in_every_kind():
    assert {FORMATS[kind](math.nan) for kind in FORMATS} == {"—"}
    assert format_percent(None) == format_fraction(pd.NA) == format_ratio(math.nan) == format_duration(None) == "—"


def test_a_table_prints_each_column_by_its_kind():
    frame = pd.DataFrame({"both flip": [9.5], "never flips": [0.25], "ratio": [2.0], "n": [3.0], "sign test p": [0.2]})
    kinds = {"both flip": "percent", "never flips": "fraction", "ratio": "ratio"}
    assert markdown(frame, kinds).splitlines()[2] == f"| 9.5{NBSP}% | 25.0{NBSP}% | 2.0× | 3 | 0.200 |"
    assert column_kind("n") == "count" and column_kind("p run means") == "p" and column_kind("mean") == "number"


@pytest.mark.parametrize(
    "text, shown",
    [
        ("Leave-One-Out (BiLSTM) τ_{loo} / Mean ± Std.", "Leave-One-Out (BiLSTM) τ<sub>loo</sub> / Mean ± Std."),
        ("IMDb / H̃(g_{h_i}(x))", "IMDb / H̃(g<sub>h<sub>i</sub></sub>(x))"),
        ("τ_g BiLSTM", "τ<sub>g</sub> BiLSTM"),
        ("τ_loo BiLSTM", "τ<sub>loo</sub> BiLSTM"),
        ("Remove i_p*: flip", "Remove i<sub>p</sub>*: flip"),
        ("x^{2} & <b>", "x<sup>2</sup> &amp; &lt;b&gt;"),
        # names with underscores are not scripts
        ("analysis.jain_wallace.every_n_epochs", "analysis.jain_wallace.every_n_epochs"),
        ("jw/tau_grad/class_0/mean", "jw/tau_grad/class_0/mean"),
        ("a_{b", "a_{b"),  # unbalanced: as it is
    ],
)
def test_the_papers_labels_show_no_tex(text, shown):
    assert html_label(text) == shown


def test_a_long_name_may_break_where_a_reader_expects():
    assert html_label("a=b,c/d_e", breaks=True) == "a=<wbr>b,<wbr>c/<wbr>d_<wbr>e"
    # a table's cells may break (a run's folder), its headers are labels as they are
    table = html_table(pd.DataFrame({"run/name": ["sst/lstm_1"]}))
    assert "<th>run/name</th>" in table and "<td>sst/<wbr>lstm_<wbr>1</td>" in table


def test_a_caption_is_one_sentence():
    assert sentence("did larger λ make the models sparser?") == "did larger λ make the models sparser?"
    assert sentence("Table 1") == "Table 1." and sentence("Done.") == "Done."


@pytest.mark.parametrize(
    "value, printed",
    [(4e-4, "< 0.001"), (-4.99e-4, "> −0.001"), (5.1e-4, "0.001"), (1e-300, "< 0.001"), (123456.7891, "123456.789")],
)
def test_a_number_is_never_in_scientific_notation(value, printed):
    """A mean too small for 3 decimals is said to be so (never 0.000, never 4.0e-04); a large one in full."""
    assert FORMATS["number"](value) == printed


def test_a_caption_says_when_its_table_shows_a_p_value_in_scientific_notation(tmp_path):
    """p-values keep their format (1.1e-09) and the caption says it — in a p column or inside a text cell; a table
    whose p-values are all 0.001 or more says nothing."""
    tiny = pd.DataFrame({"τ": [0.5], "sign test p": [1.1e-9]})
    assert with_p_note("Table 3", tiny) == "Table 3" + P_NOTE
    assert with_p_note("Table 3.", pd.DataFrame({"τ-b": ["+0.905 (p 1.2e-04)"]})) == "Table 3" + P_NOTE
    assert with_p_note("Table 3", pd.DataFrame({"sign test p": [0.002], "λ": ["1e-3"]})) == "Table 3"
    written = write_table(tiny, tmp_path, "t", "Table 3")
    assert (tmp_path / "t.md").read_text().startswith(f"**Table 3{P_NOTE}.**")
    assert written["caption"] == "Table 3" + P_NOTE


def test_a_page_leads_with_its_line_and_every_section_has_its_own_anchor():
    page = html_page("t", [("Runs", "a"), ("Jain & Wallace: τ_g", "b"), ("Runs", "c")], lead="<p class='lead'>x</p>")
    assert re.findall(r"<h2 id='([^']*)'>", page) == ["runs", "jain-wallace-g", "runs-2"]  # τ is not ASCII
    assert page.index("<p class='lead'>x</p>") < page.index("<h2")
