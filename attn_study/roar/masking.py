"""Which tokens a ROAR step masks, and the masks applied to a processed dataset.

Per instance with n text tokens (``<sos>``/``<eos>`` never count and are never masked) and m of them masked
already (recursive ROAR: by the earlier steps), a step at fraction k leaves ``[k n]`` masked, so it masks
``[k n] − m`` more (none when that is ≤ 0): the unmasked text tokens with the highest scores, exact ties broken by a
uniform key drawn from (seed, split, instance index), so the masks are a function of the scores and the seed alone.
``[k n]`` is ``roar.rounding``'s: ``half_up`` (round(k n), halves up) or ``floor`` (⌊k n⌋, Madsen et al.'s code:
``int(k/100 · n)`` of the n unpadded text tokens).
"""

from __future__ import annotations

import math

import numpy as np

from attn_study.data.example import SPLITS
from attn_study.errors import DataError

#: one independent stream of tie-breaking keys (numpy's default_rng([seed, split, index, STREAM]))
STREAM = 0x40A2


ROUNDINGS = ("half_up", "floor")


def masked_count(fraction: float, n: int, rounding: str = "half_up") -> int:
    """How many of an instance's n text tokens a step at fraction k leaves masked: round(k n) with halves up
    (``half_up``), or ⌊k n⌋ (``floor``); 1e-9 absorbs k n's float error (0.1 · 30 = 3.0000000000000004)."""
    return int(math.floor(fraction * n + (0.5 if rounding == "half_up" else 0.0) + 1e-9))


def tie_keys(seed: int, split: str, index: int, size: int) -> np.ndarray:
    """``size`` uniform keys of instance ``index`` of ``split``: the order among exactly tied scores."""
    return np.random.default_rng([int(seed), SPLITS.index(split), int(index), STREAM]).random(size)


def choose(
    scores: np.ndarray,
    eligible: np.ndarray,
    already: int,
    n_text: int,
    fraction: float,
    keys: np.ndarray,
    rounding: str = "half_up",
) -> np.ndarray:
    """The positions to mask in one instance: the ``[k n] − already`` eligible positions with the highest
    ``scores`` (NaN lowest), ties by the lowest ``keys``; sorted."""
    wanted = max(masked_count(fraction, n_text, rounding) - already, 0)
    candidates = np.flatnonzero(eligible)
    if wanted == 0 or len(candidates) == 0:
        return np.zeros(0, dtype=np.int64)
    values = np.nan_to_num(scores[candidates].astype(np.float64), nan=-np.inf)
    order = np.lexsort((keys[candidates], -values))  # last key first: score descending, then tie key
    return np.sort(candidates[order[:wanted]]).astype(np.int64)


def add_token(dataset, token: str) -> int:
    """The id of ``token`` in ``dataset``'s vocabulary, appended (last id) when it is not there yet. A text
    token with that spelling would be indistinguishable from a mask: refused."""
    vocab = dataset.vocab
    if token in vocab.stoi:
        return vocab.stoi[token]
    vocab.itos.append(token)
    vocab.stoi[token] = len(vocab.itos) - 1
    dataset.stats["vocab_size"] = len(vocab.itos)
    return vocab.stoi[token]


def check_token_unused(dataset, token: str) -> None:
    """A mask token that the data's own vocabulary holds (a word of the text) is refused in one line; a tokenizer's
    special token (``[MASK]``: encoder=pretrained's pieces) is in its vocabulary but is no word of a text."""
    if token in dataset.vocab.stoi and token not in getattr(dataset.vocab, "special_tokens", ()):
        raise DataError(
            f"roar.token={token}: the dataset's vocabulary already holds this word, so a masked token would look "
            "like it; choose another roar.token"
        )


def apply(dataset, masks: dict[str, list], token: str) -> int:
    """Replace the positions ``masks[split][i]`` of instance i of each split by ``token`` (in place; the token
    added to the vocabulary when any position is masked). Returns the token's id (−1: nothing masked)."""
    if not any(len(p) for positions in masks.values() for p in positions):
        return -1
    token_id = add_token(dataset, token)
    for split, positions in masks.items():
        rows = dataset.splits[split]
        if len(positions) != len(rows):
            raise ValueError(f"{split}: masks for {len(positions)} instances, the split has {len(rows)}")
        for ids, where in zip(rows.ids, positions):
            if len(where):
                ids[np.asarray(where, dtype=np.int64)] = token_id
    return token_id


def text_positions(split, i: int) -> np.ndarray:
    """Instance i's text positions (boundary tokens left out)."""
    n = len(split.ids[i])
    return np.arange(1, n - 1) if split.boundary else np.arange(n)


def shares(dataset, masks: dict[str, list]) -> dict[str, float]:
    """Per split, the share of all text tokens that are masked."""
    out = {}
    for split, positions in masks.items():
        rows = dataset.splits[split]
        total = sum(len(text_positions(rows, i)) for i in range(len(rows)))
        out[split] = sum(len(p) for p in positions) / max(total, 1)
    return out
