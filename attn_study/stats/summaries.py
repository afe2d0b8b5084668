"""Summaries of per-instance values: the mean with its percentile-bootstrap interval, std, median, n (and the share
of significant p-values), and the bootstrap interval of any statistic of column means."""

from __future__ import annotations

import numpy as np
import torch

#: the statistics of a mean a summary reports: the mean and its 95 % bootstrap interval
MEAN_STATS = ("mean", "ci_low", "ci_high")

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
