"""Kendall τ-b per row of a batch with scipy's two-sided p-values (exact where scipy's ``method='auto'`` is exact,
else asymptotic with the tie correction), and the snapping of near-equal importances into ties."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

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
