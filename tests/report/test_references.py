"""The papers' numbers as data: a row's required settings, read from its ``settings`` cell."""

from __future__ import annotations

from attn_study.report.references import required_settings


def test_a_rows_settings_name_each_options_value_and_a_star_leaves_it_free():
    cell = " encoder.self_attention=sparsemax ;; encoder.heads = * ; projection.lam=0.5 "
    assert required_settings(cell) == {
        "encoder.self_attention": "sparsemax",
        "encoder.heads": None,
        "projection.lam": "0.5",
    }
    assert required_settings("") == {}  # a row that asks nothing beyond the paper's settings
