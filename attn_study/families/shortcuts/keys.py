"""Bai et al. (2021), Why Attentions May Not Be Interpretable?: the family's metric keys, under ``sc/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "sc"
ORDER = 40  # the family's place in the report (its sections come in ORDER)

#: the report's columns: summary key → header
SC_COLUMNS = {
    "accuracy": "accuracy",
    "mask_only/accuracy": "mask-only acc.",
    "selected_only/accuracy": "selected-only acc.",
    "chance": "chance",
    "markers/mass/mean": "marker mass",
    "markers/selected_frac": "marker selected",
    "markers/choice_label_accuracy": "marker choice → label",
    "markers/choice_baseline": "(its baseline)",
    "markers/choice_label_p": "choice–label χ² p",
    "rationale/precision/mean": "rationale prec.",
    "posthoc/accuracy": "post-hoc acc.",
}


def sc(*parts) -> str:
    """``sc('mask_only', 'accuracy')`` → ``sc/mask_only/accuracy``."""
    return key(NAMESPACE, *parts)


#: statistics drawn against the epoch when tracked during training (analysis/shortcuts/epochs.png, the report)
TRACKED = (
    sc("accuracy"),
    sc("mask_only", "accuracy"),
    sc("markers", "mass", "mean"),
    sc("markers", "selected_frac"),
)

#: the per-instance column by which an instance is the most suspect (the explorer's ★, W&B's coloured sample):
#: attention's mass on the injected markers
DISAGREEMENT = (("marker_mass", "high"),)
#: the explorer's columns shown at first (beside the ★ one): per instance → their headers
INSTANCE_HEADLINE = {
    "mask_only_correct": "mask-only correct",
    "selected_only_correct": "selected-only correct",
    "rationale_precision": "rationale precision",
}
