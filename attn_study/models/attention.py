"""Attention scoring φ(h_t, q) → s_t (B, T).

For single-text tasks q is a learned vector; for pair tasks the caller passes the query encoding.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class AdditiveScorer(nn.Module):
    """Additive (Bahdanau) scoring s_t = v·tanh(W1 h_t + W2 q).

    As in Jain & Wallace's code W1 maps m → m/2 (``attention_dim``) and v has no bias. With a learned
    q, W2 q is a constant vector, i.e. the bias of W1, so single-text models use W1 with bias alone.
    """

    def __init__(self, hidden_dim: int, query_dim: int | None = None, attention_dim: int | None = None):
        super().__init__()
        attention_dim = attention_dim or max(hidden_dim // 2, 1)
        self.w1 = nn.Linear(hidden_dim, attention_dim)
        self.w2 = nn.Linear(query_dim, attention_dim, bias=False) if query_dim else None
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def forward(self, h: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        x = self.w1(h)
        if self.w2 is not None:
            if query is None:
                raise ValueError("this attention was built for a pair task and needs a query")
            x = x + self.w2(query).unsqueeze(1)
        return self.v(torch.tanh(x)).squeeze(-1)


class DotScorer(nn.Module):
    """Scaled dot product s_t = h_t·q / √m; q learned (single text) or the query encoding (pair)."""

    def __init__(self, hidden_dim: int, query_dim: int | None = None):
        super().__init__()
        if query_dim is not None and query_dim != hidden_dim:
            raise ValueError(f"dot attention needs query_dim == hidden_dim, got {query_dim} and {hidden_dim}")
        self.query = None if query_dim else nn.Parameter(torch.randn(hidden_dim) / math.sqrt(hidden_dim))
        self.scale = 1.0 / math.sqrt(hidden_dim)

    def forward(self, h: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        if self.query is not None:
            return (h @ self.query) * self.scale
        if query is None:
            raise ValueError("this attention was built for a pair task and needs a query")
        return (h * query.unsqueeze(1)).sum(-1) * self.scale


class UniformScorer(nn.Module):
    """Wiegreffe & Pinter's uniform baseline: every score 0, so the projection gives α_t = 1/T on the real
    tokens (softmax, sparsemax and entmax alike) and the model has no attention parameters."""

    def __init__(self, hidden_dim: int, query_dim: int | None = None):
        super().__init__()

    def forward(self, h: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        return h.new_zeros(h.shape[:2])


class PreloadedAttention(nn.Module):
    """Another trained run's attention on the same instance, used as this model's α (``attention.source``;
    the batches carry it as ``fixed_attention``): Wiegreffe & Pinter's "pre-loaded" attention (their own
    ``--attention frozen`` means uniform weights, ``attention=uniform`` here). Not computed from the states:
    no parameters, no scores; the classifier's ``attend`` returns :meth:`attention`."""

    fixed = True

    def __init__(self, hidden_dim: int, query_dim: int | None = None, source: str | None = None):
        super().__init__()
        self.source = source

    def forward(self, h: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        raise RuntimeError("a pre-loaded attention has no scores; the classifier's attend() returns it")

    @staticmethod
    def attention(
        fixed: torch.Tensor | None, mask: torch.Tensor, lengths: torch.Tensor, fixed_lengths: torch.Tensor | None
    ) -> torch.Tensor:
        """The source's α (B, T) as it is, bit for bit, on an instance whose tokens are all there; where
        tokens were deleted (leave-one-out, erasure by deletion) the weights of those that remain, renormalised."""
        if fixed is None or fixed_lengths is None:
            raise ValueError("attention=preloaded: the batch carries no fixed_attention (set attention.source)")
        alpha = fixed * mask
        whole = (lengths == fixed_lengths)[:, None]
        return torch.where(whole, alpha, alpha / alpha.sum(-1, keepdim=True).clamp_min(1e-30))
