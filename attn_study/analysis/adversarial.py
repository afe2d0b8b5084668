"""Adversarial attention (Jain & Wallace Algorithm 3, Eq. 1–2): attention as different as possible
from the model's while the output stays within ε, found by gradient ascent with the model frozen."""

from __future__ import annotations

import math

import torch

from attn_study.analysis.measures import jsd, tvd


def adversarial_attention(model, enc, alpha: torch.Tensor, probs: torch.Tensor, k: int = 5, steps: int = 500,
                          lr: float = 0.01, lam: float = 500.0, epsilon: float = 0.01, init_scale: float = 3.0,
                          generator: torch.Generator | None = None):
    """K adversarial attentions per instance, optimised jointly for the whole batch.

    Parameters θ (B, K, T) are log-attention logits, α_k = softmax(θ_k) over real tokens, initialised
    θ = log(1/T) + init_scale·N(0, 1). Adam (AMSGrad) with ``lr`` maximises, per instance,

        Σ_k JSD(α_k, α̂) + 1/(K(K−1)) Σ_{i<j} JSD(α_i, α_j) − (λ/K) Σ_k max(0, TVD(ŷ_k, ŷ) − ε)

    for ``steps`` steps, α̂ and ŷ the model's attention and output. Returns (α_k, TVD_k, JSD_k):
    (B, K, T), (B, K), (B, K) at the last step.
    """
    mask = enc.mask[:, None, :].expand(-1, k, -1)
    b, t = alpha.shape
    noise = torch.randn((b, k, t), generator=generator, device=alpha.device, dtype=alpha.dtype)
    theta = (-torch.log(enc.lengths.to(alpha.dtype))[:, None, None] + init_scale * noise).requires_grad_(True)
    optimiser = torch.optim.Adam([theta], lr=lr, amsgrad=True)
    pairs = torch.triu(torch.ones(k, k, dtype=torch.bool, device=alpha.device), diagonal=1)

    def evaluate():
        adv = torch.softmax(theta.masked_fill(~mask, -math.inf), dim=-1)
        out = model.probabilities(model.decode_many(enc, adv).flatten(0, 1)).view(b, k, -1)
        return adv, tvd(out, probs[:, None, :]), jsd(adv, alpha[:, None, :])

    with torch.enable_grad():
        for _ in range(steps):
            adv, change, divergence = evaluate()
            spread = jsd(adv[:, :, None, :], adv[:, None, :, :])[:, pairs].sum(-1) / max(k * (k - 1), 1)
            penalty = (lam / k) * torch.relu(change - epsilon).sum(-1)
            objective = divergence.sum(-1) + spread - penalty
            optimiser.zero_grad(set_to_none=True)
            (-objective.sum()).backward()
            optimiser.step()
    with torch.no_grad():
        return evaluate()


def epsilon_max_jsd(change: torch.Tensor, divergence: torch.Tensor, epsilon: float):
    """ε-max JSD = max_k 1[TVD_k ≤ ε]·JSD_k per instance (0 when no adversary is within ε), the index
    of that adversary (−1 when none), and the number of adversaries within ε."""
    feasible = change <= epsilon
    masked = divergence.masked_fill(~feasible, -1.0)
    best, index = masked.max(dim=-1)
    any_feasible = feasible.any(-1)
    return best.clamp_min(0.0), torch.where(any_feasible, index, -1), feasible.sum(-1)
