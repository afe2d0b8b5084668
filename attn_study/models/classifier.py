"""The staged attention classifier (docs/architecture.md): embed → encode → attend → decode.

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


def restrict(logits: torch.Tensor, candidates: torch.Tensor | None) -> torch.Tensor:
    """Logits with the answers not in ``candidates`` set to −1e9 (probability 0)."""
    return logits if candidates is None else logits.masked_fill(~candidates, -1e9)


@dataclass
class Encoded:
    """Everything ``decode`` and the tests need from one encoder pass."""

    embedded: torch.Tensor  # (B, T, d)
    hidden: torch.Tensor  # (B, T, m)
    mask: torch.Tensor  # (B, T) bool, True on real tokens
    lengths: torch.Tensor  # (B,)
    query: torch.Tensor | None = None  # (B, m) for pair tasks
    candidates: torch.Tensor | None = None  # (B, C) bool: allowed answers (QA), None = all
    selection: torch.Tensor | None = None  # (B, T): the selected tokens of a selector–predictor model


class AttentionClassifier(nn.Module):
    """Single-text classifier with one attention over the encoder states (the ``flat`` model).

    ``encoder`` and ``scorer`` are factories (Hydra partials): ``encoder(input_dim=d)`` and
    ``scorer(hidden_dim=m)``; ``projection`` is a module ``(scores, mask) → α``. ``dropout`` applies to
    the pooled vector (the classification layer) and, unless ``word_dropout`` is given, to the
    embeddings before the encoder (Serrano & Smith's FLANs set the two apart).
    """

    token_attention = True  # α is over the input tokens (token-importance tests apply)

    def __init__(self, vocab_size: int, num_classes: int, encoder, scorer, projection: nn.Module,
                 embedding_dim: int = 300, dropout: float = 0.0, pretrained: np.ndarray | None = None,
                 freeze_embeddings: bool = False, word_dropout: float | None = None):
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
        self.word_dropout = nn.Dropout(dropout if word_dropout is None else word_dropout)
        self.output = nn.Linear(self.encoder.output_dim, 1 if num_classes == 2 else num_classes)

    def embed(self, batch: dict) -> torch.Tensor:
        return self.embedding(batch["ids"])

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        """Encoder states for ``batch``; pass ``embedded`` to encode given (e.g. leaf) embeddings."""
        if embedded is None:
            embedded = self.embed(batch)
        mask, lengths = batch["mask"], batch["lengths"]
        hidden = self.encoder(self.word_dropout(embedded), mask, lengths)
        return Encoded(embedded=embedded, hidden=hidden, mask=mask, lengths=lengths,
                       candidates=batch.get("candidates"))

    def attend(self, enc: Encoded) -> torch.Tensor:
        return self.projection(self.scorer(enc.hidden, enc.query), enc.mask)

    def pool(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """c = Σ_t α_t h_t."""
        return torch.einsum("bt,btm->bm", alpha, enc.hidden)

    def decode(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """Logits from the attention ``alpha`` (B, T) over ``enc``'s states."""
        return self.decode_pooled(self.pool(enc, alpha), enc.query, enc.candidates)

    def decode_pooled(self, context: torch.Tensor, query: torch.Tensor | None = None,
                      candidates: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from a pooled vector c (N, m) — the zero vector included. ``query`` (N, m): the
        query encoding of pair tasks; ``candidates`` (N, C): answers allowed (others get −1e9)."""
        return restrict(self.output(self.dropout(self.combine(context, query))), candidates)

    def combine(self, context: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """The decoder's input: c itself for single-text tasks."""
        return context

    def decode_many(self, enc: Encoded, alphas: torch.Tensor) -> torch.Tensor:
        """Logits (B, K, C) for K attentions per instance, ``alphas`` (B, K, T), without re-encoding."""
        b, k, _ = alphas.shape
        context = torch.einsum("bkt,btm->bkm", alphas, enc.hidden).reshape(b * k, -1)

        def repeat(x):
            return None if x is None else x.repeat_interleave(k, dim=0)

        return self.decode_pooled(context, repeat(enc.query), repeat(enc.candidates)).reshape(b, k, -1)

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        enc = self.encode(batch)
        alpha = self.attend(enc)
        return self.decode(enc, alpha), alpha

    def forward_with_attention(self, batch: dict, alpha: torch.Tensor) -> torch.Tensor:
        """Logits with the attention replaced by ``alpha`` (random-attention pretraining)."""
        return self.decode(self.encode(batch), alpha)

    def random_attention(self, mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Random soft weights over the real tokens, drawn from the mask alone: uniform on the simplex
        (Dirichlet(1): normalised Exponential(1) draws)."""
        draws = -torch.log(torch.rand(mask.shape, generator=generator, device=mask.device).clamp_min(1e-12)) * mask
        return draws / draws.sum(-1, keepdim=True).clamp_min(1e-12)

    def attention_parameters(self) -> list:
        """The attention's own parameters (the scorer): what phase 2 of random-attention pretraining trains."""
        return list(self.scorer.parameters()) + list(self.projection.parameters())

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Output distribution ŷ (B, C) from logits (one sigmoid logit for binary tasks)."""
        if logits.shape[-1] == 1:
            p = torch.sigmoid(logits)
            return torch.cat([1 - p, p], dim=-1)
        return torch.softmax(logits, dim=-1)


class PairAttentionClassifier(AttentionClassifier):
    """Attention over a passage conditioned on a second sequence (QA question, NLI hypothesis).

    Passage and question have separate encoders of the same type; the query q is the question
    encoder's summary (BiLSTM last states, CNN max-pool, mean otherwise); scores φ(h_t, q) come from
    the configured scorer with query_dim = m; the output is Linear(tanh(W_p c + W_q q)) as Jain &
    Wallace, restricted to the allowed answers when the batch has ``candidates``.
    """

    def __init__(self, vocab_size: int, num_classes: int, encoder, scorer, projection: nn.Module,
                 embedding_dim: int = 300, decoder_dim: int = 128, dropout: float = 0.0,
                 pretrained: np.ndarray | None = None, freeze_embeddings: bool = False):
        super().__init__(vocab_size, num_classes, encoder, scorer, projection, embedding_dim, dropout,
                         pretrained, freeze_embeddings)
        m = self.encoder.output_dim
        self.question_encoder = encoder(input_dim=embedding_dim)
        self.scorer = scorer(hidden_dim=m, query_dim=m)
        self.w_context = nn.Linear(m, decoder_dim)
        self.w_query = nn.Linear(m, decoder_dim, bias=False)
        self.output = nn.Linear(decoder_dim, 1 if num_classes == 2 else num_classes)

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        enc = super().encode(batch, embedded)
        mask, lengths = batch["query_mask"], batch["query_lengths"]
        states = self.question_encoder(self.word_dropout(self.embedding(batch["query_ids"])), mask, lengths)
        enc.query = self.question_encoder.summarize(states, mask, lengths)
        return enc

    def combine(self, context: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """tanh(W_p c + W_q q)."""
        return torch.tanh(self.w_context(context) + self.w_query(query))
