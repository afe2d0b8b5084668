"""Randomisation sanity checks (Adebayo et al., 2018): the family's metric keys, under ``sn/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

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


def sn(*parts) -> str:
    """``sn('gradient', 'encoder', 'spearman', 'mean')`` → ``sn/gradient/encoder/spearman/mean``."""
    return key(NAMESPACE, *parts)


#: nothing is tracked during training (the family randomises a copy of the finished model)
TRACKED: tuple[str, ...] = ()
#: the statistics a team sorts runs by (W&B's headline/…): with every parameter redrawn, how much attention's and
#: the gradient's explanations still correlate with the trained model's (a passed check: near 0)
HEADLINE_KEYS = tuple(sn(method, "embeddings", "spearman", "mean") for method in ("attention", "gradient"))
