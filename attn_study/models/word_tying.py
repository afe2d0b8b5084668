"""Word-level tying (Tutek & Šnajder 2020, "Staying True to Your Word"): an objective that keeps each hidden
state h_t predictive of its own input word w_t, so that attention over states stays attention over words.

Our implementation (``training.word_tying``), from the paper's description of a word-level objective; their
text was not available while writing it, so details may differ (see docs/mohankumar.md):

- ``kind='predict'``: cross-entropy of w_t given h_t, the logits E·(W h_t + b) through the model's own input
  embedding matrix E (output tied to input), averaged over the attended tokens;
- ``kind='l2'``: the squared distance ‖W h_t + b − e_t‖² to the word's embedding (e_t detached, so the
  embeddings are not pulled towards the states), averaged over the attended tokens.

Either is added to the training loss with weight λ (``weight``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

KINDS = ("predict", "l2")


class WordTying(nn.Module):
    """The map W h_t + b from a state (m) to the embedding space (d) and the word-level loss built on it."""

    def __init__(self, hidden_dim: int, embedding_dim: int, kind: str = "predict"):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"training.word_tying.kind={kind!r}: choose one of {list(KINDS)}")
        self.kind = kind
        self.to_embedding = nn.Linear(hidden_dim, embedding_dim)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor, embedding: nn.Embedding):
        """The mean word-level loss over the positions of ``mask`` (a scalar; 0 with none)."""
        states = self.to_embedding(hidden[mask])
        if states.shape[0] == 0:
            return hidden.sum() * 0.0
        if self.kind == "predict":
            return F.cross_entropy(states @ embedding.weight.T, ids[mask])
        return (states - embedding(ids[mask]).detach()).pow(2).sum(-1).mean()
