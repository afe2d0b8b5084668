"""Adversarial attention (Jain & Wallace Algorithm 3, Eq. 1–2): attention as different as possible
from the model's while the output stays within ε, found by gradient ascent with the model frozen.

Two readings of the objective and of the ε-max selection are available (``conf/analysis/jain_wallace.yaml``):
the paper's (the defaults) and the authors' released code's (``recipe=jain_wallace``), which differ in
λ's scale, the diversity term's normalisation, the output distance of multi-class tasks and the
selection rule — see :func:`adversary_objective` and :func:`authors_emax_jsd`.
"""

from __future__ import annotations

import math

import torch

from attn_study.stats import LN2, jsd, tvd

DIVERSITY = ("pairs", "k_squared")
OUTPUT_DISTANCES = ("tvd", "l1")


def output_change(out: torch.Tensor, probs: torch.Tensor, kind: str = "tvd") -> torch.Tensor:
    """How far the adversarial outputs ``out`` (B, K, C) moved from ``probs`` (B, C): TVD = ½ Σ|ŷ_k − ŷ|,
    or ``l1`` = Σ|ŷ_k − ŷ| (= 2·TVD; the authors' QA/NLI code thresholds this at 0.01, i.e. TVD 0.005)."""
    change = tvd(out, probs[:, None, :])
    return 2.0 * change if kind == "l1" else change


def adversary_objective(
    adv: torch.Tensor,
    alpha: torch.Tensor,
    change: torch.Tensor,
    lam: float,
    epsilon: float,
    lam_per_adversary: bool = False,
    diversity: str = "pairs",
) -> torch.Tensor:
    """The objective each instance's K adversaries maximise together, (B,):

        Σ_k JSD(α_k, α̂) + D − λ' Σ_k max(0, Δ_k − ε)

    with ``change`` Δ_k (B, K) the output distance of adversary k, λ' = λ (``lam_per_adversary``: the
    authors' code) or λ/K (the paper's Eq. 2 read as a mean), and the diversity term D =
    Σ_{i<j} JSD(α_i, α_j) / (K(K−1)) (``pairs``) or Σ_{i≠j} JSD(α_i, α_j) / K² (``k_squared``: the
    authors' code, = 2 Σ_{i<j} / K²). ``adv`` (B, K, T), ``alpha`` (B, T)."""
    k = adv.shape[1]
    spread_weight = 1.0 / max(k * (k - 1), 1) if diversity == "pairs" else 2.0 / (k * k)
    weight = lam if lam_per_adversary else lam / k
    return _Divergences.apply(adv, alpha, spread_weight) - weight * torch.relu(change - epsilon).sum(-1)


class _Divergences(torch.autograd.Function):
    """D(a) = Σ_k JSD(a_k, α) + w Σ_{i<j} JSD(a_i, a_j) per instance, (B,), with its gradient in closed form.

    With s = p + q, JSD(p, q) = ln 2 − ½ Σ_t s_t log s_t + ½ Σ_t p_t log p_t + ½ Σ_t q_t log q_t (0 log 0 = 0), so

        ∂D/∂a_k = ½ (log a_k − log(a_k + α)) + (w/2) Σ_{j≠k} (log a_k − log(a_k + a_j)),

    every logarithm computed once in the forward pass: about half the work of differentiating
    :func:`~attn_study.stats.jsd` by autograd, the adversary's hot loop. Unlike ``jsd`` the terms
    are not clamped to [0, ln 2] (the clamp only acts on rounding errors). ``adv`` (B, K, T), ``alpha`` (B, T);
    α is a constant (no gradient).
    """

    @staticmethod
    def forward(ctx, adv, alpha, spread_weight):
        k = adv.shape[1]
        first, second = torch.triu_indices(k, k, offset=1, device=adv.device)
        log_adv, self_info = _log_and_sum(adv)  # Σ_t a log a, (B, K)
        log_alpha, alpha_info = _log_and_sum(alpha)
        log_to_alpha, mixed = _log_and_sum(adv + alpha[:, None, :])
        to_alpha = LN2 - 0.5 * mixed + 0.5 * (self_info + alpha_info[:, None])
        log_pairs, mixed = _log_and_sum(adv.index_select(1, first) + adv.index_select(1, second))
        pairs = LN2 - 0.5 * mixed + 0.5 * (self_info.index_select(1, first) + self_info.index_select(1, second))
        ctx.save_for_backward(log_adv, log_to_alpha, log_pairs, first, second)
        ctx.spread_weight = spread_weight
        return to_alpha.sum(-1) + spread_weight * pairs.sum(-1)

    @staticmethod
    def backward(ctx, grad):
        log_adv, log_to_alpha, log_pairs, first, second = ctx.saved_tensors
        k = log_adv.shape[1]
        partners = torch.zeros_like(log_adv).index_add_(1, first, log_pairs).index_add_(1, second, log_pairs)
        d = 0.5 * (log_adv - log_to_alpha) + (0.5 * ctx.spread_weight) * ((k - 1) * log_adv - partners)
        return d * grad[:, None, None], None, None


