"""Splitting helpers shared by the dataset sources."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attn_study.errors import UserError


def stratified_indices(labels: Sequence[int], size: int, seed: int | Sequence[int], option: str) -> list[int]:
    """Sorted positions of ``size`` items drawn per class (largest-remainder shares), seeded.

    ``option`` names the setting that chose ``size``, for the UserError when it does not leave at
    least one item out (``0 < size < len(labels)`` is required).
    """
    if not 0 < size < len(labels):
        raise UserError(
            f"{option}={size}: must be between 1 and {len(labels) - 1} (the number of "
            f"instances it is drawn from, minus one)"
        )
    label_array = np.asarray(labels)
    classes = np.unique(label_array)
    counts = np.array([np.count_nonzero(label_array == c) for c in classes])
    exact = counts * size / len(labels)
    shares = np.floor(exact).astype(int)
    remainder = size - int(shares.sum())
    shares[np.argsort(-(exact - shares), kind="stable")[:remainder]] += 1
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for c, share in zip(classes, shares):
        members = np.flatnonzero(label_array == c)
        chosen.extend(int(i) for i in rng.choice(members, size=share, replace=False))
    return sorted(chosen)


def train_test_split_positions(n: int, test_size: float, random_state: int) -> list[int]:
    """Sorted positions of the test part of scikit-learn's ``train_test_split(range(n), test_size=test_size,
    random_state=random_state)`` (a fraction), reproduced without scikit-learn: its ``ShuffleSplit`` takes the first
    ⌈test_size·n⌉ of ``numpy.random.RandomState(random_state).permutation(n)`` (what the authors' released code
    used to carve dev sets out of train)."""
    size = math.ceil(test_size * n)
    return sorted(int(i) for i in np.random.RandomState(random_state).permutation(n)[:size])
