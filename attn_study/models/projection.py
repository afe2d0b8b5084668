"""Projections of scores onto the simplex: α = π(s) over real tokens, exactly 0 on padding.

Masked scores are replaced by a large negative finite number before projecting (−inf breaks the
sorting-based sparse maps), and α is multiplied by the mask afterwards. The sorting-based maps sort only a
row's ``partial_sort`` largest scores (entmax's ``k``): a row whose support reaches that many is solved again
over twice as many, so α is the full sort's, bit for bit, and a long row (a review's 400 tokens, a Transformer's
every query) costs a partial sort. Each map's k was the fastest of 16 / 32 / 64 for a training step of Meister's
sparse Transformer on 256- and 400-token rows (`benchmarks/sparse_projection.py`: 0.66–0.72 of the full sort's
time with sparsemax, 0.65 with 1.5-entmax, one thread).
"""

from __future__ import annotations

import torch
from entmax import entmax15, entmax_bisect, sparsemax
from torch import nn

_MASKED = -1e9


class Projection(nn.Module):
    """Base: subclasses implement ``project(scores)`` over the last dimension."""

    def project(self, scores: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = scores.masked_fill(~mask, _MASKED)
        return self.project(scores) * mask


class Softmax(Projection):
    """α_t = exp(s_t) / Σ exp(s_u)."""

    def project(self, scores):
        return torch.softmax(scores, dim=-1)


class Sparsemax(Projection):
    """Euclidean projection of s onto the simplex (Martins & Astudillo 2016)."""

    partial_sort = 32

    def project(self, scores):
        return sparsemax(scores, dim=-1, k=self.partial_sort)


class Entmax15(Projection):
    """1.5-entmax, exact sort-based algorithm (Peters et al. 2019)."""

    partial_sort = 64  # its supports are wider than sparsemax's

    def project(self, scores):
        return entmax15(scores, dim=-1, k=self.partial_sort)


class EntmaxBisect(Projection):
    """α-entmax by bisection, for any α > 1 (α=1 → softmax limit, α=2 → sparsemax)."""

    def __init__(self, alpha: float = 1.25, n_iter: int = 50):
        super().__init__()
        if alpha <= 1.0:
            raise ValueError(f"projection.alpha={alpha}: α-entmax needs α > 1 (use projection=softmax for 1)")
        self.alpha, self.n_iter = alpha, n_iter

    def project(self, scores):
        return entmax_bisect(scores, alpha=self.alpha, dim=-1, n_iter=self.n_iter)


class SparsegenLin(Projection):
    """sparsegen-lin(s; λ) = sparsemax(s / (1 − λ)), λ < 1; larger λ, sparser (Laha et al. 2018)."""

    partial_sort = Sparsemax.partial_sort

    def __init__(self, lam: float = 0.5):
        super().__init__()
        if lam >= 1.0:
            raise ValueError(f"projection.lam={lam}: sparsegen-lin needs λ < 1")
        self.lam = lam

    def project(self, scores):
        return sparsemax(scores / (1.0 - self.lam), dim=-1, k=self.partial_sort)


#: the projections that take no setting, by their ``projection=`` name (the Transformer's ``self_attention``)
BY_NAME = {"softmax": Softmax, "sparsemax": Sparsemax, "entmax15": Entmax15}
