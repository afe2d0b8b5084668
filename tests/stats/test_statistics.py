"""attn_study.stats against closed forms and scipy (float64, 1e-6)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.stats import kendalltau

from attn_study.stats import bootstrap_ci, entropy, jsd, kendall_tau_b, snap_ties, summarise, tvd

LN2 = math.log(2.0)


def random_dists(rng: np.random.Generator, b: int, t: int, zero_frac: float = 0.4) -> np.ndarray:
    """(b, t) distributions with many exact zeros (at least one non-zero per row)."""
    w = rng.random((b, t)) * (rng.random((b, t)) > zero_frac)
    w[np.arange(b), rng.integers(0, t, b)] += 0.1
    return w / w.sum(-1, keepdims=True)


# ---------------------------------------------------------------- TVD / JSD


def test_tvd_jsd_bounds_symmetry_identity():
    rng = np.random.default_rng(0)
    p = torch.tensor(random_dists(rng, 200, 17))
    q = torch.tensor(random_dists(rng, 200, 17))
    for f, hi in ((tvd, 1.0), (jsd, LN2)):
        d = f(p, q)
        assert d.shape == (200,)
        assert torch.all(d >= 0) and torch.all(d <= hi + 1e-12)
        assert d.max() > 0.1 * hi  # not trivially zero
        torch.testing.assert_close(d, f(q, p), rtol=0, atol=1e-12)
        assert torch.all(f(p, p).abs() <= 1e-12)
    # float32 works too and agrees
    torch.testing.assert_close(jsd(p.float(), q.float()).double(), jsd(p, q), rtol=0, atol=1e-5)


def test_disjoint_supports_give_max():
    p = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    q = torch.tensor([[0.0, 0.0, 0.3, 0.7], [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(tvd(p, q), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(jsd(p, q), torch.full((2,), LN2, dtype=torch.float64))


def test_jsd_matches_scipy_with_zeros():
    rng = np.random.default_rng(1)
    p = random_dists(rng, 300, 23)
    q = random_dists(rng, 300, 23)
    q[:50] = p[:50]  # identical rows
    ours = jsd(torch.tensor(p), torch.tensor(q))
    assert not torch.isnan(ours).any()
    ref = np.array([jensenshannon(a, b) ** 2 for a, b in zip(p, q)])  # natural log by default
    np.testing.assert_allclose(ours.numpy(), ref, rtol=0, atol=1e-10)
    ref_tvd = 0.5 * np.abs(p - q).sum(-1)
    np.testing.assert_allclose(tvd(torch.tensor(p), torch.tensor(q)).numpy(), ref_tvd, atol=1e-12)


def test_broadcasting():
    rng = np.random.default_rng(2)
    p = torch.tensor(random_dists(rng, 6, 9)).reshape(2, 3, 9)
    q = torch.tensor(random_dists(rng, 1, 9))[0]  # (9,) against (2, 3, 9)
    for f in (tvd, jsd):
        d = f(p, q)
        assert d.shape == (2, 3)
        torch.testing.assert_close(d[1, 2], f(p[1, 2], q))


# ---------------------------------------------------------------- entropy


def test_entropy_uniform_onehot_and_padding():
    T = 10
    lengths = torch.tensor([1, 2, 5, 10])
    mask = torch.arange(T)[None] < lengths[:, None]
    uniform = mask.double() / lengths[:, None]
    # garbage in the padding must be ignored
    uniform_padded = torch.where(mask, uniform, torch.full_like(uniform, 0.37))
    h = entropy(uniform_padded, mask)
    torch.testing.assert_close(h, torch.log(lengths.double()))
    hn = entropy(uniform_padded, mask, normalised=True)
    torch.testing.assert_close(hn, torch.tensor([0.0, 1.0, 1.0, 1.0], dtype=torch.float64))

    onehot = torch.zeros(4, T, dtype=torch.float64)
    onehot[torch.arange(4), torch.tensor([0, 1, 3, 9])] = 1.0
    assert torch.all(entropy(onehot, mask) == 0)
    assert torch.all(entropy(onehot, mask, normalised=True) == 0)
    # no mask: all entries count
    torch.testing.assert_close(entropy(torch.full((3, 4), 0.25)), torch.full((3,), math.log(4.0)))
    torch.testing.assert_close(entropy(torch.full((3, 4), 0.25), normalised=True), torch.ones(3))


def test_entropy_matches_scipy():
    from scipy.stats import entropy as sp_entropy

    rng = np.random.default_rng(3)
    p = random_dists(rng, 50, 12)
    np.testing.assert_allclose(entropy(torch.tensor(p)).numpy(), sp_entropy(p, axis=-1), atol=1e-12)


def test_entropy_over_the_last_dim_of_a_per_head_batch_nan_only_where_a_row_holds_one():
    """(2 instances, 3 heads, 4 tokens): each row's entropy over its tokens; a NaN in instance 1, head 2 makes that
    row NaN and no other."""
    p = torch.full((2, 3, 4), 0.25, dtype=torch.float64)
    p[0, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    p[1, 2, 3] = float("nan")
    expected = torch.full((2, 3), math.log(4), dtype=torch.float64)
    expected[0, 0], expected[1, 2] = 0.0, float("nan")
    torch.testing.assert_close(entropy(p), expected, equal_nan=True)
    assert entropy(torch.tensor([0.5, 0.5], dtype=torch.float64)).item() == pytest.approx(math.log(2))


# ---------------------------------------------------------------- Kendall τ-b


def scipy_rows(x: np.ndarray, y: np.ndarray, mask: np.ndarray):
    """scipy's kendalltau per row, and whether scipy's 'auto' took the exact branch (its rule)."""
    taus, ps, exact = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for xi, yi, mi in zip(x, y, mask):
            a, b = xi[mi], yi[mi]
            r = kendalltau(a, b)
            taus.append(r.statistic)
            ps.append(r.pvalue)
            n = a.size
            no_ties = len(np.unique(a)) == n and len(np.unique(b)) == n
            if no_ties and n >= 2:
                sa, sb = np.sign(a[:, None] - a[None]), np.sign(b[:, None] - b[None])
                dis = int((sa * sb < 0).sum()) // 2
                exact.append(n <= 33 or min(dis, n * (n - 1) // 2 - dis) <= 1)
            else:
                exact.append(False)
    return np.array(taus, dtype=float), np.array(ps, dtype=float), np.array(exact)


def assert_matches_scipy(tau, p, ref_tau, ref_p):
    tau, p = tau.numpy(), p.numpy()
    np.testing.assert_array_equal(np.isnan(tau), np.isnan(ref_tau))
    np.testing.assert_array_equal(np.isnan(p), np.isnan(ref_p))
    np.testing.assert_allclose(tau, ref_tau, rtol=1e-6, atol=1e-6, equal_nan=True)
    # relative: tiny p-values (exact 2/n!, far tails of the normal) must agree too
    np.testing.assert_allclose(p, ref_p, rtol=1e-6, atol=1e-300, equal_nan=True)


def kendall_batch(seed: int, B: int = 400, T: int = 60):
    """A padded batch mixing tied integer data and continuous data, lengths 0..T, mask anywhere."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, T))
    y = 0.4 * x + rng.normal(size=(B, T))  # some correlation, so p-values spread out
    kind = rng.integers(0, 4, B)
    ties_x = kind % 2 == 1
    ties_y = kind >= 2
    x[ties_x] = rng.integers(0, 4, (ties_x.sum(), T))
    y[ties_y] = rng.integers(0, 4, (ties_y.sum(), T))
    lengths = rng.integers(0, T + 1, B)
    lengths[:6] = [0, 1, 2, 3, 34, T]
    mask = np.zeros((B, T), dtype=bool)
    for i, n in enumerate(lengths):
        if i % 3 == 0:
            mask[i, :n] = True  # real entries first
        else:
            mask[i, rng.choice(T, n, replace=False)] = True  # real entries anywhere
    # perfectly (anti-)ordered rows: min(P, Q) ≤ 1 → exact branch for n > 33
    for i, sign in ((6, 1.0), (7, -1.0)):
        mask[i] = True
        x[i] = np.arange(T, dtype=float)
        y[i] = sign * x[i]
    mask[8] = True
    x[8] = np.arange(T, dtype=float)
    y[8] = x[8].copy()
    y[8][[10, 11]] = y[8][[11, 10]]  # one discordant pair
    # infinite values are ordinary (extreme) values, also when the padding is not at the end
    x[11, [0, 3, 5]] = [np.inf, -np.inf, np.inf]
    mask[11, :8] = False
    mask[11, [0, 3, 5]] = True
    # constant rows → NaN
    x[9] = 2.0
    mask[9, :20] = True
    y[10] = -1.0
    mask[10, 5:30] = True
    # padding holds garbage (including equal values and NaN) that must be ignored
    x[~mask] = rng.integers(0, 4, (~mask).sum())
    y[~mask] = np.where(rng.random((~mask).sum()) < 0.5, np.nan, 1.0)
    return x, y, mask


