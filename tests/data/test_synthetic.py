"""The embedded synthetic task: determinism, label rule, rationales, need for context."""

from __future__ import annotations

import numpy as np

from attn_study.data.synthetic import NEGATIVE, NEGATORS, POSITIVE, SyntheticSource
from attn_study.data.text import tokenize


def label_from_words(words: list[str]) -> int:
    """The documented rule, re-implemented: each signal word's polarity, flipped by a negator right before it."""
    total = 0
    for i, w in enumerate(words):
        if w in POSITIVE or w in NEGATIVE:
            polarity = 1 if w in POSITIVE else -1
            if i > 0 and words[i - 1] in NEGATORS:
                polarity = -polarity
            total += polarity
    return int(total > 0)


def test_same_seed_same_data_other_seed_other_data():
    a = SyntheticSource(n_train=50, n_dev=10, n_test=10, seed=3).load()
    b = SyntheticSource(n_train=50, n_dev=10, n_test=10, seed=3).load()
    c = SyntheticSource(n_train=50, n_dev=10, n_test=10, seed=4).load()
    assert a == b and a["train"] != c["train"]
    # changing the size of one split leaves the others unchanged
    d = SyntheticSource(n_train=50, n_dev=10, n_test=20, seed=3).load()
    assert d["train"] == a["train"] and d["test"][:10] == a["test"]


def test_labels_follow_the_rule_and_rationales_mark_the_deciding_tokens():
    data = SyntheticSource(n_train=400, n_dev=10, n_test=10, seed=0).load()
    negated = 0
    for ex in data["train"]:
        words = tokenize(ex.text)
        assert words == ex.text.split()  # the rationale indices refer to the tokenised text
        assert ex.label == label_from_words(words)
        signals = {i for i, w in enumerate(words) if w in POSITIVE or w in NEGATIVE}
        flips = {i - 1 for i in signals if i > 0 and words[i - 1] in NEGATORS}
        assert set(ex.rationale) == signals | flips
        negated += bool(flips)
    labels = np.array([ex.label for ex in data["train"]])
    assert 0.4 < labels.mean() < 0.6
    assert negated > 100


def test_a_bag_of_words_cannot_resolve_negation():
    """Decoy negators make word counts ambiguous: two instances with the same multiset of words
    can have different labels only through order, so ensure order matters in the generated data."""
    data = SyntheticSource(n_train=2000, n_dev=10, n_test=10, seed=1).load()["train"]
    decoys = sum(
        any(w in NEGATORS and (i + 1 >= len(ws) or ws[i + 1] not in POSITIVE + NEGATIVE) for i, w in enumerate(ws))
        for ws in (ex.text.split() for ex in data)
    )
    assert decoys > 0.4 * len(data)

    # the counting rule that ignores order (negators anywhere flip) disagrees with the labels often
    def unordered(words):
        pol = sum(1 if w in POSITIVE else -1 for w in words if w in POSITIVE or w in NEGATIVE)
        flips = sum(w in NEGATORS for w in words)
        return int(pol * (-1) ** flips > 0)

    disagree = np.mean([unordered(ex.text.split()) != ex.label for ex in data])
    assert disagree > 0.2
