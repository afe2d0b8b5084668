"""Erasure of attention weights (Serrano & Smith 2019 §2.1): zero the chosen weights, renormalise the
others to sum 1 and decode again with the encoder states untouched; when nothing is left to pool
(every item removed, or only items of weight exactly 0 remain) the pooled vector is the zero vector
(§5.3). Serrano & Smith's rankings, single-weight erasure and search for the first decision flip are in their
family's folder; Meister et al.'s D_ŷ(h_i) is :func:`erase_each`.

Everything works on ``enc.mask`` (the attended items) and the model's ``decode_many`` /
``decode_pooled``, so the same code serves a flat model (items = words) and a hierarchical one
(items = sentences).
"""

from __future__ import annotations

import torch

from attn_study.stats import probability_drop


def renormalise_erased(alpha: torch.Tensor, removed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Erased attentions (B, K, T) and ``empty`` (B, K): α (B, T) with the items ``removed`` (B, K, T)
    zeroed and the rest renormalised to sum 1. Where no mass is left (``empty``) the row is all 0,
    which pools to the zero vector."""
    kept = alpha[:, None, :] * ~removed
    total = kept.sum(-1, keepdim=True)
    empty = total.squeeze(-1) <= 0
    return kept / torch.where(total > 0, total, torch.ones_like(total)), empty


def zero_vector_logits(model, enc) -> torch.Tensor:
    """Logits (B, C) of the zero pooled vector, the output once every item is removed (§5.3)."""
    zeros = enc.hidden.new_zeros(enc.hidden.shape[0], enc.hidden.shape[-1])
    return model.decode_pooled(zeros, enc.query, enc.candidates)


def erased_probabilities(
    model, enc, alpha: torch.Tensor, removed: torch.Tensor, zero_logits: torch.Tensor | None = None
) -> torch.Tensor:
    """Output distributions q (B, K, C) with the items ``removed`` (B, K, T) erased from α (B, T)
    (renormalised; the zero pooled vector where nothing is left), encoder states unchanged."""
    alphas, empty = renormalise_erased(alpha, removed)
    logits = model.decode_many(enc, alphas)
    if bool(empty.any()):
        if zero_logits is None:
            zero_logits = zero_vector_logits(model, enc)
        logits = torch.where(empty[..., None], zero_logits[:, None, :], logits)
    b, k, c = logits.shape
    return model.probabilities(logits.reshape(b * k, c)).reshape(b, k, -1)


@torch.no_grad()
def erase_each(model, enc, alpha: torch.Tensor, probs: torch.Tensor, items_per_call: int = 64) -> torch.Tensor:
    """|ŷ_c − ŷ_c(α with item i erased)| (B, T) for every item i, c the predicted class: each item
    erased alone, the rest renormalised, decoded again (Meister et al.'s D_ŷ(h_i) before
    normalising). ``items_per_call`` items of every instance per ``decode_many`` call; 0 on padding."""
    b, t = alpha.shape
    top = probs.argmax(-1)
    zero_logits = zero_vector_logits(model, enc)
    eye = torch.eye(t, dtype=torch.bool, device=alpha.device)
    out = torch.zeros_like(alpha)
    for s in range(0, t, max(1, int(items_per_call))):
        k = slice(s, min(t, s + max(1, int(items_per_call))))
        removed = eye[k][None].expand(b, -1, -1)
        q = erased_probabilities(model, enc, alpha, removed, zero_logits)  # (B, K, C)
        out[:, k] = probability_drop(probs[:, None, :], q, top[:, None].expand(-1, q.shape[1])).abs()
    return out * enc.mask
