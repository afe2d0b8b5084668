"""The report's LaTeX tables compile: every ``.tex`` a report writes, inside a minimal document
(``\\documentclass{article}`` + ``render.LATEX_PREAMBLE``), with pdflatex when it is on PATH (CI installs
``texlive-latex-base``/``-recommended``: .ci/run); the source checks (ASCII only, escaped specials, balanced
braces, symbols in math mode) run everywhere."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from attn_study.report.cli import build_report
from attn_study.report.render import LATEX_PREAMBLE, latex, latex_escape
from tests.report.test_report import ff_summary, jw_instances, jw_summary, make_run

PDFLATEX = shutil.which("pdflatex")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report with Jain & Wallace (two seeds), Serrano & Smith, Meister and faithfulness tables, and a failed run
    named over three lines."""
    root = tmp_path_factory.mktemp("latex") / "runs"
    for seed in (1, 2):
        for encoder, base in (("lstm", 0.3), ("average", 0.6)):
            summary = jw_summary(base + seed / 100, 0.8) | {
                "jw/n_instances": 20,
                "jw/perm/median_tvd/mean": 1e-9,
                "jw/adv/emax_jsd/mean": 0.4,
            }
            make_run(
                root,
                f"{encoder}-{seed}",
                dataset="sst",
                encoder=encoder,
                seed=seed,
                summary=summary,
                instances=jw_instances(seed),
            )
    ss = {"ss/n_instances": 10, "ss/multi/n": 10, "ss/multi/grad_faster_than_attn": 0.3}
    ss |= {"ss/multi/attn_faster_than_grad": 0.0, "ss/multi/grad_vs_attn_sign_p": 1.2e-9}
    for ranking in ("attention", "gradient"):
        ss |= {f"ss/multi/{ranking}/frac_removed/{k}": 0.25 for k in ("median", "mean", "ci_low", "ci_high")}
        ss |= {f"ss/multi/{ranking}/never_flip": 1, f"ss/multi/{ranking}/never_flip_frac": 0.1}
    make_run(root, "ss", dataset="yelp", model="han", encoder="gru", summary=ss, family="serrano_smith")
    for i, (projection, lam) in enumerate((("sparsemax", None), ("sparsegen", -1.0), ("sparsegen", 0.5))):
        sp = {"sp/n_instances": 4, "sp/entropy/g_hidden/mean": 0.8, "sp/entropy/g_hidden/std": 0.1}
        sp |= {"sp/entropy/g_input/mean": 0.9 - i / 10, "sp/support/frac/mean": 0.5}
        make_run(
            root,
            f"sp{i}",
            dataset="sst",
            encoder="transformer",
            attention="dot",
            projection=projection,
            lam=lam,
            summary=sp,
            family="sparsity",
            instances=pd.DataFrame({"entropy_g_input": np.linspace(0.5, 1, 4) - i / 10}),
        )
    make_run(root, "ff", dataset="synthetic", encoder="cnn", summary=ff_summary(0.0), family="faithfulness")
    # a failed run whose name and error span lines (a blank one would end a LaTeX table's row)
    make_run(root, "failed\n\nrun", dataset="sst", encoder="cnn", state="failed", error="Traceback:\n\n  x & y")
    return build_report(root, include_all=True)  # the synthetic faithfulness run too


def test_every_table_is_ascii_latex_with_balanced_braces(report):
    tables = sorted(report.glob("*.tex"))
    assert {p.stem for p in tables} >= {
        "accuracy",
        "runs",
        "table2_additive-softmax",
        "jw_permutation_adversarial",
        "ss_fraction_removed",
        "sp_table2",
        "ff_methods",
    }
    for path in tables:
        text = path.read_text()
        assert text.isascii(), (path.name, sorted({c for c in text if not c.isascii()}))
        body = re.sub(r"\\[{}]", "", text)
        assert body.count("{") == body.count("}"), path.name
        assert re.sub(r"\\\$", "", text).count("$") % 2 == 0, path.name  # math mode opened and closed
        assert "\n\n" not in text, path.name  # no blank line: a paragraph break inside a table is an error
        body = text.split("\n", 1)[1]  # after the "% needs ..." comment line
        assert not re.search(r"(?<!\\)[%#&_](?![^$]*\$)", body.replace(" & ", "").replace(r"\\", "")), path.name


def test_symbols_are_math_and_subscripts_are_subscripts():
    assert latex_escape("τ_g BiLSTM") == r"$\tau_{\mathrm{g}}$ BiLSTM"
    assert latex_escape("τ_{loo}±0.2") == r"$\tau_{\mathrm{loo}} \pm$0.2"  # adjacent math joined
    assert latex_escape("p ≤ 0.05, ∞, −1") == r"p $\leq$ 0.05, $\infty$, $-$1"
    assert latex_escape("H̃(g_ŷ(x)) λ=0.5") == r"$\tilde{H}$(g\_$\hat{y}$(x)) $\lambda$=0.5"
    assert latex_escape("a_b & 50% #1 $x") == r"a\_b \& 50\% \#1 \$x"
    frame = pd.DataFrame({"ratio": [float("inf")], "sign test p": [1.1e-9], "n": [3]})
    assert r"$\infty$ & 1.1e-09 & 3 \\" in latex(frame, "c")


@pytest.mark.skipif(
    PDFLATEX is None,
    reason="no pdflatex on PATH (apt-get install texlive-latex-base "
    "texlive-latex-recommended, as .ci/run does); the source checks above still ran",
)
def test_every_table_compiles(report, tmp_path):
    tables = sorted(report.glob("*.tex"))
    document = "\n".join(
        [r"\documentclass{article}", LATEX_PREAMBLE, r"\begin{document}"]
        + [rf"\input{{{p.as_posix()}}}" + "\n" + r"\clearpage" for p in tables]
        + [r"\end{document}"]
    )
    (tmp_path / "all.tex").write_text(document)
    proc = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "all.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stdout.splitlines() if line.startswith("!")]
    assert proc.returncode == 0 and not errors, "\n".join(errors) or proc.stdout[-3000:]
    assert (tmp_path / "all.pdf").is_file()