def test_kendall_matches_scipy_both_branches():
    x, y, mask = kendall_batch(0)
    tau, p = kendall_tau_b(torch.tensor(x), torch.tensor(y), torch.tensor(mask))
    assert tau.dtype == p.dtype == torch.float64
    ref_tau, ref_p, exact = scipy_rows(x, y, mask)
    assert_matches_scipy(tau, p, ref_tau, ref_p)
    defined = ~np.isnan(ref_tau)
    n = mask.sum(1)
    # both p-value branches exercised, the exact one also beyond n = 33, and NaN rows present
    assert exact.sum() >= 20 and (defined & ~exact).sum() >= 50
    assert (exact & (n > 33)).sum() >= 3
    assert np.isnan(ref_tau[[0, 1, 9, 10]]).all() and not np.isnan(ref_tau[2])
    # ties on at least one side in many rows, and tiny exact p-values reproduced
    assert ref_p[6] < 1e-70 and np.isclose(tau[6].item(), 1.0) and np.isclose(tau[7].item(), -1.0)


def test_kendall_continuous_small_n_exact():
    rng = np.random.default_rng(5)
    B, T = 300, 33
    x = rng.normal(size=(B, T))
    y = 0.3 * x + rng.normal(size=(B, T))
    lengths = rng.integers(1, T + 1, B)
    mask = np.arange(T)[None] < lengths[:, None]
    tau, p = kendall_tau_b(torch.tensor(x), torch.tensor(y), torch.tensor(mask))
    ref_tau, ref_p, exact = scipy_rows(x, y, mask)
    assert exact[lengths >= 2].all()
    assert_matches_scipy(tau, p, ref_tau, ref_p)


