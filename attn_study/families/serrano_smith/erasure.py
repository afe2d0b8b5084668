"""Serrano & Smith (2019) §2.1, §5: the rankings whose top items are erased (attention, random, the decision
gradient, gradient × attention), single-weight erasure and the search for the first decision flip — on
``enc.mask``'s items, so the same code serves a flat model (words) and a hierarchical one (sentences). The
erasure itself (renormalise, decode again, the zero vector when nothing is left) is the shared
``attn_study.analysis.erasure``."""

from __future__ import annotations

import math

import torch

from attn_study.analysis.erasure import erased_probabilities, zero_vector_logits
from attn_study.analysis.importance import grad_context
from attn_study.models.outputs import log_odds
from attn_study.stats import jsd

from .keys import RANKINGS


def decision_gradient(model, enc, alpha: torch.Tensor) -> torch.Tensor:
    """∂d/∂α_i (B, T), signed, 0 on padding: d = the largest output probability of the decoded
    output (§5.2), α a leaf tensor (the gradient does not flow into the attention's computation).

    Taken through d's log-odds ℓ (``attn_study.models.outputs``): ∂ℓ/∂α_i = (∂d/∂α_i) / (d(1 − d)), the
    same ranking and signs, and no gradient lost when d rounds to 1 in float32."""
    with torch.enable_grad(), grad_context(alpha.device):
        leaf = alpha.detach().clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(log_odds(model.decode(enc, leaf)).sum(), leaf)
    return grad.detach() * enc.mask


def rank_items(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Ranking (B, T): the positions of the real items (``mask``) by descending score, then the
    padding. Ties (and NaN, ranked last among real items) keep position order: lower first."""
    scores = torch.nan_to_num(scores.masked_fill(~mask, 0), nan=-math.inf)
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    real_first = torch.sort((~mask).gather(1, order).to(torch.uint8), dim=1, stable=True).indices
    return order.gather(1, real_first)


def ranking_scores(
    name: str, alpha: torch.Tensor, grad: torch.Tensor | None = None, uniform: torch.Tensor | None = None
) -> torch.Tensor:
    """Scores (B, T) whose descending order is the ranking ``name``; ``random`` is the given ``uniform``
    draws (B, T)."""
    if name == "attention":
        return alpha
    if name == "random":
        if uniform is None:
            raise ValueError("the random ranking needs uniform draws")
        return uniform
    if grad is None:
        raise ValueError(f"ranking {name!r} needs the decision gradient")
    if name == "gradient":
        return grad
    if name == "grad_attention":
        return grad * alpha
    raise ValueError(f"unknown ranking {name!r}; choose from {list(RANKINGS)}")


def random_other(tops: torch.Tensor, mask: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """For each instance and each column of ``tops`` (B, R), an item drawn uniformly among the real
    items other than that top item: the other real item of largest ``uniform`` draw (B, T) (one draw per
    item serves every column). Instances with one real item get the top item back."""
    u = uniform.masked_fill(~mask, -1.0)
    u = u[:, None, :].expand(-1, tops.shape[1], -1).clone()
    u.scatter_(2, tops[..., None], -2.0)
    return u.argmax(-1)


# ------------------------------------------------------------------------------------------------
# single weight
# ------------------------------------------------------------------------------------------------


def single_weight(
    model, enc, alpha: torch.Tensor, probs: torch.Tensor, items: torch.Tensor, zero_logits: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Erase each of ``items`` (B, K) alone: (JS(p, q_k) (B, K), decision flip (B, K) bool)."""
    removed = torch.zeros(*items.shape, alpha.shape[1], dtype=torch.bool, device=alpha.device)
    removed.scatter_(2, items[..., None], True)
    q = erased_probabilities(model, enc, alpha, removed, zero_logits)
    return jsd(probs[:, None, :], q), q.argmax(-1) != probs.argmax(-1)[:, None]


# ------------------------------------------------------------------------------------------------
# multi weight
# ------------------------------------------------------------------------------------------------


def first_flips(
    model,
    enc,
    alpha: torch.Tensor,
    order: torch.Tensor,
    prediction: torch.Tensor,
    steps_per_call: int = 16,
    zero_logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Erase items from the top of ``order`` (B, T), renormalising, until the decision flips.

    Step k (1 ≤ k ≤ n, n = the instance's number of items) erases the first k items of the ranking;
    step n pools the zero vector. Returns ``removed`` (B,) long, the number of items erased at the
    first flip (0: never flips), ``flipped`` (B,) bool and ``mass`` (B,), the original attention
    mass of the erased items (0 when never flips).

    The erased attentions of all steps come from one (B, T) rank table: step k erases the items
    whose position in the ranking is < k. They are decoded ``steps_per_call`` steps of every instance
    per ``decode_many`` call (B × ``steps_per_call`` attention vectors), and the decoding stops
    early once every instance has flipped or run out of items; the first flip is found by a
    cumulative sum, with no Python loop over instances or steps.
    """
    mask = enc.mask
    b, t = alpha.shape
    n = mask.sum(-1)
    steps = int(n.max()) if b else 0
    alpha = alpha * mask
    if zero_logits is None:
        zero_logits = zero_vector_logits(model, enc)
    position = torch.empty_like(order).scatter_(1, order, torch.arange(t, device=order.device).expand(b, t))
    position = position.masked_fill(~mask, t)  # padding is never erased
    flips = torch.zeros(b, steps, dtype=torch.bool, device=alpha.device)
    per_call = max(1, int(steps_per_call))
    for start in range(0, steps, per_call):
        stop = min(steps, start + per_call)
        k = torch.arange(start + 1, stop + 1, device=alpha.device)  # items erased at these steps
        removed = position[:, None, :] < k[None, :, None]
        q = erased_probabilities(model, enc, alpha, removed, zero_logits)
        flips[:, start:stop] = q.argmax(-1) != prediction[:, None]
        resolved = flips[:, :stop].any(1) | (n <= stop)
        if bool(resolved.all()):
            break
    valid = torch.arange(1, steps + 1, device=alpha.device)[None, :] <= n[:, None]
    flips &= valid
    flipped = flips.any(1)
    first = (flips.cumsum(1) == 0).sum(1)  # steps before the first flip
    removed_count = torch.where(flipped, first + 1, torch.zeros_like(first))
    cum_mass = alpha.gather(1, order).cumsum(1)
    mass = cum_mass.gather(1, first.clamp(max=t - 1)[:, None]).squeeze(1)
    return removed_count, flipped, torch.where(flipped, mass, torch.zeros_like(mass))
