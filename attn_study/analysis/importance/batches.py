"""What every importance method shares: the prediction, the embeddings as a leaf, batches cut to the instances
and lengths a computation needs (similar lengths together: little padding), and predictions with tokens kept."""

from __future__ import annotations

import contextlib

import torch

from attn_study.models.classifier import attended

TINY = 1e-30


def grad_context(device: torch.device):
    # cuDNN's RNN backward refuses eval mode; gradients of an eval-mode model need it off
    return torch.backends.cudnn.flags(enabled=False) if device.type == "cuda" else contextlib.nullcontext()


def normalise_rows(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """scores / Σ_t scores over real tokens (rows of zeros stay zero)."""
    scores = scores * mask
    return scores / scores.sum(-1, keepdim=True).clamp_min(TINY)


@torch.no_grad()
def predict(model, batch: dict):
    """(enc, α, ŷ) for ``batch``: encoder states, attention, output distribution (B, C)."""
    enc = model.encode(batch)
    alpha = model.attend(enc)
    return enc, alpha, model.probabilities(model.decode(enc, alpha))


def logits_from_leaf(model, batch: dict, detach_attention: bool):
    """(E, logits): the embeddings as a leaf tensor and the logits computed from them (call under
    ``torch.enable_grad()``)."""
    emb = model.embed(batch).detach().requires_grad_(True)
    enc = model.encode(batch, embedded=emb)
    alpha = model.attend(enc)
    if detach_attention:
        alpha = alpha.detach()
    return emb, model.decode(enc, alpha)


#: the text's own tokens (B, T): ``mask`` without the boundary tokens ``<sos>``/``<eos>`` when the data has them
token_mask = attended


#: batch fields aligned with the text's tokens (B, T): they move with the tokens when some are removed
TEXT_FIELDS = ("ids", "mask", "token_mask", "rationale", "markers", "fixed_attention")


def rows_of(batch: dict, rows: torch.Tensor, width: int | None = None) -> dict:
    """The instances ``rows`` of ``batch`` as a batch of their own, its text fields cut to ``width`` columns."""
    n_batch = batch["ids"].shape[0]
    sub = {k: v[rows] for k, v in batch.items() if torch.is_tensor(v) and v.shape[:1] == (n_batch,)}
    if width is not None:
        sub.update({name: sub[name][:, :width] for name in TEXT_FIELDS if name in sub})
    return sub


def equal_length_chunks(lengths: torch.Tensor, chunk_size: int | None = None, slack: float = 0.0) -> list[torch.Tensor]:
    """Indices of ``lengths`` in chunks of similar length (at most ``chunk_size``), shortest first: a chunk holds
    lengths from its shortest L up to (1 + ``slack``)·L; with ``slack=0``, one length each (no padding at all).

    The chunks bound the padding an encoder runs over (at most ``slack`` of a chunk's tokens): padding never
    changes a real position's value (the encoders' contract), only costs time."""
    order = torch.argsort(lengths, stable=True)
    ordered = lengths[order].tolist()
    chunks, start = [], 0
    step = len(ordered) if chunk_size is None else max(int(chunk_size), 1)
    for end in range(1, len(ordered) + 1):
        if end == len(ordered) or ordered[end] > ordered[start] * (1 + slack) or end - start == step:
            chunks.append(order[start:end])
            start = end
    return chunks


#: padding allowed in a chunk of similar lengths (``by_length``'s gradient methods, recurrent leave-one-out): a
#: length-bucketed batch is one or two chunks
GRADIENT_SLACK = 0.125


def by_length(batch: dict, compute) -> list[torch.Tensor]:
    """``compute(rows, sub_batch)`` on the batch's instances in chunks of similar length (``equal_length_chunks``
    with ``GRADIENT_SLACK``: little padding, full-size matrix products), each cut to its longest text, the
    results put back in the batch's order: each (n, L) result as (B, T) with 0 beyond L, each (n,) as (B,)."""
    out: list[torch.Tensor] = []
    t = batch["mask"].shape[1]
    for rows in equal_length_chunks(batch["lengths"], slack=GRADIENT_SLACK):
        width = int(batch["lengths"][rows].max())
        results = [r.detach() for r in compute(rows, rows_of(batch, rows, width))]
        if not out:
            out = [r.new_zeros((len(batch["lengths"]), t) if r.dim() == 2 else len(batch["lengths"])) for r in results]
        for whole, part in zip(out, results):
            if part.dim() == 2:
                whole[rows, : part.shape[1]] = part
            else:
                whole[rows] = part
    return out
