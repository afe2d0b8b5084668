"""The metric-key schema's helpers that families' ``keys.py`` modules go through: a family's DISAGREEMENT read and
checked, and the first of its columns a frame has."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attn_study import keys


def test_a_family_declares_its_disagreement_as_column_end_pairs():
    declared = SimpleNamespace(DISAGREEMENT=[("tau_grad", "low"), ["perm_median_tvd", "high"]])
    assert keys.disagreement_of(declared, "here/keys.py") == (("tau_grad", "low"), ("perm_median_tvd", "high"))
    assert keys.disagreement_of(SimpleNamespace(), "here/keys.py") == ()


def test_a_disagreement_end_other_than_low_or_high_is_refused_naming_the_file():
    with pytest.raises(ImportError, match=r"here/keys.py: DISAGREEMENT ends \['lowest'\]"):
        keys.disagreement_of(SimpleNamespace(DISAGREEMENT=[("a", "low"), ("b", "lowest")]), "here/keys.py")


def test_the_first_declared_column_the_frame_has_sorts_it():
    disagreement = (("tau_loo", "low"), ("tau_grad", "low"), ("jsd", "high"))
    assert keys.first_present(disagreement, ["jsd", "tau_grad"]) == ("tau_grad", "low")
    assert keys.first_present(disagreement, ["length"]) is None


def test_the_parts_right_below_a_stem_are_listed_once_each_sorted():
    summary = ["jw/tau_grad/mean", "jw/tau_grad/class_1/mean", "jw/perm/median_tvd/mean", "jwx/other/mean", "ss/jw/x"]
    # below "jw/": tau_grad (twice) and perm; "jwx/…" shares the letters but not the path part, "ss/jw/…" the part
    # but not the start
    assert keys.children(summary, "jw") == ["perm", "tau_grad"]
    assert keys.children(summary, "jw/tau_grad") == ["class_1", "mean"]
    assert keys.children(summary, "sp") == []


def test_the_predicted_classes_of_a_stem_are_read_from_its_class_parts_in_number_order():
    summary = [
        "jw/tau_grad/class_10/mean",
        "jw/tau_grad/class_2/mean",
        "jw/tau_grad/class_0/ci_low",
        "jw/tau_grad/class_0/ci_high",
        "jw/tau_grad/mean",  # the all-class statistic: no class
        "jw/tau_grad/class_x/mean",  # not a number
        "jw/tau_grad/sub/class_3/mean",  # a class of a deeper stem
        "jw/tau_gradient/class_5/mean",  # another stem that starts with the same letters
    ]
    assert keys.classes(summary, "jw/tau_grad") == [0, 2, 10]  # as numbers: 2 before 10
    assert keys.classes(summary, "jw/tau_grad/sub") == [3]
    assert keys.classes(summary, "jw/tau_loo") == []
