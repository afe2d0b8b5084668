"""What every analysis family shares: which instances of which split it analyses."""

from __future__ import annotations

import numpy as np


class SplitAnalysis:
    """An analysis over one split (``split``), optionally a reproducible random subsample of
    ``max_instances`` instances drawn with ``subsample_seed``."""

    split: str = "test"
    max_instances: int | None = None
    subsample_seed: int = 0

    def instances(self, datamodule) -> np.ndarray:
        """Indices of the split to analyse: all, or a reproducible subsample of ``max_instances``."""
        n = len(datamodule.split(self.split))
        if self.max_instances is None or self.max_instances >= n:
            return np.arange(n)
        rng = np.random.default_rng(self.subsample_seed)
        return np.sort(rng.choice(n, size=self.max_instances, replace=False))
