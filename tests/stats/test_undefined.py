"""Why a per-instance statistic is undefined (stats/undefined.py): the codes of hand-made rows."""

from __future__ import annotations

import math

import torch

from attn_study.stats import UNDEFINED, undefined_code


def test_each_rows_code_over_its_real_entries_only():
    """Rows (padding after the mask's ones): 0.5 0.5 | 9 — all real entries equal, the padding not counted:
    constant; 0.1 0.2 0.3: defined; 0.4 NaN 0.4: nan; 0.7 | 0 0: one entry, too short; 1 1 1: constant."""
    scores = torch.tensor(
        [[0.5, 0.5, 9.0], [0.1, 0.2, 0.3], [0.4, math.nan, 0.4], [0.7, 0.0, 0.0], [1.0, 1.0, 1.0]],
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    codes = undefined_code(scores, mask).tolist()
    assert [UNDEFINED[c] for c in codes] == ["constant", "", "nan", "too_short", "constant"]


def test_under_constant_is_zero_only_an_all_zero_row_is_constant():
    """0 0 | 5: the real entries are all 0; 0 0.2 0: not all 0, although two entries are equal; 3 3 3: all equal but
    not 0, so a distribution of them is defined."""
    scores = torch.tensor([[0.0, 0.0, 5.0], [0.0, 0.2, 0.0], [3.0, 3.0, 3.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1]])
    assert [UNDEFINED[c] for c in undefined_code(scores, mask, constant_is="zero").tolist()] == ["constant", "", ""]
