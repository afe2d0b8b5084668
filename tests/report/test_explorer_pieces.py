"""The instance explorer on word pieces (``encoder=pretrained``): the page holds each piece's word and the words'
texts, shows words — each scored by the rule chosen above the table, by hand here — with their pieces on hover, and
the pieces themselves on request, in headless Chromium."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd

from attn_study import layout
from attn_study.data.pieces import word_scores
from attn_study.report import explorer
from tests.browser import browser_page
from tests.report.test_explorer_page import open_page, runs_of, written_run

PIECES = ["un", "##believ", "##able", "film"]
WORDS = [0, 0, 0, 1]
SCORES = [0.1, 0.2, 0.3, 0.4]


def pieces_run(root):
    """A run whose tokens.parquet holds word pieces, their words and one method's scores."""
    run = written_run(root, "run", {"u0": PIECES}, families={"jain_wallace": {"scores": {"attention": {"u0": SCORES}}}})
    path = layout.family_dir(run, "jain_wallace") / layout.TOKENS
    table = pd.read_parquet(path)
    table["words"] = [WORDS]
    table.to_parquet(path)
    return run


def test_the_page_holds_each_pieces_word_and_the_words_texts(tmp_path):
    data = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(pieces_run(tmp_path))])
    assert data["word_rules"] == ["sum", "max", "first"]
    vocab = data["vocab"]
    named = np.frombuffer(base64.b64decode(data["word_texts"][0]), dtype="<u2")
    assert [vocab[i] for i in named] == ["unbelievable", "film"]
    assert np.frombuffer(base64.b64decode(data["words"][0]), dtype="<u2").tolist() == WORDS
    text = next(c for c in data["columns"] if c["key"] == "text")
    assert text["values"] == ["unbelievable film"]


SPANS = "() => [...document.querySelectorAll('#instance .copy .tok')].map(t => [t.textContent, t.title])"


def test_words_are_shown_with_their_pieces_on_hover_and_scored_by_the_rule_chosen(tmp_path):
    """The page stores each piece as round(127 s / 0.4) / 127 · 0.4 (its shade on the copy's scale); a word's score is
    word_scores of those, by the rule the reader picks; "word pieces" shows the pieces."""
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(pieces_run(tmp_path)), path, "pieces")
    stored = np.rint(127 * np.asarray(SCORES) / 0.4) / 127 * 0.4
    expected = {rule: word_scores(stored, WORDS, rule) for rule in ("sum", "max", "first")}
    seen = {}
    with browser_page() as page:
        open_page(page, path)
        assert page.is_visible("#word-view")
        page.click("tbody tr.row >> nth=0")
        seen["sum"] = page.evaluate(SPANS)
        for rule in ("max", "first", "pieces"):
            page.select_option("#word-rule", rule)
            seen[rule] = page.evaluate(SPANS)
    assert page.console_errors == []
    for rule in ("sum", "max", "first"):
        shown = seen[rule]
        assert [label for label, _ in shown] == ["unbelievable", "film"]
        assert shown[0][1].startswith("un ##believ ##able: ") and shown[1][1].startswith("film: ")
        values = [float(title.rsplit(": ", 1)[1]) for _, title in shown]
        np.testing.assert_allclose(values, expected[rule], rtol=5e-3)
    assert [label for label, _ in seen["pieces"]] == PIECES
    assert [float(title) for _, title in seen["pieces"]] == [float(f"{v:.3g}") for v in stored]
