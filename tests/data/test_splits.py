"""The splitting helpers shared by the dataset sources (data/splits.py)."""

from __future__ import annotations

from collections import Counter

from attn_study.data.splits import stratified_indices


def test_the_item_left_over_goes_to_the_class_of_the_largest_remainder_not_the_largest_class():
    """6 of class 0 and 4 of class 1, 4 drawn: exact shares 6·4/10 = 2.4 and 4·4/10 = 1.6, floors 2 and 1, one item
    left, given to the larger remainder (0.6, class 1): 2 and 2 — not 3 and 1 to the larger class."""
    labels = [0] * 6 + [1] * 4
    chosen = stratified_indices(labels, 4, 0, "opt")
    assert Counter(labels[i] for i in chosen) == {0: 2, 1: 2}
