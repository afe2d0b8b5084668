"""Randomisation sanity checks (Adebayo et al., 2018): the family's metric keys, under ``sn/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.families.faithfulness.keys import TOKEN_METHODS  # noqa: F401  the explorer names the same methods alike
from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "sn"
ORDER = 57  # the family's place in the report (its sections come in ORDER)

#: the cascade, from the top of the model down: stage → what is re-initialised (cumulatively with those before it)
STAGES = {
    "decoder": "the output layer(s) after pooling (output; w_context, w_query of a pair model)",
    "attention": "the attention scorer",
    "encoder": "the encoder (and a pair model's question encoder)",
    "embeddings": "the word embeddings",
}
#: the randomised-label test's place in the keys: sn/<method>/labels/… (a model trained on permuted labels, not
#: a stage of the cascade)
LABELS = "labels"
#: rank correlations between the explanation before and after: column suffix → (key part, header)
STATISTICS = {
    "rho": ("spearman", "Spearman ρ"),
    "tau": ("kendall", "Kendall τ-b"),
    "rho_abs": ("spearman_abs", "Spearman ρ of |scores|"),
    "tau_abs": ("kendall_abs", "Kendall τ-b of |scores|"),
}
#: each statistic's magnitude per instance, |ρ| (the headline: a randomised model explains its own prediction, so
#: where the randomisation flips it a signed method's explanation changes sign and ρ is negative)
STATISTICS.update(
    {f"{suffix}_magnitude": (f"{part}_magnitude", f"|{header}|") for suffix, (part, header) in list(STATISTICS.items())}
)
#: the headline statistics: what the family's figure draws
HEADLINE = ("rho_magnitude", "rho_abs_magnitude")


def sn(*parts) -> str:
    """``sn('gradient', 'encoder', 'spearman', 'mean')`` → ``sn/gradient/encoder/spearman/mean``."""
    return key(NAMESPACE, *parts)


#: nothing is tracked during training (the family randomises a copy of the finished model)
TRACKED: tuple[str, ...] = ()

#: the per-instance columns by which an instance fails most (the explorer's ★, W&B's coloured sample): an
#: explanation still like the trained model's once every stage is randomised, or once the labels were (high ρ)
DISAGREEMENT = tuple(
    (f"{method}_{stage}_rho", "high") for stage in ("embeddings", LABELS) for method in ("gradient", "attention")
)
#: the statistics a team sorts runs by (W&B's headline/…): with every parameter redrawn, how much attention's and
#: the gradient's explanations still correlate with the trained model's, |ρ| (a passed check: near 0)
HEADLINE_KEYS = tuple(sn(method, "embeddings", "spearman_magnitude", "mean") for method in ("attention", "gradient"))
#: the explorer's columns shown at first (beside the ★ one): the headline |ρ| per instance → their headers
INSTANCE_HEADLINE = {
    f"{method}_embeddings_rho_magnitude": f"{method}: {STATISTICS['rho_magnitude'][1]}, all redrawn"
    for method in ("attention", "gradient")
}
