"""Splitting helpers shared by the dataset sources."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attn_study.errors import DataError, UserError


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


def train_test_split(
    items: Sequence,
    random_state: int,
    test_size: float | int | None = None,
    train_size: float | int | None = None,
    stratify: Sequence[int] | None = None,
    what: str = "the split",
) -> tuple[list, list]:
    """scikit-learn's ``train_test_split(items, test_size=…, train_size=…, random_state=…, stratify=…)`` as lists:
    (train part, test part), each in the order scikit-learn returns it — the splitter the authors' released code
    used (Jain & Wallace's IMDB, 20News, AG News and bAbI splits). A fraction ``test_size`` takes ⌈test_size·n⌉
    items, an integer that many; with ``train_size`` alone the train part is ⌊train_size·n⌋ and the test part the
    rest. Unstratified, the test part is the first items of ``numpy.random.RandomState(random_state)
    .permutation(n)``, the train part the next; stratified, per-class shares are drawn as scikit-learn's
    ``StratifiedShuffleSplit`` draws them. Too few items for the sizes (or a class too small to stratify) is a
    DataError naming ``what``."""
    from sklearn.model_selection import train_test_split as sklearn_split

    try:
        train, test = sklearn_split(
            list(items), test_size=test_size, train_size=train_size, random_state=random_state, stratify=stratify
        )
    except ValueError as error:
        raise DataError(f"{what} cannot be drawn from {len(items)} instances: {error}") from error
    return list(train), list(test)
