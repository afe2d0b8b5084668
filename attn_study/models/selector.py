"""Selector–predictor explainer (instance-wise feature selection in the style of L2X, Chen et al. 2018),
the attention-based interpretation model of Bai et al. (2021).

    s = scorer(selector_encoder(E_s))                       selection scores over the tokens (B, T)
    m = select(s)                                           a k-token mask (B, T) in [0, 1]
    logits = output(pool_m(predictor_encoder(E_p ⊙ m)))     the prediction from the selected tokens only

(E_s, E_p: the selector's and the predictor's embeddings of the same tokens.)

- Training: a relaxed top-k, L2X's continuous subset sampling: k independent Gumbel-softmax draws
  over the tokens at temperature τ, m = their element-wise maximum. Test (eval mode): the hard top-k —
  exactly min(k, length) real tokens, never padding.
- The predictor sees only the selected tokens: an unselected token's embedding is multiplied by 0 (its
  position stays, as an all-zero vector); the predictor's states are pooled with the mask's weights
  m_t / Σ m, so unselected positions never reach the output directly. (An encoder with context — an
  LSTM — still passes position information along the zero vectors: that is the channel through which
  *which* tokens were selected can encode the label, Bai et al.'s combinatorial shortcut.)

The model also has the staged shape the analyses use (``encode``, ``attend`` = m / Σ m, ``decode``),
so the shortcut measures treat it like any attention model.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from attn_study.data.text import PAD_ID, UNK_ID
from attn_study.models import outputs
from attn_study.models.classifier import Encoded, attended

_NEG = -1e9


def hard_top_k(scores: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """1 on the min(k, length) real tokens with the highest scores (ties: earlier position), else 0."""
    scores = scores.masked_fill(~mask, _NEG)
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(scores.shape[1], device=scores.device).expand_as(order)
    )
    return ((rank < k) & mask).to(scores.dtype)


def relaxed_top_k(
    scores: torch.Tensor, mask: torch.Tensor, k: int, temperature: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """L2X's relaxed subset: max over k Gumbel-softmax samples of softmax((log p + g) / τ), p = softmax(s)."""
    logits = torch.log_softmax(scores.masked_fill(~mask, _NEG), dim=-1)
    uniform = torch.rand((k, *scores.shape), generator=generator, device=scores.device, dtype=scores.dtype)
    gumbel = -torch.log(-torch.log(uniform.clamp(1e-20, 1.0 - 1e-7)))
    samples = torch.softmax((logits[None] + gumbel) / temperature, dim=-1)
    return samples.max(0).values * mask


