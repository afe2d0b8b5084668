"""Label-independent marker tokens injected into every text (Bai et al. 2021's intuitive experiment).

Bai et al. show "combinatorial shortcuts" by adding tokens that carry no information about the label
and watching attention select them anyway. Here ``dataset.inject.count=N`` inserts N markers into every
instance of every split, after tokenisation and the length filter (``count: 0``, the default, is off):

- the markers of an instance are ``count`` distinct tokens drawn uniformly from ``tokens`` (so ``count`` ≤
  their number), independently of the text and the label — two copies of one marker would leave no choice
  between them, capping how well *which* marker attention picks can carry anything;
- its position is ``random`` (``count`` distinct slots drawn uniformly among the length + count
  positions of the new sequence), ``start``, ``end``, or a list of positions in the new sequence
  (clipped to it, kept distinct);
- the draws come from a generator seeded by ``seed`` and the instance's split and uid, so they are the
  same whatever else is in the dataset, and never depend on the label.

So the markers are distributed identically in every class by construction (the only thing a
``random`` position shares with the text is the text's length). Ground-truth rationales move with the
tokens they point at. Marker tokens are never lower-cased or mapped to ``<unk>``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from attn_study import ranges
from attn_study.errors import DataError

POSITIONS = ("random", "start", "end")


@dataclass(frozen=True)
class Injection:
    tokens: tuple[str, ...] = ("<m1>", "<m2>")
    count: int = 2
    positions: str | tuple[int, ...] = "random"
    seed: int = 0

    def __post_init__(self):
        if not self.tokens or any(not str(t).strip() or " " in str(t) for t in self.tokens):
            raise DataError(f"dataset.inject.tokens={list(self.tokens)}: give one or more tokens without spaces")
        ranges.require("dataset.inject.count", self.count, DataError, ranges.SIZE)  # built only to inject
        if len(set(self.tokens)) != len(self.tokens):
            raise DataError(f"dataset.inject.tokens={list(self.tokens)}: a token is listed twice; list each once")
        if int(self.count) > len(self.tokens):
            raise DataError(
                f"dataset.inject.count={self.count}: an instance's markers are distinct tokens, and "
                f"dataset.inject.tokens has {len(self.tokens)}; give at least {self.count}"
            )
        if isinstance(self.positions, str) and self.positions not in POSITIONS:
            raise DataError(
                f"dataset.inject.positions={self.positions}: choose {list(POSITIONS)} or a list of positions"
            )
        if not isinstance(self.positions, str) and len(self.positions) != int(self.count):
            raise DataError(
                f"dataset.inject.positions={list(self.positions)}: give one position per marker (count={self.count})"
            )

    @classmethod
    def from_config(cls, spec: dict | None) -> Injection | None:
        """The injection ``dataset.inject`` asks for; None when off (no node, or ``count: 0``)."""
        if not spec or int(spec.get("count", 0)) == 0:
            return None
        spec = dict(spec)
        unknown = set(spec) - {"tokens", "count", "positions", "seed"}
        if unknown:
            raise DataError(f"dataset.inject: unknown options {sorted(unknown)}; use tokens, count, positions, seed")
        positions = spec.get("positions", "random")
        return cls(
            tokens=tuple(str(t) for t in spec.get("tokens", cls.tokens)),
            count=int(spec.get("count", 2)),
            positions=positions if isinstance(positions, str) else tuple(int(p) for p in positions),
            seed=int(spec.get("seed", 0)),
        )

    def slots(self, length: int, rng: np.random.Generator) -> np.ndarray:
        """Sorted positions of the markers in the new sequence of ``length + count`` tokens."""
        total = length + self.count
        if self.positions == "random":
            return np.sort(rng.choice(total, size=self.count, replace=False))
        if self.positions == "start":
            return np.arange(self.count)
        if self.positions == "end":
            return np.arange(length, total)
        slots = []
        for i, p in enumerate(sorted(int(p) for p in self.positions)):  # i-th marker: in [i, total - count + i]
            p = min(max(p, i), total - self.count + i)
            slots.append(max(p, slots[-1] + 1) if slots else p)
        return np.asarray(slots)

    def apply(self, tokens: list[str], rationale: tuple[int, ...] | None, split: str, uid: str):
        """(tokens with the markers, marker positions, rationale positions in the new sequence)."""
        rng = np.random.default_rng([self.seed, zlib.crc32(f"{split}/{uid}".encode())])
        slots = self.slots(len(tokens), rng)
        chosen = rng.choice(len(self.tokens), size=self.count, replace=False)  # distinct markers
        total = len(tokens) + self.count
        is_marker = np.zeros(total, dtype=bool)
        is_marker[slots] = True
        new_index = np.flatnonzero(~is_marker)  # where original token j lands
        out = [""] * total
        for j, t in enumerate(tokens):
            out[new_index[j]] = t
        for slot, c in zip(slots, chosen):
            out[slot] = self.tokens[c]
        moved = None if rationale is None else tuple(int(new_index[j]) for j in rationale if j < len(tokens))
        return out, tuple(int(s) for s in slots), moved
