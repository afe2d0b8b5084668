"""Faithfulness: ERASER's metrics (DeYoung et al., 2020): the family's metric keys, under ``ff/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "ff"
ORDER = 50  # the family's place in the report (its sections come in ORDER)

#: importance methods: name → how it scores token t for the predicted class ŷ (p: its probability)
FF_METHODS = {
    "attention": "α_t, the model's attention",
    "gradient": "|∂p/∂e_t · e_t|, attention detached (Jain & Wallace)",
    "grad_norm": "‖∂ℓ_c/∂e_t‖₂ (ℓ_c the log-odds), through the attention (Meister et al. Eq. 4)",
    "input_x_gradient": "Σ_d e_td ∂p/∂e_td, signed, through the attention (Captum InputXGradient)",
    "integrated_gradients": "IG of p w.r.t. e_t summed over d, zero-embedding baseline, signed, through the "
    "attention (Captum IntegratedGradients)",
    "loo": "p(ŷ|x) − p(ŷ|x₋ₜ), token deleted, signed",
    "random": "a uniformly random ranking (the floor)",
    # a Transformer's layer attention through α (encoder=transformer; analysis.aggregation, last layer, all heads)
    "raw": "Σ_i α_i A_L[i, t]: the last layer's attention, mean over heads",
    "rollout": "attention rollout through α (Abnar & Zuidema 2020)",
    "flow": "attention flow into the pooled vector (Abnar & Zuidema 2020)",
    "norms": "Σ_i α_i ‖Σ_h A^h[i, t] f^h(x_t)‖, the last layer (Kobayashi et al. 2020)",
}
#: the per-method measures of the report: key path → header
FF_MEASURES = {
    "comprehensiveness/aopc": "comprehensiveness AOPC ↑",
    "sufficiency/aopc": "sufficiency AOPC ↓",
    "auprc": "AUPRC vs truth ↑",
    "ap": "AP vs truth ↑",
    "token_f1": "token F1 ↑",
    "iou_f1": "IOU F1 ↑",
    "soft_comprehensiveness": "Soft-NC ↑",
    "soft_sufficiency": "Soft-NS ↑",
    "auc_tp": "AUC-TP ↓",
}
#: measures that are not a mean of per-instance values: the key part holding their point estimate
FF_POINT = {"iou_f1": "value", "auc_tp": "value"}


def ff(*parts) -> str:
    """``ff('loo', 'comprehensiveness', 'aopc', 'mean')`` → ``ff/loo/comprehensiveness/aopc/mean``."""
    return key(NAMESPACE, *parts)


def ff_fraction(fraction: float) -> str:
    """The key part of a rationale size: 0.05 → ``k5`` (percent of the length), 0.025 → ``k2.5``."""
    return f"k{round(float(fraction) * 100, 6):g}"


#: statistics drawn against the epoch when tracked during training (analysis/faithfulness/epochs.png, the report)
TRACKED = (
    ff("attention", "comprehensiveness", "aopc", "mean"),
    ff("loo", "comprehensiveness", "aopc", "mean"),
    ff("attention", "sufficiency", "aopc", "mean"),
    ff("attention", "auprc", "mean"),
    ff("gradient", "auprc", "mean"),
)

#: the few statistics a team sorts runs by (W&B's headline/…, the console's answer): every method's comprehensiveness
#: and sufficiency AOPC (the random ranking is their floor) — those the run computed
HEADLINE_KEYS = tuple(
    ff(method, measure, "aopc", "mean") for method in FF_METHODS for measure in ("comprehensiveness", "sufficiency")
)

#: the per-instance columns by which an instance disagrees most (the explorer's ★, W&B's coloured sample): another
#: method ranking the tokens unlike attention (low τ), else attention's tokens mattering least (low comprehensiveness)
DISAGREEMENT = tuple(
    (f"{method}_tau_attention", "low") for method in ("gradient", "loo", "integrated_gradients", "input_x_gradient")
) + (("attention_comp_aopc", "low"),)
#: the explorer's page name and one-line definition of each per-token score it records but attention (tokens.parquet)
TOKEN_METHODS = {
    method: ("loo Δp" if method == "loo" else method, definition)
    for method, definition in FF_METHODS.items()
    if method not in ("attention", "random")
}
#: the explorer's columns shown at first (beside the ★ one): each method's comprehensiveness and sufficiency AOPC
INSTANCE_HEADLINE = {
    f"{method}_{short}_aopc": f"{TOKEN_METHODS.get(method, (method,))[0]} · {short} AOPC {arrow}"
    for method in FF_METHODS
    if method != "random"
    for short, arrow in (("comp", "↑"), ("suff", "↓"))
}
