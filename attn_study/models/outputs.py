"""The output distribution ŷ and the predicted class's log-odds, from logits, without saturating.

Binary tasks have one logit x (ŷ₁ = σ(x), ŷ₀ = σ(−x)); the others C logits z (ŷ = softmax(z)).

Why not ``sigmoid`` / ``softmax``: their derivative is computed as p·(1 − p), and in float32 p rounds to
exactly 1 once the margin of the predicted class passes ~17 (float64: ~37). The gradient of ŷ is then
exactly 0 for a binary model and points the wrong way for a multi-class one, so every gradient-based
importance of a confident prediction silently vanishes. Here, with c the predicted class,

    log ŷ_j = (z_j − z_c) − log(1 + Σ_{k≠c} exp(z_k − z_c))          (binary: log σ(±x))

computes 1 − ŷ_c as Σ_{k≠c} exp(z_k − z_c) / (1 + Σ …), never as a difference, and ŷ = exp(log ŷ) keeps
an exact gradient ŷ · ∇log ŷ (up to underflow, margins beyond ~87 in float32).

The importance methods differentiate the predicted class's **log-odds** instead,

    ℓ_c = log ŷ_c − log(1 − ŷ_c) = z_c − log Σ_{k≠c} exp(z_k)          (binary: x for class 1, −x for 0)

whose gradient is ∇ŷ_c / (ŷ_c (1 − ŷ_c)): per instance a positive constant times ∇ŷ_c, so every
ranking, sign and normalised importance is that of ∇ŷ_c exactly, and it never vanishes in floating
point (its gradient is a softmax over the other classes' logits).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def log_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """log ŷ (B, C) from logits (B, 1) (binary) or (B, C), computed as the module docstring says."""
    if logits.shape[-1] == 1:
        return torch.cat([F.logsigmoid(-logits), F.logsigmoid(logits)], dim=-1)
    top = logits.argmax(-1, keepdim=True)
    # z_j − z_c, with the c entry a constant 0: z_c then enters only through the differences, so the
    # backward pass never forms 1 − (1 − tiny) (which rounds to 0)
    diff = (logits - logits.gather(-1, top)).scatter(-1, top, 0.0)
    others = diff.scatter(-1, top, float("-inf")).exp().sum(-1, keepdim=True)  # (1 − ŷ_c) / ŷ_c
    return diff - torch.log1p(others)


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    """ŷ (B, C) = exp(log ŷ): the distribution, with gradients that do not saturate."""
    return log_probabilities(logits).exp()


def predicted_class(logits: torch.Tensor) -> torch.Tensor:
    """argmax ŷ (B,), exactly as the analyses see ŷ (ties go to the lower class)."""
    return log_probabilities(logits).argmax(-1)


def log_odds(logits: torch.Tensor, target: torch.Tensor | None = None) -> torch.Tensor:
    """ℓ_c = log(ŷ_c / (1 − ŷ_c)) (B,) of class ``target`` (B,) (default: the predicted class)."""
    target = predicted_class(logits) if target is None else target
    if logits.shape[-1] == 1:
        x = logits[..., 0]
        return torch.where(target == 1, x, -x)
    chosen = logits.gather(-1, target[:, None]).squeeze(-1)
    rest = logits.scatter(-1, target[:, None], float("-inf"))
    return chosen - torch.logsumexp(rest, dim=-1)
