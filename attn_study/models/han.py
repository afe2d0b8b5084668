"""Hierarchical attention network (HAN; Yang et al. 2016, as Serrano & Smith 2019 use it).

    words of each sentence → word encoder → word attention → sentence vectors s_1..s_S
    sentence vectors       → sentence encoder → sentence attention α (B, S) → Linear (+ softmax)

The staged API is the flat model's (``AttentionClassifier``): ``encode`` runs everything up to the
sentence encoder and returns sentence states, so ``attend``/``decode``/``decode_many``/``pool``
work on the FINAL (sentence-level) attention — the one Serrano & Smith's tests manipulate — without
re-encoding. ``Encoded.embedded`` is still the token embeddings (B, T, d), so gradients w.r.t. a
leaf embedding (``encode(batch, embedded=E)``) work as for the flat model.

The batch needs ``sentence_ids`` (B, T): the sentence index of each token, −1 on padding, which
``collate`` builds when the dataset was processed with ``Preprocessing(sentences=True)``
(``dataset.preprocessing.sentences=true``; ``model=han`` sets it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from attn_study.models.classifier import AttentionClassifier, Encoded

MISSING_SENTENCES = (
    "the hierarchical model needs sentence boundaries: the batch has no 'sentence_ids'. Process the "
    "dataset with sentence splitting: dataset.preprocessing.sentences=true (model=han sets it; with "
    "another model config add it as +dataset.preprocessing.sentences=true), or "
    "Preprocessing(sentences=True) in Python"
)


@dataclass
class HierarchicalEncoded(Encoded):
    """``Encoded`` of the HAN: ``hidden``/``mask``/``lengths`` are over SENTENCES (B, S, m), (B, S),
    (B,); ``embedded`` is over tokens (B, T, d). Extra, for inspection and token-level views:
    ``word_attention`` (B, T): each token's weight within its sentence (each real sentence's weights
    sum to 1; 0 on padding); ``token_sentences`` (B, T): the index (into the S sentence states) of
    each token's sentence, −1 on padding. A token's overall weight is
    ``alpha.gather(1, token_sentences.clamp_min(0)) * word_attention``."""

    word_attention: torch.Tensor | None = None
    token_sentences: torch.Tensor | None = None


class HierarchicalAttentionClassifier(AttentionClassifier):
    """HAN with the configured encoder at both levels, and its own scorer per level.

    ``encoder`` and ``scorer`` are factories (Hydra partials) as for ``AttentionClassifier``: the
    word encoder is ``encoder(input_dim=d)``, the sentence encoder ``encoder(input_dim=m_w)``; the word
    scorer ``scorer(hidden_dim=m_w)`` and the sentence scorer ``scorer(hidden_dim=m)``. ``projection``
    (softmax, sparsemax, ...) maps scores to weights at both levels.

    Dropout as Serrano & Smith's appendix A.1: ``word_dropout`` before the word (sentence-building)
    encoder, ``sentence_dropout`` before the sentence (document) encoder, ``dropout`` in the
    classification layer (on the document vector, exactly where the flat model applies it).

    Module names: ``encoder``/``scorer`` are the SENTENCE level (the final attention, as the flat
    model's), ``word_encoder``/``word_scorer`` the word level.
    """

    token_attention = False  # the final attention is over sentences, not tokens

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        encoder,
        scorer,
        projection: nn.Module,
        embedding_dim: int = 200,
        dropout: float = 0.0,
        pretrained: np.ndarray | None = None,
        freeze_embeddings: bool = False,
        word_dropout: float = 0.0,
        sentence_dropout: float = 0.0,
    ):
        # the parent builds the embedding table and an encoder and scorer over the embeddings: those
        # are the word level; the sentence level and the output layer are built on top of them
        super().__init__(
            vocab_size, num_classes, encoder, scorer, projection, embedding_dim, dropout, pretrained, freeze_embeddings
        )
        self.word_encoder = self.encoder
        self.word_scorer = self.scorer
        self.encoder = encoder(input_dim=self.word_encoder.output_dim)
        self.scorer = scorer(hidden_dim=self.encoder.output_dim)
        self.output = nn.Linear(self.encoder.output_dim, 1 if num_classes == 2 else num_classes)
        self.word_dropout = nn.Dropout(word_dropout)
        self.sentence_dropout = nn.Dropout(sentence_dropout)

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> HierarchicalEncoded:
        """Sentence states for ``batch``; pass ``embedded`` (B, T, d) to encode given embeddings.

        Tokens are scattered into a grid of the batch's real sentences (N, W) — N = number of real
        sentences in the batch, W = the longest — so the word encoder never sees an empty sentence
        and no sentence depends on padding; the sentence vectors are scattered into (B, S, m_w),
        S = the most sentences of an instance, for the sentence encoder (mask = real sentences).
        """
        if "sentence_ids" not in batch:
            raise ValueError(MISSING_SENTENCES)
        if "query_ids" in batch:
            raise ValueError(
                "the hierarchical model is for single-text tasks; this batch has a query "
                "(a QA / NLI dataset): use model=pair"
            )
        if embedded is None:
            embedded = self.embed(batch)
        sid, mask = batch["sentence_ids"], batch["mask"]
        grid = _sentence_grid(sid, _real_tokens(sid, mask))
        word_alpha, vectors = self._encode_words(embedded, grid)
        hidden, sentence_mask = self._encode_sentences(vectors, grid)
        word_attention, token_sentences = _token_views(word_alpha, grid, mask.shape)
        return HierarchicalEncoded(
            embedded=embedded,
            hidden=hidden,
            mask=sentence_mask,
            lengths=grid.lengths,
            candidates=batch.get("candidates"),
            word_attention=word_attention,
            token_sentences=token_sentences,
        )

    def _encode_words(self, embedded: torch.Tensor, grid: _SentenceGrid) -> tuple[torch.Tensor, torch.Tensor]:
        """Word level: the (dropped-out) token embeddings of each real sentence in an (N, W, d) grid →
        word encoder → word attention α_w (N, W) (0 beyond a sentence's length) → sentence vectors
        s_n = Σ_w α_nw h_nw (N, m_w). Returns (α_w, vectors)."""
        x = self.word_dropout(embedded)
        words = x.new_zeros(grid.n_sentences, grid.width, x.shape[-1]).index_put(grid.cells, x[grid.tokens])
        word_mask = torch.arange(grid.width, device=x.device)[None, :] < grid.word_lengths[:, None]
        word_states = self.word_encoder(words, word_mask, grid.word_lengths)
        word_alpha = self.projection(self.word_scorer(word_states), word_mask)
        vectors = torch.einsum("nw,nwm->nm", word_alpha, word_states)
        return word_alpha, vectors

    def _encode_sentences(self, vectors: torch.Tensor, grid: _SentenceGrid) -> tuple[torch.Tensor, torch.Tensor]:
        """Sentence level: the sentence vectors (N, m_w) in a (B, S, m_w) grid, S = the most sentences of
        an instance → (dropped-out) → sentence encoder. Returns the states (B, S, m) and the mask of
        real sentences (B, S)."""
        b, s_max = grid.lengths.shape[0], int(grid.lengths.max())
        sentences = vectors.new_zeros(b, s_max, vectors.shape[-1]).index_put(grid.slots, vectors)
        sentence_mask = torch.arange(s_max, device=vectors.device)[None, :] < grid.lengths[:, None]
        hidden = self.encoder(self.sentence_dropout(sentences), sentence_mask, grid.lengths)
        return hidden, sentence_mask


class _SentenceGrid(NamedTuple):
    """Where a batch's real tokens and sentences go (index tensors, int64).

    ``tokens`` (bt, tt): the (instance, position) of each real token, row-major; ``cells`` (rows, cols):
    each such token's cell in the (N, W) word grid (its sentence's index among the batch's real
    sentences, its offset in that sentence); ``word_lengths`` (N,): tokens per real sentence;
    ``n_sentences`` N and ``width`` W (ints); ``slots`` (bs, slot): each real sentence's cell in the
    (B, S) sentence grid; ``lengths`` (B,): real sentences per instance; ``token_slots``: each real
    token's sentence slot (the index into the S sentence states).
    """

    tokens: tuple[torch.Tensor, torch.Tensor]
    cells: tuple[torch.Tensor, torch.Tensor]
    word_lengths: torch.Tensor
    n_sentences: int
    width: int
    slots: tuple[torch.Tensor, torch.Tensor]
    lengths: torch.Tensor
    token_slots: torch.Tensor


def _real_tokens(sid: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The real tokens (B, T) bool = ``mask`` & (sentence_ids ≥ 0), after checking that ``sid`` matches the
    mask's shape, is ≥ 0 on every real token and is non-decreasing along each instance (ValueError otherwise)."""
    if sid.shape != mask.shape:
        raise ValueError(f"sentence_ids {tuple(sid.shape)} does not match the token mask {tuple(mask.shape)}")
    real = mask & (sid >= 0)
    if bool((real != mask).any()):
        raise ValueError("sentence_ids is -1 on a real token: every real token needs a sentence")
    if bool(((sid[:, 1:] < sid[:, :-1]) & real[:, 1:]).any()):
        raise ValueError("sentence_ids must be non-decreasing along each instance (contiguous sentences)")
    return real


def _sentence_grid(sid: torch.Tensor, real: torch.Tensor) -> _SentenceGrid:
    """Index maps from sentence ids (B, T) and the real tokens: per raw id (B, S_raw), S_raw = max id + 1,
    the token count and the first token; the present sentences (count > 0: ids need not be consecutive)
    numbered within their instance (the slot) and across the batch, row-major (the word-grid row)."""
    b, t = real.shape
    device = real.device
    sid0 = sid.clamp_min(0)
    s_raw = int(sid.max()) + 1
    # tokens per sentence and first token of each sentence, (B, S_raw)
    counts = torch.zeros(b, s_raw, dtype=torch.long, device=device).scatter_add_(1, sid0, real.long())
    position = torch.arange(t, device=device).expand(b, t)
    start = torch.full((b, s_raw), t, dtype=torch.long, device=device).scatter_reduce_(
        1, sid0, position.masked_fill(~real, t), reduce="amin"
    )
    present = counts > 0  # sentences with tokens (ids need not be consecutive)
    lengths = present.sum(1)  # sentences per instance
    compact = present.long().cumsum(1) - 1  # index of each present sentence within its instance
    row = present.flatten().long().cumsum(0).view(b, s_raw) - 1  # index among the batch's sentences
    bt, tt = real.nonzero(as_tuple=True)
    st = sid[bt, tt]
    bs, ss = present.nonzero(as_tuple=True)  # row-major, as ``row``
    return _SentenceGrid(
        tokens=(bt, tt),
        cells=(row[bt, st], tt - start[bt, st]),
        word_lengths=counts[present],
        n_sentences=int(present.sum()),
        width=int(counts.max()),
        slots=(bs, compact[bs, ss]),
        lengths=lengths,
        token_slots=compact[bt, st],
    )


def _token_views(word_alpha: torch.Tensor, grid: _SentenceGrid, shape: torch.Size) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level views (B, T) = ``shape``: each token's word-attention weight within its sentence (0 on
    padding) and its sentence slot (−1 on padding)."""
    word_attention = word_alpha.new_zeros(shape).index_put(grid.tokens, word_alpha[grid.cells])
    token_sentences = torch.full(shape, -1, dtype=torch.long, device=word_alpha.device).index_put(
        grid.tokens, grid.token_slots
    )
    return word_attention, token_sentences