def test_kendall_chunk_size_and_float32():
    x, y, mask = kendall_batch(1, B=150)
    xt, yt, mt = torch.tensor(x), torch.tensor(y), torch.tensor(mask)
    tau, p = kendall_tau_b(xt, yt, mt)
    for cs in (1, 7, 1000):
        tau_c, p_c = kendall_tau_b(xt, yt, mt, chunk_size=cs)
        torch.testing.assert_close(tau_c, tau, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(p_c, p, rtol=0, atol=0, equal_nan=True)
    # float32 inputs (integers and these normals are compared exactly after the cast) → float32 output
    x32, y32 = xt.float(), yt.float()
    tau32, p32 = kendall_tau_b(x32, y32, mt)
    assert tau32.dtype == torch.float32
    ref_tau, ref_p, _ = scipy_rows(x32.double().numpy(), y32.double().numpy(), mask)
    np.testing.assert_allclose(tau32.numpy(), ref_tau, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(p32.numpy(), ref_p, atol=1e-6, equal_nan=True)


def test_kendall_long_rows_and_nan():
    rng = np.random.default_rng(7)
    # rows longer than 2040 (the packed-count fast path's limit), one nearly reversed (≈ every pair
    # discordant, which would overflow byte counters), and a mid-length one
    T = 2100
    x = rng.integers(0, 50, (4, T)).astype(float)
    y = x + rng.integers(0, 30, (4, T))
    y[3] = -100 * x[3] + rng.integers(0, 30, T)
    mask = np.ones((4, T), dtype=bool)
    mask[1, 500:] = False
    x[2, 7] = np.nan  # a NaN among real entries → NaN, as scipy's default nan_policy='propagate'
    tau, p = kendall_tau_b(torch.tensor(x), torch.tensor(y), torch.tensor(mask))
    ref_tau, ref_p, _ = scipy_rows(x, y, mask)
    assert np.isnan(ref_tau[2]) and np.isnan(ref_p[2])
    assert_matches_scipy(tau, p, ref_tau, ref_p)


@pytest.mark.parametrize(
    ("x_dtype", "y_dtype", "expected"),
    [
        (torch.float32, torch.float64, torch.float64),
        (torch.float64, torch.float32, torch.float64),
        (torch.int64, torch.float32, torch.float32),
        (torch.int64, torch.int64, torch.float64),
    ],
)
def test_kendall_answers_in_the_promoted_floating_dtype_of_both_inputs(x_dtype, y_dtype, expected):
    x = torch.tensor([[1, 2, 3, 4]], dtype=x_dtype)
    y = torch.tensor([[1, 3, 2, 4]], dtype=y_dtype)
    tau, p = kendall_tau_b(x, y)
    assert tau.dtype == p.dtype == expected
    # one discordant pair of six: τ = (5 − 1)/6; exact p = 2·(1 + 3)/4! (no or one inversion among 4 items)
    assert tau.item() == pytest.approx(4 / 6) and p.item() == pytest.approx(8 / 24)


@pytest.mark.parametrize("n", [170, 171, 172, 173])
def test_kendall_exact_tails_past_the_factorials_float_range_are_scipys(n):
    """A perfect order (Q = 0) has p = 2/n!, one swapped pair (Q = 1) p = 2/(n − 1)!; scipy's float factorial
    overflows from 171! on, so it answers 0 there — 2/171! as a subnormal float would not be scipy's answer."""
    x = np.arange(n, dtype=float)
    swapped = x.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    rows_x, rows_y = np.stack([x, x, x]), np.stack([x, swapped, -x])
    _, p = kendall_tau_b(torch.tensor(rows_x), torch.tensor(rows_y))
    by_hand = [2 / math.factorial(n) if n < 171 else 0.0, 2 / math.factorial(n - 1) if n < 172 else 0.0]
    expected = [by_hand[0], by_hand[1], by_hand[0]]
    np.testing.assert_array_equal(p.numpy(), expected)
    np.testing.assert_array_equal(expected, scipy_rows(rows_x, rows_y, np.ones_like(rows_x, dtype=bool))[1])


def test_kendall_of_one_text_too_long_for_two_rows_per_pairwise_chunk():
    """One row of 5800 entries: 5800² pairwise comparisons exceed the 2**25 bound, so the chunk holds that row
    alone (and no more rows than the batch has): scipy's τ and p."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 5800))
    y = 0.2 * x + rng.normal(size=x.shape)
    mask = np.ones_like(x, dtype=bool)
    tau, p = kendall_tau_b(torch.tensor(x), torch.tensor(y), torch.tensor(mask))
    assert_matches_scipy(tau, p, *scipy_rows(x, y, mask)[:2])


def test_snap_ties_counts_a_nan_score_as_zero_and_zeroes_what_is_off_the_mask():
    """NaN → 0 before the row's scale is taken: the largest magnitude on the mask stays 0.5 (step 5e-10), so 0.5
    and 0.5 − 1e-10 are one tie, the NaN entry is 0, and so is the 0.7 off the mask."""
    scores = torch.tensor([[float("nan"), 0.5, 0.5 - 1e-10, 0.25, 0.7]], dtype=torch.float64)
    got = snap_ties(scores, torch.tensor([[True, True, True, True, False]]))
    assert got[0, 0].item() == 0.0 and got[0, 4].item() == 0.0
    assert got[0, 1].item() == got[0, 2].item() == pytest.approx(0.5, abs=1e-15)
    assert got[0, 3].item() == pytest.approx(0.25, abs=1e-15)


def test_kendall_no_mask_and_tiny_rows():
    x = torch.tensor([[12.0, 2, 1, 12, 2], [1.0, 2, 3, 4, 5]], dtype=torch.float64)
    y = torch.tensor([[1.0, 4, 7, 1, 0], [5.0, 4, 3, 2, 1]], dtype=torch.float64)
    tau, p = kendall_tau_b(x, y)
    # the example of scipy's docstring, and a perfect reversal (exact: 2/5!)
    np.testing.assert_allclose(tau.numpy(), [-0.47140452079103173, -1.0], rtol=1e-12)
    np.testing.assert_allclose(p.numpy(), [0.2827454599327748, 2 / 120], rtol=1e-12)


# ---------------------------------------------------------------- summarise


def bootstrap_by_hand(values, resamples=1000, seed=0):
    """The percentile interval, resample by resample: each draws n values with replacement (numpy's seeded
    generator, one call of rng.integers per chunk of resamples, as the contract says), takes their mean."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(values), size=(resamples, len(values)))
    means = [values[r].mean() for r in rows]
    return tuple(np.quantile(means, [0.025, 0.975]))


def test_summarise_known_values():
    s = summarise(np.array([1.0, 2.0, np.nan, 4.0]))
    low, high = bootstrap_by_hand([1.0, 2.0, 4.0])
    assert s == pytest.approx(
        {"mean": 7 / 3, "ci_low": low, "ci_high": high, "std": math.sqrt(14 / 9), "median": 2.0, "n": 3}
    )
    # three values: every resample's mean is one of the 10 multisets' means, from 1 to 4
    assert 1.0 <= low < 7 / 3 < high <= 4.0 and low in {1.0, 4 / 3, 5 / 3, 2.0} and high in {3.0, 10 / 3, 4.0}
    assert all(type(v) is float for k, v in s.items() if k != "n") and type(s["n"]) is int
    assert "sig_frac" not in s

    values = torch.tensor([3.0, 1.0, 2.0, 10.0, float("nan")])
    s = summarise(values, torch.tensor([0.01, 0.05, 0.5, float("nan"), 0.0], dtype=torch.float64))
    assert s["median"] == 2.5 and s["n"] == 4 and s["mean"] == 4.0
    assert s["std"] == pytest.approx(math.sqrt((1 + 9 + 4 + 36) / 4))  # population (ddof = 0)
    # p ≤ 0.05 among the 4 non-NaN values: 0.01 and 0.05 (NaN p counts as not significant; the row with
    # a NaN value is not counted even though its p is 0)
    assert s["sig_frac"] == 0.5
    assert summarise([1.0, 2.0], [0.2, 0.3], threshold=0.25)["sig_frac"] == 0.5

    empty = summarise([float("nan")], [0.01])
    assert empty["n"] == 0 and math.isnan(empty["mean"]) and math.isnan(empty["sig_frac"])


def test_bootstrap_interval_covers_a_known_mean_at_the_nominal_rate():
    """Percentile bootstrap of the mean of n = 60 skew-free draws: over 400 simulated samples the 95 %
    interval holds the true mean 0.93–0.97 of the time (a little under 0.95 is the method's known
    small-sample behaviour); a std-sized interval would cover ~100 %, a half-width one ~70 %."""
    rng = np.random.default_rng(123)
    trials, n, mu = 400, 60, 0.3
    covered = 0
    for t in range(trials):
        low, high = bootstrap_ci(rng.normal(mu, 1.0, size=n), seed=t)
        covered += low <= mu <= high
    assert 0.91 <= covered / trials <= 0.975


@pytest.mark.parametrize("n", [7, 1000])
def test_bootstrap_interval_is_the_quantiles_of_resampled_means(n):
    """n = 1000 = the number of resamples: a mean over the wrong axis would not even change a shape there."""
    values = np.random.default_rng(n).exponential(size=n)
    assert bootstrap_ci(values) == pytest.approx(bootstrap_by_hand(values), rel=1e-12)
    assert bootstrap_ci(values, seed=5) == pytest.approx(bootstrap_by_hand(values, seed=5), rel=1e-12)


def test_bootstrap_interval_shrinks_as_n_grows_and_is_reproducible():
    rng = np.random.default_rng(0)
    data = rng.exponential(size=6400)
    widths = [np.subtract(*bootstrap_ci(data[:n])[::-1]) for n in (100, 400, 1600, 6400)]
    assert all(a > b for a, b in zip(widths, widths[1:]))
    assert widths[0] / widths[-1] == pytest.approx(8.0, rel=0.25)  # ∝ 1/√n
    assert bootstrap_ci(data[:100]) == bootstrap_ci(data[:100])  # seeded
    assert bootstrap_ci([np.nan, 2.0]) == (2.0, 2.0) and all(map(math.isnan, bootstrap_ci([np.nan])))
    # two values 0 and 1: a resample's mean is 0, ½ or 1 (chance ¼, ½, ¼), so the 2.5 % and 97.5 % quantiles of
    # 1000 resamples are 0 and 1 — an interval, not the first value twice
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0) == bootstrap_by_hand([0.0, 1.0])
    low, high = bootstrap_ci(data[:1000], resamples=1000)
    assert low < data[:1000].mean() < high


def test_bootstrap_of_a_statistic_of_several_means_resamples_rows_together():
    """bootstrap_ci_of: every resample draws n rows (seeded as bootstrap_ci), the statistic is taken of the
    resampled column means — here the F1 of a mean precision and recall, written out resample by resample."""
    from attn_study.stats import bootstrap_ci_of

    rng = np.random.default_rng(7)
    columns = rng.random((40, 2))
    columns[3, 1] = np.nan  # a row with a NaN is left out whole

    def f1(m):
        return 2 * m[..., 0] * m[..., 1] / (m[..., 0] + m[..., 1])

    value, low, high = bootstrap_ci_of(f1, columns, resamples=500, seed=3)
    kept = np.delete(columns, 3, axis=0)
    draws = np.random.default_rng(3).integers(0, len(kept), size=(500, len(kept)))
    by_hand = [f1(kept[rows].mean(0)) for rows in draws]
    assert value == pytest.approx(f1(kept.mean(0)))
    assert (low, high) == pytest.approx(tuple(np.quantile(by_hand, [0.025, 0.975])))
    # one column and the identity: the interval of its mean
    assert bootstrap_ci_of(lambda m: m[..., 0], kept[:, :1])[1:] == pytest.approx(bootstrap_ci(kept[:, 0]))
