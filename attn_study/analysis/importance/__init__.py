"""Feature importance: gradient (Jain & Wallace Algorithm 1, Meister et al. Eqs. 4–5), leave-one-out (signed
or not), input × gradient and integrated gradients (Captum's), and the importance of the intermediate
representations h (Meister et al.). :data:`METHODS` holds the methods that score tokens for the predicted class
as records — name, formula, paper, sign, whether they flow through α — behind one signature (:func:`importance`);
``methods.py`` defines them.

All functions take a staged model in eval mode and a batch on the model's device, and return (B, T)
tensors (or (B, T, T)) that are 0 on padding and on boundary tokens.

Gradients "of ŷ" are taken of the predicted class's log-odds ℓ = log(ŷ_c / (1 − ŷ_c))
(``attn_study.models.outputs``): ∇ℓ = ∇ŷ_c / (ŷ_c (1 − ŷ_c)), a positive constant per instance, so
every normalised importance and every ranking is that of ∇ŷ_c — without the float32 saturation that
makes ∇ŷ_c exactly 0 for a confident prediction.

The package exports what the families and ROAR use; the rest is read from its modules (``batches``, ``gradient``,
``leave_one_out``, ``methods``).
"""

from __future__ import annotations

from .batches import by_length, grad_context, logits_from_leaf, predict, rows_of, token_mask
from .gradient import (
    distribution,
    gradient_importance,
    gradient_norm_importance,
    hidden_gradient_importance,
    input_to_hidden_gradients,
    input_x_gradient,
    integrated_gradients,
)
from .leave_one_out import deletion_probabilities, kept_probabilities, kept_sub_batch, leave_one_out
from .methods import METHODS, ImportanceOptions, importance

__all__ = [
    "ImportanceOptions",
    "METHODS",
    "by_length",
    "deletion_probabilities",
    "distribution",
    "grad_context",
    "gradient_importance",
    "gradient_norm_importance",
    "hidden_gradient_importance",
    "importance",
    "input_to_hidden_gradients",
    "input_x_gradient",
    "integrated_gradients",
    "kept_probabilities",
    "kept_sub_batch",
    "leave_one_out",
    "logits_from_leaf",
    "predict",
    "rows_of",
    "token_mask",
]
