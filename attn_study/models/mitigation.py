"""Bai et al.'s (2021) instance weighting against combinatorial shortcuts.

If the attention pattern a (which tokens are weighted, by how much, where) predicts the label by
itself, the layers after the attention can learn from the pattern instead of from the content it
points at. Instance weighting re-weights the training instances so that, under the weights, the label
is independent of the pattern:

    w_i = p(y_i) / p̂(y_i | a_i),   clipped to [lo, hi], normalised to mean 1 over the batch,

where p(y) is the class prior of the training split and p̂(y | a) an auxiliary *mask-only* classifier
that sees the pattern and nothing else, trained alongside the model on the (detached) patterns. Under
these weights p_w(y | a) ∝ p̂(y | a)·p(y)/p̂(y | a) = p(y): the pattern carries no label information. The
paper gives the idea, not the estimator: this one (the auxiliary classifier below, the clipping, the
batch normalisation) is our reading, documented in conf/config.yaml (``training``).
"""

from __future__ import annotations

import torch
from torch import nn


class MaskClassifier(nn.Module):
    """p̂(y | a) from an attention pattern a (B, T) alone: features Σ_t a_t [P(t); Q(n − 1 − t)] (learned
    embeddings of the position from the start and from the end, positions past ``max_positions``
    sharing the last one), then a linear layer. It sees where the weight is, never what it is on."""

    def __init__(self, num_classes: int, dim: int = 16, max_positions: int = 512):
        super().__init__()
        self.max_positions = max_positions
        self.from_start = nn.Embedding(max_positions, dim)
        self.from_end = nn.Embedding(max_positions, dim)
        self.output = nn.Linear(2 * dim, num_classes)

    def forward(self, pattern: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        t = torch.arange(mask.shape[1], device=mask.device)
        start = t.clamp(max=self.max_positions - 1).expand_as(mask)
        end = (mask.sum(-1, keepdim=True) - 1 - t).clamp(0, self.max_positions - 1)
        weights = (pattern * mask).unsqueeze(-1)
        features = torch.cat([(weights * self.from_start(start)).sum(1), (weights * self.from_end(end)).sum(1)], -1)
        return self.output(features)


def shortcut_weights(
    prior: torch.Tensor, conditional: torch.Tensor, clip: tuple[float, float] = (0.1, 10.0)
) -> torch.Tensor:
    """w = clip(p(y) / p̂(y | a), lo, hi) / mean, for each instance's own label y: ``prior`` and
    ``conditional`` are (B,) probabilities of that label."""
    ratio = prior / conditional.clamp_min(1e-12)
    weights = ratio.clamp(float(clip[0]), float(clip[1]))
    return weights / weights.mean()
