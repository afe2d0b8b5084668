"""Why a per-instance statistic is undefined — too short, a NaN, all tied — reported and counted, never dropped in
silence."""

from __future__ import annotations

import math

import torch

#: codes of :func:`undefined_code`
UNDEFINED = ("", "too_short", "nan", "constant")


def undefined_code(scores: torch.Tensor, mask: torch.Tensor, constant_is: str = "constant") -> torch.Tensor:
    """Per row of ``scores`` (B, T) over its real entries (``mask``), an index into :data:`UNDEFINED` —
    why a rank statistic (τ) or a distribution of it would be undefined: 0 defined, 1 fewer than two entries,
    2 a NaN among them, 3 all equal (``constant_is='zero'``: all 0, for scores normalised into a
    distribution, which only an all-zero row cannot be)."""
    mask = mask.to(torch.bool)
    n = mask.sum(-1)
    has_nan = (torch.isnan(scores) & mask).any(-1)
    if constant_is == "zero":
        constant = ((scores != 0) & mask).sum(-1) == 0
    else:
        high = scores.masked_fill(~mask, -math.inf).amax(-1)
        low = scores.masked_fill(~mask, math.inf).amin(-1)
        constant = high == low
    code = torch.where(constant, 3, 0)
    code = torch.where(has_nan, 2, code)
    return torch.where(n < 2, 1, code)


def undefined_reason(codes: dict[str, torch.Tensor], *names: str, zero: bool = False) -> list[str | None]:
    """Per row, why a statistic of the scores ``names`` (keys of ``codes``, from :func:`undefined_code`) is
    undefined: ``too_short``, ``nan_<name>``, ``constant_<name>`` (``zero_<name>`` with ``zero``), the first
    that applies; None where it is defined."""
    rows = len(next(iter(codes.values())))
    out: list[str | None] = [None] * rows
    for name in names:
        for r, c in enumerate(codes[name].tolist()):
            if out[r] is None and c:
                kind = UNDEFINED[c]
                out[r] = kind if kind == "too_short" else f"{'zero' if zero and kind == 'constant' else kind}_{name}"
    return out


def dropped_counts(reasons) -> dict[str, int]:
    """{reason: how many rows}, with ``total``: the instances a statistic had to leave out, and why."""
    reasons = [r for r in reasons if isinstance(r, str) and r]
    counts = {"total": len(reasons)}
    for reason in sorted(set(reasons)):
        counts[reason] = reasons.count(reason)
    return counts