def random_subsets(mask: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A uniformly random k-subset of the real tokens of each row (all of them when fewer): drawn from
    the mask alone, independently of the input's content."""
    keys = torch.rand(mask.shape, generator=generator, device=mask.device)
    return hard_top_k(keys, mask, k)


class SelectorPredictor(nn.Module):
    """An explainer that selects ``k`` tokens and classifies from them alone (see the module docstring).

    ``encoder`` and ``scorer`` are factories (Hydra partials) as for the flat model. The selector and the
    predictor are separate networks, as in L2X: each has its own embedding table (both initialised from
    ``pretrained`` when given) and its own encoder of that type. ``embed``/``encode`` are the predictor's
    (gradient-based analyses differentiate through the predictor; the selection is a function of the ids).
    """

    token_attention = True

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        encoder,
        scorer,
        projection: nn.Module | None = None,
        k: int = 5,
        temperature: float = 0.5,
        embedding_dim: int = 300,
        dropout: float = 0.0,
        pretrained: np.ndarray | None = None,
        freeze_embeddings: bool = False,
    ):
        super().__init__()
        if int(k) < 1:
            raise ValueError(f"model.network.k={k}: select at least one token")
        self.num_classes, self.k, self.temperature = num_classes, int(k), float(temperature)
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)  # the predictor's
        self.selector_embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
        for table in (self.embedding, self.selector_embedding):
            if pretrained is not None:
                table.weight.data.copy_(torch.as_tensor(pretrained))
            table.weight.requires_grad_(not freeze_embeddings)
        self.selector_encoder = encoder(input_dim=embedding_dim)
        self.scorer = scorer(hidden_dim=self.selector_encoder.output_dim)
        self.encoder = encoder(input_dim=embedding_dim)  # the predictor's
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(self.encoder.output_dim, 1 if num_classes == 2 else num_classes)
        self.generator: torch.Generator | None = None  # Gumbel noise; None: the global RNG

    # -- selection -------------------------------------------------------------------------------

    def embed(self, batch: dict) -> torch.Tensor:
        return self.embedding(batch["ids"])

    def selection_scores(self, batch: dict) -> torch.Tensor:
        embedded = self.selector_embedding(batch["ids"])
        hidden = self.selector_encoder(self.dropout(embedded), batch["mask"], batch["lengths"])
        return self.scorer(hidden, None)

    def select(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Relaxed top-k while training, hard top-k otherwise."""
        if self.training:
            return relaxed_top_k(scores, mask, self.k, self.temperature, self.generator)
        return hard_top_k(scores, mask, self.k)

    # -- the staged shape --------------------------------------------------------------------------

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        """The predictor's states of the masked input, with the selection in ``enc.selection``."""
        embedded = self.embed(batch) if embedded is None else embedded
        selection = self.select(self.selection_scores(batch), attended(batch))
        enc = self.encode_selected(batch, selection, embedded)
        enc.selection = selection
        return enc

    def encode_selected(
        self, batch: dict, selection: torch.Tensor, embedded: torch.Tensor | None = None, neutral: bool = False
    ) -> Encoded:
        """Predictor states of the input with ``selection`` (B, T) applied; with ``neutral`` every
        token's content is replaced by the same neutral token (``<unk>``), so only *where* the
        selection falls reaches the predictor (the mask-only test)."""
        if neutral:
            embedded = self.embedding(torch.full_like(batch["ids"], UNK_ID))
        elif embedded is None:
            embedded = self.embed(batch)
        kept = self.dropout(embedded) * selection.unsqueeze(-1)
        hidden = self.encoder(kept, batch["mask"], batch["lengths"])
        return Encoded(embedded=embedded, hidden=hidden, mask=attended(batch), lengths=batch["lengths"])

    def attend(self, enc: Encoded) -> torch.Tensor:
        """The pooling weights m / Σ m (the selection, normalised)."""
        selection = enc.selection * enc.mask
        return selection / selection.sum(-1, keepdim=True).clamp_min(1e-12)

    def decode_pooled(self, context: torch.Tensor, query=None, candidates=None) -> torch.Tensor:
        return self.output(self.dropout(context))

    def decode(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        return self.decode_pooled(torch.einsum("bt,btm->bm", alpha, enc.hidden))

    def decode_many(self, enc: Encoded, alphas: torch.Tensor) -> torch.Tensor:
        b, k, _ = alphas.shape
        return self.decode_pooled(torch.einsum("bkt,btm->bkm", alphas, enc.hidden).reshape(b * k, -1)).reshape(b, k, -1)

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        enc = self.encode(batch)
        alpha = self.attend(enc)
        return self.decode(enc, alpha), alpha

    def forward_with_attention(self, batch: dict, selection: torch.Tensor) -> torch.Tensor:
        """Logits from a given selection (B, T) instead of the selector's (random-attention pretraining)."""
        enc = self.encode_selected(batch, selection)
        enc.selection = selection
        return self.decode(enc, self.attend(enc))

    def random_attention(self, mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random k-subset of the real tokens, drawn from the mask alone."""
        return random_subsets(mask, self.k, generator)

    def attention_parameters(self):
        """The selector's parameters: what phase 2 of random-attention pretraining trains."""
        return [
            p
            for n, p in self.named_parameters()
            if n.startswith(("selector_embedding.", "selector_encoder.", "scorer."))
        ]

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        return outputs.probabilities(logits)


def hard_selection(model) -> bool:
    """Whether ``model``'s attention is a hard selection of tokens (a selector's k-token mask)."""
    return isinstance(model, SelectorPredictor)


def soft_token_attention(model) -> bool:
    """Whether ``model``'s attention is a distribution over its input tokens (flat and pair models; not a
    HAN's sentence attention, not a selector's hard k-subset)."""
    return bool(getattr(model, "token_attention", False)) and not isinstance(model, SelectorPredictor)
