"""Agreement between explanation methods (Neely et al. 2022, "A Song of (Dis)agreement"): the family's metric
keys, under ``ag/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

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
    """``ag('rollout', 'loo', 'tau', 'mean')`` → ``ag/rollout/loo/tau/mean``."""
    return key(NAMESPACE, *parts)


def pair_column(a: str, b: str) -> str:
    """The per-instance column of τ(a, b): ``tau_rollout__loo``."""
    return f"tau_{a}__{b}"


def pairs(methods) -> list[tuple[str, str]]:
    """Every pair (a, b) of ``methods`` with a before b in :data:`AG_METHODS`' order."""
    ordered = [m for m in AG_METHODS if m in methods]
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]


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
