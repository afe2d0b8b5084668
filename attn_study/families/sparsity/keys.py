"""Meister et al. (2021), Is Sparse Attention more Interpretable?: the family's metric keys, under ``sp/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "sp"
ORDER = 30  # the family's place in the report (its sections come in ORDER)

#: per-instance distributions over the real tokens whose normalised entropy is reported (sp/entropy/<name>/…)
SP_DISTRIBUTIONS = {
    "attention": "α",
    "g_input": "g_ŷ(x): ‖∂ℓ_ŷ/∂e_i‖, ℓ the log-odds (Eq. 4's ‖∂ŷ/∂e_i‖ ÷ ŷ(1−ŷ): one distribution)",
    "loo_input": "D_ŷ(x): |ŷ − ŷ₋ᵢ|, token deleted, Eq. 6",
    "g_intermediate": "g_ŷ(h): ‖∂ℓ_ŷ/∂h_i‖, ℓ the log-odds (‖∂ŷ/∂h_i‖ ÷ ŷ(1−ŷ): one distribution)",
    "loo_intermediate": "D_ŷ(h): |ŷ − ŷ|h_i erased from α|",
    "g_hidden": "g_{h_p}(x): ‖∂‖h_p‖/∂e_i‖, Eq. 5; mean over p (Table 1)",
}
#: Kendall τ-b of α with each feature importance (sp/tau/<name>/…): name → distribution
SP_CORRELATIONS = {
    "attn_g_input": "g_input",
    "attn_loo_input": "loo_input",
    "attn_g_intermediate": "g_intermediate",
    "attn_loo_intermediate": "loo_intermediate",
}


def sp(*parts) -> str:
    """``sp('entropy', 'g_input', 'mean')`` → ``sp/entropy/g_input/mean``."""
    return key(NAMESPACE, *parts)


#: statistics drawn against the epoch when tracked during training (analysis/sparsity/epochs.png, the report)
TRACKED = (
    sp("entropy", "g_input", "mean"),
    sp("entropy", "g_hidden", "mean"),
    sp("tau", "attn_g_input", "mean"),
    sp("tau", "attn_g_intermediate", "mean"),
    sp("support", "frac", "mean"),
)

#: the per-instance columns by which an instance disagrees most (the explorer's ★, W&B's coloured sample): attention
#: ranking tokens unlike the input's or the intermediate representations' importance (low τ)
DISAGREEMENT = tuple((f"tau_{name}", "low") for name in SP_CORRELATIONS)
#: the explorer's columns shown at first (beside the ★ one): the headline measures per instance → their headers
INSTANCE_HEADLINE = {
    **{f"entropy_{name}": f"entropy of {name}" for name in ("attention", "g_input", "g_hidden")},
    **{f"tau_{name}": f"τ(α, {distribution})" for name, distribution in SP_CORRELATIONS.items()},
    "support_frac": "support / length",
}
#: the explorer's page name and one-line definition of each per-token score it records but attention (tokens.parquet)
TOKEN_METHODS = {
    name: (name, SP_DISTRIBUTIONS[name]) for name in ("g_input", "loo_input", "g_intermediate", "loo_intermediate")
}
