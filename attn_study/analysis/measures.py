"""Distances between distributions, entropy, batched Kendall τ-b, and summaries of per-instance values.

Everything works on batches of torch tensors (float32 or float64, CPU or CUDA) and reduces over the
last dimension; nothing loops in Python over instances.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

__all__ = [
    "tvd",
    "probability_drop",
    "jsd",
    "entropy",
    "kendall_tau_b",
    "summarise",
    "bootstrap_ci",
    "MEAN_STATS",
    "undefined_code",
    "undefined_reason",
    "dropped_counts",
    "bootstrap_ci_of",
]

#: the statistics of a mean a summary reports: the mean and its 95 % bootstrap interval
MEAN_STATS = ("mean", "ci_low", "ci_high")

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


# --------------------------------------------------------------------------------------------------
# Kendall τ-b
# --------------------------------------------------------------------------------------------------

# scipy.stats.kendalltau(method='auto') uses the exact null distribution when there are no ties in
# x or y and (n ≤ 33 or min(concordant, discordant) ≤ 1); otherwise the normal approximation.
_EXACT_MAX_N = 33
# scipy's closed forms for min(con, dis) ∈ {0, 1}: 2/n! and 2/(n−1)!, set to 0 from n = 171 / 172.
_CLOSED_FORM_MAX_N = 172


@lru_cache(maxsize=1)
def _kendall_exact_tables() -> tuple[np.ndarray, np.ndarray]:
    """Two-sided exact p-values under H0 (all n! permutations equally likely), as float64 tables.

    ``small[n, c]`` for n ≤ 33, c ≤ n(n−1)/4: min(1, 2·Σ_{k≤c} I(n, k) / n!), where I(n, k) counts
    the permutations of n items with k inversions (Mahonian numbers), from the recurrence
    I(n, k) = Σ_{j=0}^{min(k, n−1)} I(n−1, k−j), computed with exact integers.
    ``closed[n, c]`` for c ∈ {0, 1}: 2/n! and 2/(n−1)!, 0 where scipy gives 0 (n ≥ 171, resp. 172).
    """
    max_c = _EXACT_MAX_N * (_EXACT_MAX_N - 1) // 4
    small = np.ones((_EXACT_MAX_N + 1, max_c + 1))
    counts = [1]  # I(1, ·)
    for n in range(2, _EXACT_MAX_N + 1):
        new = [0] * (len(counts) + n - 1)
        for k, c in enumerate(counts):  # multiply the generating polynomial by 1 + q + … + q^(n−1)
            for j in range(n):
                new[k + j] += c
        counts = new
        fact = math.factorial(n)
        cum = 0
        for c in range(min(max_c, (n * (n - 1)) // 2) + 1):
            cum += counts[c]
            small[n, c] = min(1.0, float(Fraction(2 * cum, fact)))
    closed = np.zeros((_CLOSED_FORM_MAX_N + 1, 2))
    for n in range(1, _CLOSED_FORM_MAX_N + 1):
        closed[n, 0] = float(Fraction(2, math.factorial(n))) if n < 171 else 0.0
        closed[n, 1] = float(Fraction(2, math.factorial(n - 1))) if n < 172 else 0.0
    closed[1] = closed[2] = 1.0
    return small, closed


def _tie_groups(keys: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort order, dense ranks and tie-group sizes of the valid entries of each row (no pairwise work).

    keys: (B, T) with every invalid entry holding a key ≥ all valid keys (an invalid entry may share
    the largest valid key's group: it is not counted and its rank is not used). Returns ``perm``
    (B, T), the stable ascending order; ``rank`` (B, T) int64, the dense rank 0, 1, … of each entry among its
    row's valid keys; and ``sizes`` (B, T) int64, the size of tie group g at index g (0 beyond the last group;
    invalid entries are not counted).
    """
    sorted_keys, perm = torch.sort(keys, dim=1, stable=True)
    sorted_valid = torch.gather(valid, 1, perm)
    start = torch.ones_like(sorted_valid)
    start[:, 1:] = sorted_keys[:, 1:] != sorted_keys[:, :-1]
    group = torch.cumsum(start, dim=1) - 1
    sizes = torch.zeros_like(group).scatter_add_(1, group, sorted_valid.to(group.dtype))
    rank = torch.empty_like(group).scatter_(1, perm, group)
    return perm, rank, sizes


