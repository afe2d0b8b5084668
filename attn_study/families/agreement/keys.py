"""Agreement between explanation methods (Neely et al. 2022, "A Song of (Dis)agreement"): the family's metric
keys, under ``ag/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.families.faithfulness.keys import TOKEN_METHODS  # the explorer names the same methods alike
from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "ag"
ORDER = 55  # the family's place in the report (its sections come in ORDER)

#: the methods in the order of the table: a Transformer's layer attention through α first, then the pooling
#: attention, then the attributions (what each computes: analysis.aggregation.AGGREGATIONS, importance.METHODS)
AG_METHODS = (
    "raw",
    "rollout",
    "flow",
    "norms",
    "attention",
    "gradient",
    "grad_norm",
    "input_x_gradient",
    "integrated_gradients",
    "loo",
)
#: short names in the table
SHORT = {
    "raw": "raw",
    "rollout": "rollout",
    "flow": "flow",
    "norms": "norms",
    "attention": "attention α",
    "gradient": "gradient",
    "grad_norm": "‖gradient‖",
    "input_x_gradient": "input×grad",
    "integrated_gradients": "IG",
    "loo": "LOO",
}
_ABNAR = "Abnar & Zuidema 2020, their Transformer's layers 5–6, vs blank-out (their Figure: approximate)"
#: numbers published beside which ours are shown — different models and data, never to be matched:
#: (method a, method b, value, statistic, where it comes from)
REFERENCES = (
    ("attention", "integrated_gradients", 0.109, "Kendall τ", "Neely et al. 2022, SST-2, BiLSTM with attention"),
    ("rollout", "integrated_gradients", 0.051, "Kendall τ", "Neely et al. 2022, SST-2, DistilBERT"),
    ("rollout", "loo", 0.7, "Spearman ρ (≈)", _ABNAR),
    ("flow", "loo", 0.7, "Spearman ρ (≈)", _ABNAR),
    ("raw", "loo", 0.25, "Spearman ρ (≈ 0.2–0.3)", _ABNAR),
)


def ag(*parts) -> str:
    """``ag('loo', 'rollout', 'tau', 'mean')`` → ``ag/loo/rollout/tau/mean``."""
    return key(NAMESPACE, *parts)


def pair(a: str, b: str) -> tuple[str, str]:
    """The two methods in the one order of every key and column: alphabetical (``attention``, ``flow``)."""
    return (a, b) if a <= b else (b, a)


def tau_key(a: str, b: str, stat: str) -> str:
    """The summary key of τ(a, b) in either order: ``ag/attention/flow/tau/mean``."""
    return ag(*pair(a, b), "tau", stat)


def pair_column(a: str, b: str) -> str:
    """The per-instance column of τ(a, b) in either order: ``tau_loo__rollout``."""
    first, second = pair(a, b)
    return f"tau_{first}__{second}"


def pairs(methods) -> list[tuple[str, str]]:
    """Every pair of ``methods`` once, each in :func:`pair`'s order, the pairs sorted."""
    chosen = sorted(set(methods))
    return [(a, b) for i, a in enumerate(chosen) for b in chosen[i + 1 :]]


TRACKED = ()  # nothing is measured during training

#: the per-instance columns by which an instance disagrees most (the explorer's ★, W&B's coloured sample): the
#: lowest τ of attention with an attribution, else of two attributions
DISAGREEMENT = tuple(
    (pair_column(a, b), "low")
    for a, b in (
        ("attention", "gradient"),
        ("attention", "loo"),
        ("attention", "integrated_gradients"),
        ("gradient", "loo"),
    )
)
#: the statistics a team sorts runs by (W&B's headline/…; those a run has): attention against the attributions
#: Neely et al. compare it with, and rollout against leave-one-out
HEADLINE_KEYS = (
    tau_key("attention", "gradient", "mean"),
    tau_key("attention", "integrated_gradients", "mean"),
    tau_key("attention", "loo", "mean"),
    tau_key("rollout", "loo", "mean"),
)
#: the figure of a run's mean τ between every two methods
FIGURE = "tau_matrix.png"

#: the explorer's columns shown at first (beside the ★ one): the headline τs per instance → their headers
INSTANCE_HEADLINE = {
    pair_column(a, b): f"τ({TOKEN_METHODS.get(a, (a,))[0]}, {TOKEN_METHODS.get(b, (b,))[0]})"
    for a, b in (key.split("/")[1:3] for key in HEADLINE_KEYS)
}
