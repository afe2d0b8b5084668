"""The staged attention classifier (DESIGN.md): embed → encode → attend → decode.

    enc   = model.encode(batch)        # Encoded: embedded E, hidden H, mask, lengths, query q
    alpha = model.attend(enc)          # (B, T): project(score(H, q)), exactly 0 on padding
    out   = model.decode(enc, alpha)   # logits from ANY attention the caller supplies

Tests intervene between the stages: a permuted or adversarial α goes to ``decode`` without
re-encoding; gradients w.r.t. the embeddings come from ``encode(batch, embedded=E)`` with a leaf E.
Binary tasks have one output logit (sigmoid, as Jain & Wallace); ``probabilities`` always returns the
full distribution (B, C).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attn_study.data.text import PAD_ID


@dataclass
class Encoded:
    """Everything ``decode`` and the tests need from one encoder pass."""

    embedded: torch.Tensor  # (B, T, d)
    hidden: torch.Tensor  # (B, T, m)
    mask: torch.Tensor  # (B, T) bool, True on real tokens
    lengths: torch.Tensor  # (B,)
    query: torch.Tensor | None = None  # (B, m) for pair tasks

    def select(self, index: torch.Tensor) -> "Encoded":
        """The instances at ``index`` (repeats allowed), e.g. to decode K attentions per instance."""
        return Encoded(
            embedded=self.embedded[index], hidden=self.hidden[index], mask=self.mask[index],
            lengths=self.lengths[index], query=None if self.query is None else self.query[index],
        )


class AttentionClassifier(nn.Module):
    """Single-text classifier with one attention over the encoder states (the ``flat`` model).

    ``encoder`` and ``scorer`` are factories (Hydra partials): ``encoder(input_dim=d)`` and
    ``scorer(hidden_dim=m)``; ``projection`` is a module ``(scores, mask) → α``.
    """

    def __init__(self, vocab_size: int, num_classes: int, encoder, scorer, projection: nn.Module,
                 embedding_dim: int = 300, dropout: float = 0.0, pretrained: np.ndarray | None = None,
                 freeze_embeddings: bool = False):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
        if pretrained is not None:
            if pretrained.shape != (vocab_size, embedding_dim):
                raise ValueError(f"pretrained embeddings {pretrained.shape} != ({vocab_size}, {embedding_dim})")
            self.embedding.weight.data.copy_(torch.as_tensor(pretrained))
        self.embedding.weight.requires_grad_(not freeze_embeddings)
        self.encoder = encoder(input_dim=embedding_dim)
        self.scorer = scorer(hidden_dim=self.encoder.output_dim)
        self.projection = projection
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(self.encoder.output_dim, 1 if num_classes == 2 else num_classes)

    def embed(self, batch: dict) -> torch.Tensor:
        return self.embedding(batch["ids"])

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        """Encoder states for ``batch``; pass ``embedded`` to encode given (e.g. leaf) embeddings."""
        if embedded is None:
            embedded = self.embed(batch)
        mask, lengths = batch["mask"], batch["lengths"]
        hidden = self.encoder(self.dropout(embedded), mask, lengths)
        return Encoded(embedded=embedded, hidden=hidden, mask=mask, lengths=lengths)

    def attend(self, enc: Encoded) -> torch.Tensor:
        return self.projection(self.scorer(enc.hidden, enc.query), enc.mask)

    def pool(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """c = Σ_t α_t h_t."""
        return torch.einsum("bt,btm->bm", alpha, enc.hidden)

    def decode(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """Logits from the attention ``alpha`` (B, T) over ``enc``'s states."""
        return self.decode_pooled(self.pool(enc, alpha), enc.query)

    def decode_pooled(self, context: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from a pooled vector c (N, m) — the zero vector included. ``query`` (N, m) is the
        query encoding of pair tasks (unused here)."""
        return self.output(self.dropout(context))

    def decode_many(self, enc: Encoded, alphas: torch.Tensor) -> torch.Tensor:
        """Logits (B, K, C) for K attentions per instance, ``alphas`` (B, K, T), without re-encoding."""
        b, k, _ = alphas.shape
        context = torch.einsum("bkt,btm->bkm", alphas, enc.hidden).reshape(b * k, -1)
        query = None if enc.query is None else enc.query.repeat_interleave(k, dim=0)
        return self.decode_pooled(context, query).reshape(b, k, -1)

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        enc = self.encode(batch)
        alpha = self.attend(enc)
        return self.decode(enc, alpha), alpha

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Output distribution ŷ (B, C) from logits (one sigmoid logit for binary tasks)."""
        if logits.shape[-1] == 1:
            p = torch.sigmoid(logits)
            return torch.cat([1 - p, p], dim=-1)
        return torch.softmax(logits, dim=-1)
