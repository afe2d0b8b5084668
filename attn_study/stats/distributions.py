"""Distances between distributions and their entropy: TVD, the drop of one class's probability, Jensen–Shannon
divergence, Shannon entropy — on batches of torch tensors, reduced over the last dimension."""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)


def _xlogy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x·log y with the convention 0·log y = 0 (also for y = 0), safe for gradients."""
    pos = x > 0
    return torch.where(pos, x * torch.log(torch.where(pos, y, torch.ones_like(y))), torch.zeros_like(x))


def tvd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance TVD(p, q) = ½ Σ_t |p_t − q_t| over the last dim (broadcast over the rest).

    For distributions the result lies in [0, 1].
    """
    return 0.5 * (p - q).abs().sum(-1)


def probability_drop(before: torch.Tensor, after: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """before_c − after_c, c = ``target`` (…,): how much class c's probability fell, from distributions
    (…, C). Computed as the rise of the other classes' mass, Σ_{k≠c} (after_k − before_k): the same number,
    but exact when before_c rounds to 1 (a confident prediction in float32), where the direct difference
    of two 1.0s loses it."""
    rise = after - before
    others = torch.ones_like(rise, dtype=torch.bool).scatter(-1, target.unsqueeze(-1), False)
    return (rise * others).sum(-1)


def jsd(p: torch.Tensor, q: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Jensen–Shannon divergence (natural log) over the last dim, broadcast over the rest.

    JSD(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m),  m = (p + q)/2,  KL(a ‖ m) = Σ_t a_t log(a_t / m_t),
    with 0·log 0 = 0 exactly, so zeros in p or q (sparse attention) give no NaN. Wherever a_t > 0,
    m_t ≥ a_t/2 > 0. The result is clamped to [0, ln 2] against rounding.

    ``eps`` (default 0: the exact divergence) optionally smooths both inputs first,
    a ← (a + eps) / Σ_t (a_t + eps).
    """
    if eps:
        p = (p + eps) / (p + eps).sum(-1, keepdim=True)
        q = (q + eps) / (q + eps).sum(-1, keepdim=True)
    p, q = torch.broadcast_tensors(p, q)
    m = 0.5 * (p + q)
    kl_pm = (_xlogy(p, p) - _xlogy(p, m)).sum(-1)
    kl_qm = (_xlogy(q, q) - _xlogy(q, m)).sum(-1)
    return (0.5 * (kl_pm + kl_qm)).clamp(0.0, LN2)


def entropy(p: torch.Tensor, mask: torch.Tensor | None = None, normalised: bool = False) -> torch.Tensor:
    """Shannon entropy H(p) = −Σ_t p_t log p_t (natural log, 0·log 0 = 0) over the last dim.

    Only entries with ``mask`` True count (all when ``mask`` is None). With ``normalised=True`` the
    result is H(p) / log n, n = the number of masked-in entries, so a uniform distribution over the
    real entries gives 1; it is defined as 0 when n ≤ 1. A row with NaN among its entries gives NaN.
    """
    if mask is not None:
        mask = mask.to(torch.bool)
        p = torch.where(mask, p, torch.zeros_like(p))
    h = -_xlogy(p, p).sum(-1)
    h = torch.where(torch.isnan(p).any(-1), torch.full_like(h, float("nan")), h)  # NaN in, NaN out
    if not normalised:
        return h
    if mask is None:
        n = torch.full_like(h, float(p.shape[-1]))
    else:
        n = mask.sum(-1).to(h.dtype).expand_as(h)
    log_n = torch.log(n.clamp(min=1.0))
    return torch.where(n > 1, h / torch.where(n > 1, log_n, torch.ones_like(log_n)), torch.zeros_like(h))
