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
