"""The embedded default task: synthetic sentiment with known rationales, generated from a seed.

Each sentence is a run of neutral filler words into which 1 or 3 *signal* words are placed
(positive or negative). A signal word directly preceded by a negator (``not``, ``never``, …) has its
polarity flipped. The label is 1 when the (flipped) polarities sum to > 0, else 0; with an odd number
of signals there is never a tie. Negators are also scattered before filler words, where they do
nothing, so a bag of words cannot tell whether a negation applies: the model must read the word order.

The ground-truth rationale of an instance is the positions of its signal words and of the negators
that flip them. Everything is a pure function of the seed: no files are read or written.
"""

from __future__ import annotations

import numpy as np

from attn_study.data.example import SPLITS, RawExample
from attn_study.data.source import Source

POSITIVE = (
    "good great excellent wonderful superb brilliant delightful charming moving gripping "
    "enjoyable beautiful clever touching masterful"
).split()
NEGATIVE = (
    "bad awful terrible boring dull clumsy tedious weak bland painful mediocre lifeless pointless messy forgettable"
).split()
NEGATORS = "not never hardly".split()
FILLER = (
    "the a an this that film movie story plot cast director scene scenes script actor actress "
    "camera music score ending beginning middle character characters dialogue pace tone it was is "
    "seems feels looks felt seemed with and of in on at by for from as to its their his her some "
    "every whole entire final first second new old long short quite rather fairly somewhat really "
    "overall perhaps still just also even though while when then there here which who where what "
    "sequel drama comedy thriller romance audience theatre screen performance role studio budget "
    "minutes hours night day year time moment way part kind sort lot bit piece work effort attempt"
).split()


class SyntheticSource(Source):
    """Deterministic synthetic sentiment data with negation and ground-truth rationales.

    Its cache key is its instance attributes (``fingerprint``), so the generator settings are all it stores."""

    name = "synthetic"
    num_classes = 2
    label_names = ["negative", "positive"]

    def __init__(
        self,
        n_train: int = 3000,
        n_dev: int = 500,
        n_test: int = 1000,
        min_length: int = 8,
        max_length: int = 30,
        negation_prob: float = 0.4,
        decoy_negators: float = 1.0,
        seed: int = 0,
    ):
        if not 1 <= min_length <= max_length:
            raise ValueError(f"dataset.source: need 1 <= min_length <= max_length, got {min_length}, {max_length}")
        if min_length < 6:
            raise ValueError("dataset.source.min_length must be >= 6 (room for 3 negated signals)")
        self.sizes = {"train": n_train, "dev": n_dev, "test": n_test}
        self.min_length, self.max_length = min_length, max_length
        self.negation_prob, self.decoy_negators = negation_prob, decoy_negators
        self.seed = seed

    def fingerprint(self) -> dict:
        return {"source": type(self).__name__, **self.__dict__}

    def load(self) -> dict[str, list[RawExample]]:
        # one independent stream per split, so changing n_test never changes the training data
        rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(len(SPLITS))]
        return {
            split: [self._instance(rng, f"{split}-{i}") for i in range(self.sizes[split])]
            for split, rng in zip(SPLITS, rngs)
        }

    def sample(self, rng: np.random.Generator, uid: str = "x") -> RawExample:
        """One instance drawn with ``rng`` (exposed for tests)."""
        return self._instance(rng, uid)

    def _instance(self, rng: np.random.Generator, uid: str) -> RawExample:
        length = int(rng.integers(self.min_length, self.max_length + 1))
        words = list(rng.choice(FILLER, size=length))
        n_signals = 1 if rng.random() < 0.5 else 3
        # signal slots never adjacent, so a negator slot (slot - 1) never hits another signal
        slots = np.sort(rng.choice(np.arange(1, length, 2), size=n_signals, replace=False))
        total, rationale = 0, []
        for slot in slots:
            polarity = 1 if rng.random() < 0.5 else -1
            words[slot] = str(rng.choice(POSITIVE if polarity > 0 else NEGATIVE))
            rationale.append(int(slot))
            if rng.random() < self.negation_prob:
                words[slot - 1] = str(rng.choice(NEGATORS))
                rationale.append(int(slot - 1))
                polarity = -polarity
            total += polarity
        free = [i for i in range(length) if i not in rationale and i + 1 not in slots]
        n_decoys = rng.poisson(self.decoy_negators)
        for i in rng.permutation(free)[:n_decoys]:
            # a decoy negator never stands right before a signal word (the free list excludes those)
            words[int(i)] = str(rng.choice(NEGATORS))
        return RawExample(uid=uid, text=" ".join(words), label=int(total > 0), rationale=tuple(sorted(rationale)))
