"""The staged attention classifier (docs/architecture.md): embed → encode → attend → decode.

    enc   = model.encode(batch)        # Encoded: embedded E, hidden H, mask, lengths, query q
    alpha = model.attend(enc)          # (B, T): project(score(H, q)), exactly 0 on padding
    out   = model.decode(enc, alpha)   # logits from ANY attention the caller supplies

Tests intervene between the stages: a permuted or adversarial α goes to ``decode`` without
re-encoding; gradients w.r.t. the embeddings come from ``encode(batch, embedded=E)`` with a leaf E.
Binary tasks have one output logit (sigmoid, as Jain & Wallace); ``probabilities`` always returns the
full distribution (B, C), computed so that its gradients do not saturate (``outputs.py``).

The attention weighs the text's own tokens only: with boundary tokens (``<sos>`` … ``<eos>``, Jain &
Wallace's recipe) the encoder reads them, but ``Encoded.mask`` — what α, every intervention on α and
every statistic run over — leaves them out, as the authors' ``masked_softmax`` does (α is exactly 0
there).

Decoding many attentions at once (``decode_many``: permutations, adversaries, erasures) exploits the
decoder's algebra. Its first layer is affine in the pooled vector c = Σ_t α_t h_t, so
W c = Σ_t α_t (W h_t): each state is projected once per instance (U_t = W h_t, cached on the
``Encoded``), and every candidate α then costs O(T·n) instead of O(T·m) — n = C for the flat models
(logits = W c + b), the decoder width for pair models (tanh(W_p c + W_q q)). Exact in eval mode
(dropout is the identity); in training mode, or within :func:`general_decoding`, every α is pooled.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from attn_study.data.text import PAD_ID
from attn_study.models import outputs


def attended(batch: dict) -> torch.Tensor:
    """The positions attention may weigh (B, T): the text's tokens, ``token_mask`` when the data has boundary
    tokens (the encoder still reads those), else every real token."""
    return batch.get("token_mask", batch["mask"])


def restrict(logits: torch.Tensor, candidates: torch.Tensor | None) -> torch.Tensor:
    """Logits with the answers not in ``candidates`` set to −1e9 (probability 0)."""
    return logits if candidates is None else logits.masked_fill(~candidates, -1e9)


@dataclass
class Encoded:
    """Everything ``decode`` and the tests need from one encoder pass."""

    embedded: torch.Tensor  # (B, T, d)
    hidden: torch.Tensor  # (B, T, m)
    mask: torch.Tensor  # (B, T) bool, True on the items attention weighs (the text's tokens, no <sos>/<eos>)
    lengths: torch.Tensor  # (B,): the sequences' lengths as the encoder read them (boundary tokens included)
    query: torch.Tensor | None = None  # (B, m) for pair tasks
    candidates: torch.Tensor | None = None  # (B, C) bool: allowed answers (QA), None = all
    selection: torch.Tensor | None = None  # (B, T): the selected tokens of a selector–predictor model
    fixed_attention: torch.Tensor | None = None  # (B, T): another run's α (attention=preloaded, the W&P adversary)
    fixed_lengths: torch.Tensor | None = None  # (B,): the lengths that α was computed on
    projected: dict = field(default_factory=dict, repr=False)  # decode_many's cache of W h_t


_AFFINE_SHORTCUT = [True]


@contextlib.contextmanager
def general_decoding():
    """Within this block ``decode_many`` pools every attention (the affine shortcut off): the
    reference the shortcut is tested and benchmarked against."""
    _AFFINE_SHORTCUT.append(False)
    try:
        yield
    finally:
        _AFFINE_SHORTCUT.pop()


def embedding_table(vocab_size: int, dim: int, pretrained: np.ndarray | None, freeze: bool) -> nn.Embedding:
    """A token table: ``pretrained`` rows where given (else N(0, 1) draws), the padding row 0, trained unless
    ``freeze``."""
    table = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
    if pretrained is not None:
        table.weight.data.copy_(torch.as_tensor(pretrained))
    table.weight.requires_grad_(not freeze)
    return table


class AttentionClassifier(nn.Module):
    """Single-text classifier with one attention over the encoder states (the ``flat`` model).

    ``encoder`` and ``scorer`` are factories (Hydra partials): ``encoder(input_dim=d)`` and
    ``scorer(hidden_dim=m)``; ``projection`` is a module ``(scores, mask) → α``. ``dropout`` applies to
    the pooled vector (the classification layer) and, unless ``word_dropout`` is given, to the
    embeddings before the encoder (Serrano & Smith's FLANs set the two apart).
    """

    token_attention = True  # α is over the input tokens (token-importance tests apply)

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        encoder,
        scorer,
        projection: nn.Module,
        embedding_dim: int = 300,
        dropout: float = 0.0,
        pretrained: np.ndarray | None = None,
        freeze_embeddings: bool = False,
        word_dropout: float | None = None,
    ):
        super().__init__()
        self.num_classes = num_classes
        if pretrained is not None and pretrained.shape != (vocab_size, embedding_dim):
            raise ValueError(f"pretrained embeddings {pretrained.shape} != ({vocab_size}, {embedding_dim})")
        self.embedding = embedding_table(vocab_size, embedding_dim, pretrained, freeze_embeddings)
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
        lengths = batch["lengths"]
        hidden = self.encoder(self.word_dropout(embedded), batch["mask"], lengths)
        return Encoded(
            embedded=embedded,
            hidden=hidden,
            mask=attended(batch),
            lengths=lengths,
            candidates=batch.get("candidates"),
            fixed_attention=batch.get("fixed_attention"),
            fixed_lengths=batch.get("fixed_lengths"),
        )

    def attend(self, enc: Encoded) -> torch.Tensor:
        if getattr(self.scorer, "fixed", False):  # attention=preloaded: another run's α
            return self.scorer.attention(enc.fixed_attention, enc.mask, enc.lengths, enc.fixed_lengths)
        return self.projection(self.scorer(enc.hidden, enc.query), enc.mask)

    def pool(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """c = Σ_t α_t h_t."""
        return torch.einsum("bt,btm->bm", alpha, enc.hidden)

    def decode(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        """Logits from the attention ``alpha`` (B, T) over ``enc``'s states."""
        return self.decode_pooled(self.pool(enc, alpha), enc.query, enc.candidates)

    def decode_pooled(
        self, context: torch.Tensor, query: torch.Tensor | None = None, candidates: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits from a pooled vector c (N, m) — the zero vector included. ``query`` (N, m): the
        query encoding of pair tasks; ``candidates`` (N, C): answers allowed (others get −1e9)."""
        return restrict(self.output(self.dropout(self.combine(context, query))), candidates)

    def combine(self, context: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """The decoder's input: c itself for single-text tasks."""
        return context

    def decode_many(self, enc: Encoded, alphas: torch.Tensor) -> torch.Tensor:
        """Logits (B, K, C) for K attentions per instance, ``alphas`` (B, K, T), without re-encoding;
        through the projected states U_t = W h_t when the affine shortcut applies (module docstring)."""
        b, k, _ = alphas.shape

        def repeat(x):
            return None if x is None else x.repeat_interleave(k, dim=0)

        projected = self.projected_states(enc)
        if projected is None:
            context = torch.einsum("bkt,btm->bkm", alphas, enc.hidden).reshape(b * k, -1)
            return self.decode_pooled(context, repeat(enc.query), repeat(enc.candidates)).reshape(b, k, -1)
        first = torch.einsum("bkt,btn->bkn", alphas, projected).reshape(b * k, -1)
        if self.first_layer().bias is not None:
            first = first + self.first_layer().bias
        return self.decode_first_layer(first, repeat(enc.query), repeat(enc.candidates)).reshape(b, k, -1)

    def _decoder_is_known(self) -> bool:
        """Whether ``first_layer``/``decode_first_layer`` describe this class's decoder: a subclass that
        changes ``decode_pooled``, or ``combine`` without saying how its first layer splits off, is
        decoded the general way."""

        def owner(name):
            return next(c for c in type(self).__mro__ if name in vars(c))

        return owner("decode_pooled") is AttentionClassifier and owner("combine") is owner(
            "decode_first_layer"
        ) is owner("first_layer")

    def first_layer(self) -> nn.Linear:
        """The decoder's first layer, affine in the pooled vector c (flat: the output layer)."""
        return self.output

    def decode_first_layer(
        self, first: torch.Tensor, query: torch.Tensor | None, candidates: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits from the first layer's output W c + b (flat: they are the logits)."""
        return restrict(first, candidates)

    def projected_states(self, enc: Encoded) -> torch.Tensor | None:
        """U = H Wᵀ (B, T, n), W the first layer's weight, computed once per ``enc`` (and again if its
        states change); None where the shortcut does not apply: training mode (dropout), inside
        :func:`general_decoding`, or states that require gradients (nothing is cached across graphs)."""
        if self.training or not _AFFINE_SHORTCUT[-1] or enc.hidden.requires_grad or not self._decoder_is_known():
            return None
        weight = self.first_layer().weight
        key = (id(enc.hidden), enc.hidden._version, id(weight), weight._version)
        if enc.projected.get("key") != key:
            enc.projected.update(key=key, value=enc.hidden @ weight.T)
        return enc.projected["value"]

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
        return outputs.probabilities(logits)


class PairAttentionClassifier(AttentionClassifier):
    """Attention over a passage conditioned on a second sequence (QA question, NLI hypothesis).

    Passage and question have separate encoders of the same type; the query q is the question
    encoder's summary (BiLSTM last states, CNN max-pool, mean otherwise); scores φ(h_t, q) come from
    the configured scorer with query_dim = m; the output is Linear(tanh(W_p c + W_q q)) as Jain &
    Wallace, restricted to the allowed answers when the batch has ``candidates``. W_p, W_q: m → ``decoder_dim``
    (None: m // 2, as their ``AttnDecoderQA``). ``separate_query_embeddings``: the question reads its own
    embedding table (started from the same pretrained vectors, else its own N(0, 1) draws), as Jain & Wallace's
    code gives each of its two encoders its own ``nn.Embedding``; else the passage's.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        encoder,
        scorer,
        projection: nn.Module,
        embedding_dim: int = 300,
        decoder_dim: int | None = 128,
        dropout: float = 0.0,
        pretrained: np.ndarray | None = None,
        freeze_embeddings: bool = False,
        separate_query_embeddings: bool = False,
    ):
        super().__init__(
            vocab_size, num_classes, encoder, scorer, projection, embedding_dim, dropout, pretrained, freeze_embeddings
        )
        # None: the passage's table (a shared table is not registered twice)
        self.query_embedding = (
            embedding_table(vocab_size, embedding_dim, pretrained, freeze_embeddings)
            if separate_query_embeddings
            else None
        )
        m = self.encoder.output_dim
        decoder_dim = m // 2 if decoder_dim is None else decoder_dim  # None: Jain & Wallace's AttnDecoderQA
        # the question's encoder: the same type, with what the passage's encoder withholds from it (question_options)
        self.question_encoder = encoder(input_dim=embedding_dim, **getattr(self.encoder, "question_options", {}))
        self.scorer = scorer(hidden_dim=m, query_dim=m)
        self.w_context = nn.Linear(m, decoder_dim)
        self.w_query = nn.Linear(m, decoder_dim, bias=False)
        self.output = nn.Linear(decoder_dim, 1 if num_classes == 2 else num_classes)

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        enc = super().encode(batch, embedded)
        mask, lengths = batch["query_mask"], batch["query_lengths"]
        table = self.embedding if self.query_embedding is None else self.query_embedding
        states = self.question_encoder(self.word_dropout(table(batch["query_ids"])), mask, lengths)
        enc.query = self.question_encoder.summarize(states, mask, lengths)
        return enc

    def combine(self, context: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
        """tanh(W_p c + W_q q)."""
        return torch.tanh(self.w_context(context) + self.w_query(query))

    def first_layer(self) -> nn.Linear:
        return self.w_context

    def decode_first_layer(
        self, first: torch.Tensor, query: torch.Tensor | None, candidates: torch.Tensor | None
    ) -> torch.Tensor:
        """Linear(tanh(W_p c + b_p + W_q q)) from W_p c + b_p."""
        return restrict(self.output(self.dropout(torch.tanh(first + self.w_query(query)))), candidates)
