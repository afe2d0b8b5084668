"""Statistics: the ground floor under ``attn_study.analysis`` (what the families measure) and ``attn_study.figures``
(what is drawn), importing nothing of the package above it.

- ``distributions``: TVD, the drop of a class's probability, Jensen–Shannon divergence, entropy;
- ``kendall``: batched Kendall τ-b with scipy's exact and asymptotic p-values; near-equal scores snapped into ties;
- ``undefined``: why a per-instance statistic is undefined, and how many instances each reason left out;
- ``summaries``: the mean with its percentile-bootstrap interval, std, median, n; the bootstrap of any statistic.

Everything on batches works on torch tensors (float32 or float64, CPU or CUDA) and reduces over the last dimension;
nothing loops in Python over instances.
"""

from __future__ import annotations

from .distributions import LN2, entropy, jsd, probability_drop, tvd
from .kendall import kendall_tau_b, snap_ties
from .summaries import MEAN_STATS, bootstrap_ci, bootstrap_ci_of, summarise
from .undefined import UNDEFINED, dropped_counts, undefined_code, undefined_reason

__all__ = [
    "LN2",
    "MEAN_STATS",
    "UNDEFINED",
    "bootstrap_ci",
    "bootstrap_ci_of",
    "dropped_counts",
    "entropy",
    "jsd",
    "kendall_tau_b",
    "probability_drop",
    "snap_ties",
    "summarise",
    "tvd",
    "undefined_code",
    "undefined_reason",
]
