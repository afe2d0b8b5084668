"""Permuted attention (Jain & Wallace Algorithm 2) — the attention's weights shuffled among the real
tokens, decoded with the encoder states held fixed."""

from __future__ import annotations

import torch

from attn_study.stats import tvd


def permute_among_real(alpha: torch.Tensor, mask: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """n random permutations of each row's weights among its real positions: (B, n, T), from uniform
    ``keys`` (B, n, T) (see :func:`~attn_study.analysis.seeding.instance_draws`).

    The keys sorted per row, the other positions keyed +inf, give a random order of the real positions;
    their weights go, in that order, to the real positions in ascending order — which need not be a
    prefix of the row (boundary tokens are not real items) — so no weight ever moves onto padding or a
    boundary token. α must be 0 off ``mask``.
    """
    b, n, t = keys.shape
    keys = keys.masked_fill(~mask[:, None, :], float("inf"))
    order = keys.argsort(dim=-1)  # (B, n, T): the real positions in random order, then the others
    slots = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[:, None, :].expand(b, n, t)
    weights = alpha.gather(1, order.reshape(b, n * t)).reshape(b, n, t)
    return torch.zeros_like(weights).scatter_(-1, slots, weights)


@torch.no_grad()
def permutation_tvd(
    model, enc, alpha: torch.Tensor, probs: torch.Tensor, keys: torch.Tensor, chunk: int = 25
) -> torch.Tensor:
    """TVD(ŷ(α_perm), ŷ) for the n permutations given by ``keys`` (B, n, T): (B, n). ``chunk`` permutations
    per decode call bound the memory (B·chunk pooled vectors)."""
    permuted = permute_among_real(alpha, enc.mask, keys)
    n = keys.shape[1]
    out = [
        tvd(
            model.probabilities(model.decode_many(enc, permuted[:, s : s + chunk]).flatten(0, 1)).view(
                alpha.shape[0], -1, probs.shape[1]
            ),
            probs[:, None, :],
        )
        for s in range(0, n, chunk)
    ]
    return torch.cat(out, dim=1)
