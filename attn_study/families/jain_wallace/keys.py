"""Jain & Wallace (2019), Attention is not Explanation: the family's metric keys, under ``jw/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "jw"
ORDER = 10  # the family's place in the report (its sections come in ORDER)

#: per-instance Kendall τ columns → the two importance rankings they correlate
CORRELATIONS = {"tau_grad": ("attention", "grad"), "tau_loo": ("attention", "loo"), "tau_grad_loo": ("grad", "loo")}


def jw(statistic: str, stat: str, cls: int | None = None) -> str:
    """``jw('tau_grad', 'mean', 1)`` → ``jw/tau_grad/class_1/mean``; ``statistic`` may hold slashes
    (``perm/median_tvd``, ``adv/emax_jsd``)."""
    return key(NAMESPACE, statistic, class_part(cls), stat)


#: statistics drawn against the epoch when tracked during training (analysis/jain_wallace/epochs.png, the report)
TRACKED = (
    jw("tau_grad", "mean"),
    jw("tau_loo", "mean"),
    jw("perm/median_tvd", "mean"),
    jw("adv/emax_jsd", "mean"),
)

#: the per-instance columns by which an instance disagrees most (the explorer's ★, W&B's coloured sample), in
#: preference order: attention ranking tokens unlike the gradient or leave-one-out (low τ), an adversary far from α
DISAGREEMENT = (("tau_grad", "low"), ("tau_loo", "low"), ("adv_emax_jsd", "high"), ("perm_median_tvd", "low"))
#: the explorer's columns shown at first (beside the ★ one): the headline measures per instance → their headers
INSTANCE_HEADLINE = {
    "tau_grad": "τ(attention, gradient)",
    "tau_loo": "τ(attention, loo TVD)",
    "perm_median_tvd": "permutation: median TVD",
    "adv_emax_jsd": "adversary: ε-max JSD",
}
#: the explorer's page name and one-line definition of each per-token score it records but attention (tokens.parquet)
TOKEN_METHODS = {
    "gradient": (
        "gradient (J&W)",
        "|∇_{e_t} ŷ · e_t| of the predicted class ŷ, attention held constant, normalised to sum 1 over the text "
        "(Algorithm 1; analysis.jain_wallace.detach_attention, gradient_classes)",
    ),
    "loo": ("loo TVD", "TVD(ŷ(x), ŷ(x₋ₜ)): how far deleting token t moves the output distribution, unsigned"),
    "adversarial": (
        "adversarial",
        "the adversarial attention the ε-max JSD chose: far from α with the output within ε (missing where none was)",
    ),
}