def _tie_sums(sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From tie-group sizes t (B, G): Σ t(t−1)/2 (tied pairs), Σ t(t−1)(t−2), Σ t(t−1)(2t+5)."""
    t = sizes
    return (t * (t - 1) // 2).sum(-1), (t * (t - 1) * (t - 2)).sum(-1), (t * (t - 1) * (2 * t + 5)).sum(-1)


_TRIL_CACHE: dict = {}


def _strict_lower(L: int, device: torch.device) -> torch.Tensor:
    key = (L, str(device))
    if key not in _TRIL_CACHE:
        if len(_TRIL_CACHE) > 64:
            _TRIL_CACHE.clear()
        _TRIL_CACHE[key] = torch.ones(L, L, dtype=torch.bool, device=device).tril(-1)
    return _TRIL_CACHE[key]


def _discordant(ry: torch.Tensor) -> torch.Tensor:
    """Discordant pairs per row of a chunk (C, L) by pairwise (C, L, L) comparison.

    ``ry`` holds the y-ranks with each row ordered by (x-rank, y-rank) ascending; then a pair j < i is
    discordant iff ry_j > ry_i (x-ties are ordered by y, so they never count). Padding at the end of a
    row must hold a rank above every real one. L must be a multiple of 8.
    """
    C, L = ry.shape
    # inv[c, i, j] = (j < i and ry_j > ry_i)
    inv = torch.gt(ry[:, None, :], ry[:, :, None]).logical_and_(_strict_lower(L, ry.device))
    if L // 8 <= 255:
        # Sum the 0/1 bytes as packed int64 words (each byte lane adds ≤ L/8 ≤ 255 ones, so no carry),
        # then the 8 lanes: avoids converting the whole bool tensor to a wider integer type.
        lanes = inv.view(torch.int64).sum(-1)  # (C, L), 8 byte-lane counts per word
        return lanes.view(torch.uint8).reshape(C, L * 8).sum(-1, dtype=torch.int64)
    return inv.view(torch.uint8).reshape(C, L * L).sum(-1, dtype=torch.int64)


class _PairCounts(NamedTuple):
    """Per-row pair counts of Kendall τ-b (all int64, (B,)): ``n`` real entries, ``total`` = n0 = n(n−1)/2,
    ``x_tied``/``y_tied`` = n1/n2 (pairs tied in x/y), ``concordant``/``discordant`` = P/Q, and the tie
    sums of the variance: ``x_t0``/``y_t0`` = Σ t(t−1)(t−2), ``x_vt``/``y_vt`` = Σ t(t−1)(2t+5)."""

    n: torch.Tensor
    total: torch.Tensor
    x_tied: torch.Tensor
    y_tied: torch.Tensor
    concordant: torch.Tensor
    discordant: torch.Tensor
    x_t0: torch.Tensor
    y_t0: torch.Tensor
    x_vt: torch.Tensor
    y_vt: torch.Tensor


#: relative resolution of importance scores: values closer than this share of a row's largest magnitude are ties
TIE_RESOLUTION = 1e-9


def snap_ties(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores (float64) rounded to ``TIE_RESOLUTION`` of each row's largest magnitude over ``mask`` (NaN → 0, 0
    off the mask): two importances equal but for rounding — a repeated word, another padding's summation
    order — become one tie, so a rank statistic never depends on which of them rounding put first."""
    s = torch.nan_to_num(scores.double(), nan=0.0) * mask
    scale = s.abs().amax(1, keepdim=True)
    step = torch.where(scale > 0, scale * TIE_RESOLUTION, torch.ones_like(scale))
    return torch.round(s / step) * step


def kendall_tau_b(
    x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, chunk_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row Kendall τ-b and its two-sided p-value, as ``scipy.stats.kendalltau(x[m], y[m])``.

    x, y: (B, T) scores; mask: (B, T) bool, True for real entries (anywhere in the row; None = all).
    With P/Q the concordant/discordant pairs, n0 = n(n−1)/2, n1/n2 the pairs tied in x/y:

        τ_b = (P − Q) / sqrt((n0 − n1)(n0 − n2)),  clipped to [−1, 1].

    p-value (scipy's ``method='auto'``): if no ties in x or y and (n ≤ 33 or min(P, Q) ≤ 1), exact:
    2·Pr[K ≤ min(P, Q)] (capped at 1) under the uniform distribution over permutations (cached table);
    else asymptotic: z = (P − Q)/sqrt(var), p = 2·Φ(−|z|), with the tie-corrected variance
    var = (v0 − vt − vu)/18 + 2·n1·n2/(n(n−1)) + t0·u0/(9n(n−1)(n−2)), v0 = n(n−1)(2n+5),
    vt = Σ t(t−1)(2t+5), t0 = Σ t(t−1)(t−2) over x's tie groups of sizes t (vu, u0 likewise for y).

    Rows with fewer than 2 real entries, a constant x or y, or a NaN among real entries → (NaN, NaN).
    Tie groups and ranks come from per-row sorts; Q from pairwise (rows, L, L) comparisons of the
    y-ranks in (x, y) order, L = the longest real length in the chunk, and P = n0 − n1 − n2 + n3 − Q,
    n3 = pairs tied in both. Rows are grouped by length and processed ``chunk_size`` at a time (fewer
    when rows·L² would exceed 2**25, to bound memory); chunking never changes results. Results come
    back in the promoted floating dtype of x and y, computed internally in float64.
    """
    x, y = torch.broadcast_tensors(x, y)
    if x.dim() != 2:
        raise ValueError(f"kendall_tau_b expects (B, T) inputs, got shape {tuple(x.shape)}")
    out_dtype = torch.promote_types(x.dtype, y.dtype)
    if not out_dtype.is_floating_point:
        out_dtype = torch.float64
    B, T = x.shape
    m = torch.ones_like(x, dtype=torch.bool) if mask is None else mask.to(x.device, torch.bool).expand(B, T)
    x = x.to(torch.float64)
    y = y.to(torch.float64)
    has_nan = ((torch.isnan(x) | torch.isnan(y)) & m).any(-1)

    counts = _pair_counts(x, y, m, chunk_size)
    n, tot_i = counts.n, counts.total
    undefined = (n < 2) | (counts.x_tied == tot_i) | (counts.y_tied == tot_i) | has_nan
    tau = _tau_b(counts, undefined)
    exact = _tau_exact_branch(counts)
    pvalue = torch.where(exact, _tau_exact_pvalue(counts), _tau_asymptotic_pvalue(counts)).clamp(0.0, 1.0)

    nan = torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
    tau = torch.where(undefined, nan, tau)
    pvalue = torch.where(undefined, nan, pvalue)
    return tau.to(out_dtype), pvalue.to(out_dtype)


def _real_first(x: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's real entries moved to the front (stable order), padding set to +inf so sorts put it last.

    Returns the permuted mask ``ms`` and the permuted ``xs``, ``ys`` (B, T) float64.
    """
    order = torch.argsort((~m).to(torch.int8), dim=-1, stable=True)
    ms = torch.gather(m, 1, order)
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=x.device)
    xs = torch.where(ms, torch.gather(x, 1, order), inf)
    ys = torch.where(ms, torch.gather(y, 1, order), inf)
    return ms, xs, ys


def _pair_counts(x: torch.Tensor, y: torch.Tensor, m: torch.Tensor, chunk_size: int) -> _PairCounts:
    """Tie and pair counts per row over the real entries (``m``) of x, y (B, T) float64.

    Tie groups and dense ranks rx, ry of x and y come from per-row sorts; the joint groups (tied in
    both) from the key rx·T + ry, whose sort order is the (x, y) order. Q comes from
    :func:`_discordant_by_length` on the y-ranks in that order, and P = n0 − n1 − n2 + n3 − Q,
    n3 = pairs tied in both.
    """
    T = x.shape[1]
    ms, xs, ys = _real_first(x, y, m)
    _, rx, x_sizes = _tie_groups(xs, ms)
    _, ry, y_sizes = _tie_groups(ys, ms)
    joint_perm, _, joint_sizes = _tie_groups(torch.where(ms, rx * T + ry, T * T), ms)
    xtie, x0, x1 = _tie_sums(x_sizes)
    ytie, y0, y1 = _tie_sums(y_sizes)
    ntie = _tie_sums(joint_sizes)[0]

    # discordant pairs: y-ranks in (x, y) order, padding (at the end) ranked above every real entry
    ry = torch.where(ms, ry, T).to(torch.int32)
    ry = torch.gather(ry, 1, joint_perm)
    n = m.sum(-1)
    dis = _discordant_by_length(ry, n, chunk_size)
    tot_i = n * (n - 1) // 2
    con = tot_i - xtie - ytie + ntie - dis
    return _PairCounts(n, tot_i, xtie, ytie, con, dis, x0, y0, x1, y1)


def _discordant_by_length(ry: torch.Tensor, n: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Discordant pairs Q per row (B,) int64 from the y-ranks ``ry`` (B, T) in (x, y) order, padding = T.

    Rows are sorted by real length ``n`` (similar lengths share a chunk → less padding) and sent to
    :func:`_discordant` ``chunk_size`` at a time, fewer when rows·L² would exceed 2**25, L = the longest
    real length in the chunk; each chunk is cut (or padded with T) to L rounded up to a multiple of 8.
    Rows with L < 2 keep Q = 0. Chunking never changes results.
    """
    B, T = ry.shape
    dis = torch.zeros(B, dtype=torch.int64, device=ry.device)
    rows_by_len = torch.argsort(n)  # similar lengths share a chunk → less padding
    lengths = n[rows_by_len].tolist()
    chunk_size = max(1, int(chunk_size))
    max_pairs = 1 << 25
    start = 0
    while start < B:
        stop = min(B, start + chunk_size)
        L = int(lengths[stop - 1])
        if L * L * (stop - start) > max_pairs:
            stop = start + max(1, max_pairs // (L * L))
            L = int(lengths[stop - 1])
        idx = rows_by_len[start:stop]
        start = stop
        if L >= 2:
            Lp = -(-L // 8) * 8
            chunk = ry[idx, : min(Lp, T)]
            if chunk.shape[1] < Lp:
                chunk = torch.nn.functional.pad(chunk, (0, Lp - chunk.shape[1]), value=T)
            dis[idx] = _discordant(chunk)
    return dis


def _tau_b(c: _PairCounts, undefined: torch.Tensor) -> torch.Tensor:
    """τ_b = (P − Q) / sqrt(n0 − n1) / sqrt(n0 − n2), clipped to [−1, 1], float64 (B,).

    Where ``undefined`` the denominators are replaced by 1 (the caller sets those rows to NaN).
    """
    tot, xt, yt = c.total.double(), c.x_tied.double(), c.y_tied.double()
    s = (c.concordant - c.discordant).double()
    one = torch.ones_like(tot)
    tau = s / torch.sqrt(torch.where(undefined, one, tot - xt))
    tau = tau / torch.sqrt(torch.where(undefined, one, tot - yt))
    return tau.clamp(-1.0, 1.0)


def _tau_exact_branch(c: _PairCounts) -> torch.Tensor:
    """Rows (B,) bool whose p-value is exact (scipy's ``method='auto'``): no ties in x or y and
    (n ≤ 33 or min(P, Q) ≤ 1)."""
    c_min = torch.minimum(c.concordant, c.discordant)
    return (c.x_tied == 0) & (c.y_tied == 0) & ((c.n <= _EXACT_MAX_N) | (c_min <= 1))


def _tau_exact_pvalue(c: _PairCounts) -> torch.Tensor:
    """Exact two-sided p-value 2·Pr[K ≤ min(P, Q)] (capped at 1), float64 (B,), looked up in
    :func:`_kendall_exact_tables`: the Mahonian table for n ≤ 33, else the closed forms for min(P, Q) ∈ {0, 1}
    (indices are clamped, so rows outside the exact branch get some table value, not used)."""
    n = c.n
    c_min = torch.minimum(c.concordant, c.discordant)
    small, closed = (torch.as_tensor(t, dtype=torch.float64, device=n.device) for t in _kendall_exact_tables())
    p_small = small[n.clamp(0, _EXACT_MAX_N), c_min.clamp(0, small.shape[1] - 1)]
    p_closed = closed[n.clamp(0, _CLOSED_FORM_MAX_N), c_min.clamp(0, 1)]
    return torch.where(n <= _EXACT_MAX_N, p_small, p_closed)


def _tau_asymptotic_pvalue(c: _PairCounts) -> torch.Tensor:
    """Asymptotic two-sided p-value 2·Φ(−|z|), z = (P − Q)/sqrt(var), float64 (B,), with the tie-corrected

        var = (n(n−1)(2n+5) − vt − vu)/18 + 2·n1·n2/(n(n−1)) + t0·u0/(9n(n−1)(n−2)).

    Zero denominators (n ≤ 2) are replaced by 1, and a var ≤ 0 by 1.
    """
    nf = c.n.to(torch.float64)
    xt, yt = c.x_tied.double(), c.y_tied.double()
    s = (c.concordant - c.discordant).double()
    one = torch.ones_like(nf)
    mm = nf * (nf - 1)
    safe_mm = torch.where(mm > 0, mm, one)
    safe_n2 = torch.where(nf > 2, nf - 2, one)
    var = (
        (mm * (2 * nf + 5) - c.x_vt.double() - c.y_vt.double()) / 18
        + 2 * xt * yt / safe_mm
        + c.x_t0.double() * c.y_t0.double() / (9 * safe_mm * safe_n2)
    )
    var = torch.where(var > 0, var, one)
    z = s / torch.sqrt(var)
    return torch.special.erfc(z.abs() / math.sqrt(2.0))  # 2·Φ(−|z|)


# --------------------------------------------------------------------------------------------------
# why a per-instance statistic is undefined (reported, never dropped in silence)
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# summaries
# --------------------------------------------------------------------------------------------------


BOOTSTRAP_RESAMPLES, BOOTSTRAP_LEVEL, BOOTSTRAP_SEED = 1000, 0.95, 0


def bootstrap_ci(
    values, resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (NaN ignored): the (1 ± level)/2 quantiles
    of the means of ``resamples`` resamples drawn with replacement, all at once (in chunks bounding the
    memory), from a generator seeded by ``seed`` — the same values give the same interval. NaN with no
    value; (v, v) with one."""
    v = _as_numpy(values)
    v = v[~np.isnan(v)]
    n = v.size
    if n == 0:
        return float("nan"), float("nan")
    if n == 1:
        return float(v[0]), float(v[0])
    means = np.empty(resamples)
    for start, rows in _resamples(n, resamples, seed):
        means[start : start + len(rows)] = v[rows].mean(1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def bootstrap_ci_of(
    statistic,
    columns: np.ndarray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = BOOTSTRAP_LEVEL,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """(value, low, high) of ``statistic`` of the column means of ``columns`` (n, k) — e.g. the F1 of a mean
    precision and a mean recall — with the percentile-bootstrap interval of :func:`bootstrap_ci` (rows with a
    NaN left out; the same resampled rows for every column). ``statistic`` maps means (…, k) to (…)."""
    v = np.asarray(columns, dtype=np.float64)
    v = v[~np.isnan(v).any(1)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    value = float(statistic(v.mean(0)))
    if n == 1:
        return value, value, value
    stats = np.empty(resamples)
    for start, rows in _resamples(n, resamples, seed):
        stats[start : start + len(rows)] = statistic(v[rows].mean(1))
    low, high = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return value, float(low), float(high)


def _resamples(n: int, resamples: int, seed: int):
    """(first resample's number, row indices (size, n)) in chunks of at most ~4M indices, from one seeded
    generator: every resample draws n rows with replacement."""
    rng = np.random.default_rng(seed)
    per_chunk = max(1, int(4_000_000 // n))
    for start in range(0, resamples, per_chunk):
        size = min(per_chunk, resamples - start)
        yield start, rng.integers(0, n, size=(size, n))


def summarise(values, pvalues=None, threshold: float = 0.05) -> dict:
    """Summary of per-instance values, ignoring NaN: mean with its 95 % bootstrap interval (``ci_low``,
    ``ci_high``: :func:`bootstrap_ci`), std, median, n (and sig_frac).

    Every entry is a plain Python float except ``n``, a Python int.

    ``std`` is the population standard deviation (ddof = 0); ``median`` averages the two middle values
    for even n; ``n`` counts the non-NaN values. With ``pvalues``, ``sig_frac`` is the fraction of the
    rows with a non-NaN value whose p-value is ≤ ``threshold`` (a NaN p-value counts as not
    significant). With no non-NaN value all statistics are NaN and n = 0.
    """
    v = _as_numpy(values)
    keep = ~np.isnan(v)
    kept = v[keep]
    n = int(kept.size)
    nan = float("nan")
    low, high = bootstrap_ci(kept)
    out = {
        "mean": float(kept.mean()) if n else nan,
        "ci_low": low,
        "ci_high": high,
        "std": float(kept.std(ddof=0)) if n else nan,
        "median": float(np.median(kept)) if n else nan,
        "n": n,
    }
    if pvalues is not None:
        p = _as_numpy(pvalues)
        if p.shape != v.shape:
            raise ValueError(f"pvalues shape {p.shape} does not match values shape {v.shape}")
        p = p[keep]
        with np.errstate(invalid="ignore"):
            out["sig_frac"] = float(np.mean(p <= threshold)) if n else nan
    return out


def _as_numpy(a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().to("cpu", torch.float64).numpy()
    return np.asarray(a, dtype=np.float64).reshape(-1)