def _log_and_sum(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p with p clamped at the smallest normal, so 0 log 0 = 0 and every gradient finite; Σ_t p log p)."""
    log = p.clamp_min(torch.finfo(p.dtype).tiny).log_()
    return log, (p * log).sum(-1)


def adversarial_attention(
    model,
    enc,
    alpha: torch.Tensor,
    probs: torch.Tensor,
    k: int = 5,
    steps: int = 500,
    lr: float = 0.01,
    lam: float = 500.0,
    epsilon: float = 0.01,
    init_scale: float = 3.0,
    generator: torch.Generator | None = None,
    lam_per_adversary: bool = False,
    diversity: str = "pairs",
    output_distance: str = "tvd",
    noise: torch.Tensor | None = None,
):
    """K adversarial attentions per instance, optimised jointly for the whole batch.

    Parameters θ (B, K, T) are log-attention logits, α_k = softmax(θ_k) over the attended positions
    (``enc.mask``: never padding or boundary tokens), initialised θ = log(1/T) + init_scale·N(0, 1)
    (``noise`` (B, K, T) when given, else drawn from ``generator``), optimised by Adam (AMSGrad) with ``lr`` for
    ``steps`` steps to maximise :func:`adversary_objective`, whose output distance Δ_k is the TVD of
    the outputs (``output_distance='l1'``: Σ|ŷ_k − ŷ| = 2·TVD, the authors' QA/NLI code). Returns
    (α_k, TVD_k, JSD_k): (B, K, T), (B, K), (B, K) at the last step.
    """
    b, t = alpha.shape
    # −∞ where not attended, added to θ: the softmax of θ + bias is exactly that of θ masked_fill'ed with −∞,
    # and its backward is the identity (a masked fill of the expanded mask cost two slow passes per step)
    bias = torch.zeros_like(alpha).masked_fill_(~enc.mask, -math.inf)[:, None, :]
    if noise is None:
        noise = torch.randn((b, k, t), generator=generator, device=alpha.device, dtype=alpha.dtype)
    attended = enc.mask.sum(-1).clamp_min(1).to(alpha.dtype)  # the text's tokens (no <sos>/<eos>)
    theta = (-torch.log(attended)[:, None, None] + init_scale * noise).requires_grad_(True)
    optimiser = torch.optim.Adam([theta], lr=lr, amsgrad=True, fused=True)  # one kernel per step

    def evaluate():
        adv = torch.softmax(theta + bias, dim=-1)
        return adv, model.probabilities(model.decode_many(enc, adv).flatten(0, 1)).view(b, k, -1)

    with torch.enable_grad():
        for _ in range(steps):
            adv, out = evaluate()
            change = output_change(out, probs, output_distance)
            objective = adversary_objective(adv, alpha, change, lam, epsilon, lam_per_adversary, diversity)
            optimiser.zero_grad(set_to_none=True)
            (-objective.sum()).backward()
            optimiser.step()
    with torch.no_grad():
        adv, out = evaluate()
        return adv, tvd(out, probs[:, None, :]), jsd(adv, alpha[:, None, :])


def epsilon_max_jsd(change: torch.Tensor, divergence: torch.Tensor, epsilon: float):
    """The paper's ε-max JSD = max_k 1[TVD_k ≤ ε]·JSD_k per instance (0 when no adversary is within ε),
    the index of that adversary (−1 when none), and the number of adversaries within ε."""
    feasible = change <= epsilon
    masked = divergence.masked_fill(~feasible, -1.0)
    best, index = masked.max(dim=-1)
    any_feasible = feasible.any(-1)
    return best.clamp_min(0.0), torch.where(any_feasible, index, -1), feasible.sum(-1)


def authors_emax_jsd(
    adv: torch.Tensor,
    alpha: torch.Tensor,
    change: torch.Tensor,
    num_classes: int,
    token_mask: torch.Tensor,
    threshold: float = 0.05,
):
    """The authors' released code's selection: the K adversaries *and the original attention* (JSD 0)
    are candidates; one is excluded when its mean absolute output difference, Σ_c |ŷ_c − ŷ'_c| / C =
    2·TVD / C, exceeds ``threshold``; the statistic is the largest JSD among the rest, the attentions
    restricted to the text's tokens (``token_mask``: no boundary tokens) and renormalised — so 0,
    never missing, when no adversary qualifies. Returns what :func:`epsilon_max_jsd` does."""

    def inner(a):
        a = a * token_mask.unsqueeze(-2) if a.dim() == 3 else a * token_mask
        return a / a.sum(-1, keepdim=True).clamp_min(1e-12)

    divergence = jsd(inner(adv), inner(alpha)[:, None, :])
    feasible = 2.0 * change / num_classes <= threshold
    masked = divergence.masked_fill(~feasible, -1.0)
    best, index = masked.max(dim=-1)
    any_feasible = feasible.any(-1)
    return best.clamp_min(0.0), torch.where(any_feasible & (best > 0), index, -1), feasible.sum(-1)
