"""Feature importance: gradient (Jain & Wallace Algorithm 1, Meister et al. Eqs. 4–5), leave-one-out (signed
or not), input × gradient and integrated gradients (Captum's), and the importance of the intermediate
representations h (Meister et al.). :data:`METHODS` puts the methods that score tokens for the predicted
class behind one signature (:func:`importance`).

All functions take a staged model in eval mode and a batch on the model's device, and return (B, T)
tensors (or (B, T, T)) that are 0 on padding and on boundary tokens.

Gradients "of ŷ" are taken of the predicted class's log-odds ℓ = log(ŷ_c / (1 − ŷ_c))
(``attn_study.models.outputs``): ∇ℓ = ∇ŷ_c / (ŷ_c (1 − ŷ_c)), a positive constant per instance, so
every normalised importance and every ranking is that of ∇ŷ_c — without the float32 saturation that
makes ∇ŷ_c exactly 0 for a confident prediction.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from attn_study.analysis.aggregation import AGGREGATIONS, AggregationOptions, aggregated_importance
from attn_study.analysis.measures import probability_drop, tvd
from attn_study.analysis.seeding import instance_draws
from attn_study.models.classifier import AttentionClassifier, PairAttentionClassifier, attended
from attn_study.models.encoders import CNNEncoder, RNNEncoder, direction_weights, run_direction
from attn_study.models.outputs import log_odds

_TINY = 1e-30


def grad_context(device: torch.device):
    # cuDNN's RNN backward refuses eval mode; gradients of an eval-mode model need it off
    return torch.backends.cudnn.flags(enabled=False) if device.type == "cuda" else contextlib.nullcontext()


def normalise_rows(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """scores / Σ_t scores over real tokens (rows of zeros stay zero)."""
    scores = scores * mask
    return scores / scores.sum(-1, keepdim=True).clamp_min(_TINY)


@torch.no_grad()
def predict(model, batch: dict):
    """(enc, α, ŷ) for ``batch``: encoder states, attention, output distribution (B, C)."""
    enc = model.encode(batch)
    alpha = model.attend(enc)
    return enc, alpha, model.probabilities(model.decode(enc, alpha))


def _logits_from_leaf(model, batch: dict, detach_attention: bool):
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


def gradient_importance(
    model, batch: dict, detach_attention: bool = True, normalise: bool = True, classes: str = "predicted"
) -> torch.Tensor:
    """Jain & Wallace's gradient importance g_t = |∇_{e_t} ŷ_c · e_t| (Algorithm 1), c the predicted
    class (the authors' code, and the usual saliency convention); ``classes='sum'``: Σ_c over every
    output (what an earlier reading of the paper did; the same after normalising for two classes).

    e_t is the embedding of token t; with ``detach_attention`` α is a constant (gradients do not flow
    through the attention). ``∇_{e_t} ŷ_c · e_t`` equals the gradient w.r.t. the one-hot input, and
    Captum's InputXGradient summed over the embedding. Normalised to sum 1 over the text's tokens unless
    ``normalise=False``; unnormalised, the predicted class's scores are those of its log-odds (module
    docstring: ∇ŷ_c / (ŷ_c(1 − ŷ_c))). ``sum`` differentiates each ŷ_c itself (for two classes
    ∇ŷ_0 = −∇ŷ_1, so one backward pass serves both).
    """
    if classes not in ("predicted", "sum"):
        raise ValueError(f"gradient classes={classes!r}: choose 'predicted' or 'sum'")

    def compute(rows, sub):
        with torch.enable_grad(), grad_context(sub["mask"].device):
            emb, logits = _logits_from_leaf(model, sub, detach_attention)
            if classes == "predicted":
                (grad,) = torch.autograd.grad(log_odds(logits).sum(), emb)
                return ((grad * emb).sum(-1).abs(),)
            probs = model.probabilities(logits)
            outputs, factor = ([1], 2.0) if probs.shape[1] == 2 else (range(probs.shape[1]), 1.0)
            scores = torch.zeros(emb.shape[:2], device=emb.device, dtype=emb.dtype)
            for c in outputs:
                (grad,) = torch.autograd.grad(probs[:, c].sum(), emb, retain_graph=True)
                scores = scores + factor * (grad * emb).sum(-1).abs()
            return (scores,)

    mask = token_mask(batch)
    (scores,) = by_length(batch, compute)
    scores = scores * mask
    return normalise_rows(scores, mask) if normalise else scores


def gradient_norm_importance(
    model, batch: dict, detach_attention: bool = False, normalise: bool = True
) -> torch.Tensor:
    """Meister et al.'s g_ŷ(x_t) = ‖∂ŷ/∂e_t‖₂ / Σ_k ‖∂ŷ/∂e_k‖₂ (Eq. 4), ŷ the predicted class's
    probability (differentiated through its log-odds: the same once normalised); the gradient flows
    through the attention unless ``detach_attention``."""

    def compute(rows, sub):
        with torch.enable_grad(), grad_context(sub["mask"].device):
            emb, logits = _logits_from_leaf(model, sub, detach_attention)
            (grad,) = torch.autograd.grad(log_odds(logits).sum(), emb)
        return (grad.norm(dim=-1),)

    mask = token_mask(batch)
    (scores,) = by_length(batch, compute)
    scores = scores * mask
    return normalise_rows(scores, mask) if normalise else scores


def distribution(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """scores / Σ_t scores over real tokens; a row with nothing to normalise (all 0) is NaN, not a
    distribution, so that it never passes for a perfectly concentrated one."""
    scores = scores * mask
    total = scores.sum(-1, keepdim=True)
    return torch.where(total > 0, scores / total.clamp_min(_TINY), torch.full_like(scores, float("nan")))


def input_to_hidden_gradients(model, batch: dict, chunk_size: int = 256) -> torch.Tensor:
    """G (B, T, T), G[b, p, i] = ‖∂‖h_p‖₂ / ∂e_i‖₂ for every position p and token i of the text of every
    instance: Meister et al.'s Eq. 5 before normalising over i (0 on padding and boundary-token rows and
    columns).

    Reverse mode needs one backward pass per output p. They are vectorised by replicating: each
    (instance, p) pair is one row of a batch of at most ``chunk_size`` sequences of one length, encoded once, and
    one backward pass of Σ_rows ‖h_{row, p(row)}‖ gives every row its gradient (instances never
    interact, so a row's gradient is exactly its own). This is the same as a per-p loop of backward
    passes (tested), with large matrix products in place of T small ones.
    """
    mask = token_mask(batch)
    b, t = mask.shape
    inst, pos = mask.nonzero(as_tuple=True)
    with torch.no_grad():
        embedded = model.embed(batch)
    out = torch.zeros(b, t, t, device=mask.device, dtype=embedded.dtype)
    with torch.enable_grad(), grad_context(mask.device):
        for rows in equal_length_chunks(batch["lengths"][inst], chunk_size):  # no padding (equal_length_chunks)
            i, p = inst[rows], pos[rows]
            width = int(batch["lengths"][i[0]])
            leaf = embedded[i, :width].detach().requires_grad_(True)
            hidden = model.encode(rows_of(batch, i, width), embedded=leaf).hidden
            norms = hidden[torch.arange(len(i), device=mask.device), p].norm(dim=-1)
            (grad,) = torch.autograd.grad(norms.sum(), leaf)
            out[i, p, :width] = grad.norm(dim=-1) * mask[i, :width]
    return out


def hidden_gradient_importance(model, batch: dict) -> torch.Tensor:
    """‖∂ŷ/∂h_t‖₂ (B, T), ŷ the predicted class's probability (through its log-odds: the same once
    normalised), h_t a leaf (the gradient reaches the output through the attention scores and the pooled
    vector): Meister et al.'s intermediate FI g_ŷ(h) before normalising."""
    mask = token_mask(batch)
    with torch.no_grad():
        enc = model.encode(batch)
    with torch.enable_grad(), grad_context(mask.device):
        enc.hidden = enc.hidden.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(log_odds(model.decode(enc, model.attend(enc))).sum(), enc.hidden)
    return grad.norm(dim=-1) * mask


def _deletion_index(batch: dict):
    """Every single-token deletion of the batch's instances of length ≥ 2.

    Returns (inst, pos, src): deletion n removes token ``pos[n]`` of instance ``inst[n]``;
    ``src`` (T, T−1) maps position j of a sequence with token t deleted to its original position.
    """
    mask, lengths = batch["mask"], batch["lengths"]
    t_max = mask.shape[1]
    j = torch.arange(max(t_max - 1, 1), device=mask.device)
    src = j[None, :] + (j[None, :] >= torch.arange(t_max, device=mask.device)[:, None]).long()
    src = src.clamp_max(t_max - 1)
    inst, pos = (token_mask(batch) & (lengths[:, None] > 1)).nonzero(as_tuple=True)  # never a boundary token
    return inst, pos, src


def _scores_states(model) -> bool:
    """Whether ``model`` is of attn_study's staged shape with α = projection(scorer(H, q)) — what the deletion
    shortcuts re-use; not a pre-loaded attention (another run's α, renormalised: the general path re-runs it)."""
    return hasattr(model, "scorer") and hasattr(model, "projection") and not getattr(model.scorer, "fixed", False)


def kept_sub_batch(batch: dict, inst: torch.Tensor, keep: torch.Tensor) -> dict:
    """Row n: instance ``inst[n]`` with only its tokens where ``keep[n]`` (N, T) is True, in their order
    (the sequence gets shorter; the other fields, e.g. a question, are the instance's own)."""
    lengths = keep.sum(1)
    width = max(int(lengths.max()), 1)
    # kept positions first, in order (a stable sort of "not kept")
    src = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices[:, :width]
    mask = torch.arange(width, device=inst.device)[None, :] < lengths[:, None]
    n_batch = batch["ids"].shape[0]
    sub = {k: v[inst] for k, v in batch.items() if torch.is_tensor(v) and v.shape[:1] == (n_batch,)}
    for name in TEXT_FIELDS:
        if name in batch:
            sub[name] = batch[name][inst[:, None], src] * mask
    sub.update(lengths=lengths, mask=mask)
    return sub


def _sub_batch(batch: dict, inst: torch.Tensor, pos: torch.Tensor) -> dict:
    """The deleted sequences (inst[n] without token pos[n]) as a batch, other fields per instance."""
    keep = batch["mask"][inst].clone()
    keep[torch.arange(len(inst), device=inst.device), pos] = False
    return kept_sub_batch(batch, inst, keep)


@torch.no_grad()
def kept_probabilities(model, batch: dict, inst: torch.Tensor, keep: torch.Tensor, chunk_size: int = 512):
    """ŷ (N, C) of instance ``inst[n]`` with only its tokens where ``keep[n]`` is True (the rest
    deleted, the whole model re-run), as batched calls of at most ``chunk_size`` sequences of similar
    length. Context-free encoders (``average``, ``noenc``) re-use the states: deleting tokens only
    removes their scores from the attention. Rows keeping no token are NaN."""
    out = None
    lengths = keep.sum(1)
    rows = (lengths > 0).nonzero(as_tuple=True)[0]
    rows = rows[torch.argsort(lengths[rows], stable=True)]  # similar lengths share a call: less padding
    context_free = _scores_states(model) and getattr(getattr(model, "encoder", None), "context_free", False)
    if context_free:
        enc = model.encode(batch)
        scores = model.scorer(enc.hidden, enc.query)
    for s in range(0, len(rows), chunk_size):
        r = rows[s : s + chunk_size]
        if context_free:
            i = inst[r]
            probs = _output_from_states(model, enc, i, enc.hidden[i], scores[i], keep[r] & enc.mask[i])
        else:
            probs = model.probabilities(model(kept_sub_batch(batch, inst[r], keep[r]))[0])
        if out is None:
            out = torch.full((len(inst), probs.shape[1]), float("nan"), device=probs.device, dtype=probs.dtype)
        out[r] = probs
    if out is None:  # no row keeps a token
        out = torch.full((len(inst), int(model.num_classes)), float("nan"), device=keep.device)
    return out


@torch.no_grad()
def deletion_probabilities(model, batch: dict, chunk_size: int = 512):
    """The output distributions with each single token deleted (the sequence gets shorter, the whole
    model re-run): (inst, pos, ŷ(x₋ₜ)) for every deletion n of token ``pos[n]`` of instance
    ``inst[n]`` (instances of length ≥ 2).

    All deletions of the batch run as batched model calls of at most ``chunk_size`` sequences of one length.
    Context-free encoders (``average``, ``noenc``) re-use the states: deleting t only removes its
    score from the attention. Convolutions recompute only the states within their receptive field of
    the deletion. A one-layer LSTM or GRU (in eval mode) runs each direction only past the deletion: its
    states before it are the original's (:func:`_loo_recurrent`) — half the work of a re-run.
    """
    inst, pos, src = _deletion_index(batch)
    if len(inst) == 0:
        return inst, pos, None
    encoder = getattr(model, "encoder", None)
    shortcuts = _scores_states(model)
    if shortcuts and getattr(encoder, "context_free", False):
        deleted = _loo_context_free(model, batch, inst, pos, chunk_size)
    elif shortcuts and isinstance(encoder, CNNEncoder):
        deleted = _loo_convolution(model, batch, inst, pos, src, chunk_size)
    elif shortcuts and _one_layer_rnn(encoder) and _encodes_embeddings(model) and not model.training:
        deleted = _loo_recurrent(model, batch, inst, pos, chunk_size)
    else:  # the deletions of one length together (no padding), as the model sees them: a sequence one shorter
        deleted = None
        for rows in equal_length_chunks(batch["lengths"][inst], chunk_size):
            probs = model.probabilities(model(_sub_batch(batch, inst[rows], pos[rows]))[0])
            if deleted is None:
                deleted = probs.new_empty((len(inst), probs.shape[1]))
            deleted[rows] = probs
    return inst, pos, deleted[_same_sequence(batch, inst, pos)]


def _same_sequence(batch: dict, inst: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """For each deletion n, the first deletion of its run of equal adjacent tokens: deleting any token of a run
    ("the the") leaves the same sequence, so the run shares one output — exactly tied, never told apart by
    rounding (a rank statistic such as Kendall's τ-b counts them as ties)."""
    n = torch.arange(len(inst), device=inst.device)
    ids = batch["ids"]
    follows = torch.zeros_like(n, dtype=torch.bool)
    follows[1:] = (
        (inst[1:] == inst[:-1]) & (pos[1:] == pos[:-1] + 1) & (ids[inst[1:], pos[1:]] == ids[inst[:-1], pos[:-1]])
    )
    return torch.where(follows, torch.zeros_like(n), n).cummax(0).values


@torch.no_grad()
def leave_one_out(
    model, batch: dict, probs: torch.Tensor | None = None, chunk_size: int = 512, predicted: bool = False
) -> torch.Tensor:
    """Δŷ_t = TVD(ŷ(x₋ₜ), ŷ(x)) for each token t (Jain & Wallace); with ``predicted``, the change
    |ŷ_c(x₋ₜ) − ŷ_c(x)| of the predicted class c's probability instead (Meister et al. Eq. 6 before
    normalising; the same for two classes). Instances of length 1 get NaN (nothing is left to run);
    padding gets 0. See :func:`deletion_probabilities` for how the deletions are batched.
    """
    if probs is None:
        probs = predict(model, batch)[2]
    out = torch.zeros(batch["mask"].shape, device=probs.device, dtype=probs.dtype)
    out[batch["lengths"] == 1, 0] = float("nan")
    inst, pos, deleted = deletion_probabilities(model, batch, chunk_size)
    if deleted is None:
        return out
    if predicted:
        out[inst, pos] = probability_drop(probs[inst], deleted, probs.argmax(-1)[inst]).abs()
    else:
        out[inst, pos] = tvd(deleted, probs[inst])
    return out


def _output_from_states(model, enc, index, hidden, scores, mask) -> torch.Tensor:
    """ŷ from given states and scores of the instances at ``index``: project the scores over
    ``mask``, pool, decode (with those instances' query and answer candidates for pair tasks)."""
    alpha = model.projection(scores, mask)
    context = torch.einsum("nt,ntm->nm", alpha, hidden)
    query, candidates = (None if x is None else x[index] for x in (enc.query, enc.candidates))
    return model.probabilities(model.decode_pooled(context, query, candidates))


def _loo_context_free(model, batch, inst, pos, chunk_size):
    """Output distributions with token pos[n] removed from instance inst[n], states unchanged: per instance, the
    (T, T) attentions of its T single deletions (row p projects the scores with p masked) times its (T, H) states
    in one batched product — the states are never copied per deletion (T × H each: on IMDB the cost of this test).
    At most ``chunk_size`` deletions (⌊chunk_size / T⌋ instances, at least one) per call."""
    enc = model.encode(batch)
    scores = model.scorer(enc.hidden, enc.query)
    b, t = enc.mask.shape
    diagonal = torch.arange(t, device=enc.mask.device)
    out = None
    per_call = max(1, chunk_size // t)
    for s in range(0, b, per_call):
        e = min(b, s + per_call)
        mask = enc.mask[s:e, None, :].expand(-1, t, -1).clone()  # (g, deleted position, T)
        mask[:, diagonal, diagonal] = False
        alpha = model.projection(scores[s:e, None, :].expand(-1, t, -1).reshape(-1, t), mask.reshape(-1, t))
        context = torch.bmm(alpha.reshape(e - s, t, t), enc.hidden[s:e])  # (g, deleted position, H)
        chosen = ((inst >= s) & (inst < e)).nonzero().squeeze(1)
        if len(chosen) == 0:
            continue
        i, p = inst[chosen], pos[chosen]
        query, candidates = (None if x is None else x[i] for x in (enc.query, enc.candidates))
        probs = model.probabilities(model.decode_pooled(context[i - s, p], query, candidates))
        if out is None:
            out = probs.new_empty((len(inst), probs.shape[1]))
        out[chosen] = probs
    return out


def _loo_convolution(model, batch, inst, pos, src, chunk_size):
    """As a full re-run, but only the states within ±r of the deletion are recomputed (r: the
    receptive radius); the others are the original states shifted by one."""
    enc = model.encode(batch)
    r = model.encoder.receptive_radius
    t_max = enc.mask.shape[1]
    results = []
    for s in range(0, len(inst), chunk_size):
        i, p = inst[s : s + chunk_size], pos[s : s + chunk_size]
        n = len(i)
        new_len = enc.lengths[i] - 1
        width = int(new_len.max())
        new_mask = torch.arange(width, device=i.device)[None, :] < new_len[:, None]
        hidden = enc.hidden[i[:, None], src[p, :width]] * new_mask.unsqueeze(-1)
        if r > 0:
            # window of the new sequence around the deletion: positions p-2r .. p+2r-1
            offsets = torch.arange(-2 * r, 2 * r, device=i.device)
            win_pos = p[:, None] + offsets[None, :]
            win_valid = (win_pos >= 0) & (win_pos < new_len[:, None])
            win_src = src[p[:, None], win_pos.clamp(0, t_max - 2)]
            win_emb = enc.embedded[i[:, None], win_src] * win_valid.unsqueeze(-1)
            win_h = model.encoder(win_emb, win_valid, win_valid.sum(1))
            # the middle 2r positions (p-r .. p+r-1) see their whole receptive field in the window
            mid = win_pos[:, r : 3 * r]
            keep = (mid >= 0) & (mid < new_len[:, None])
            rows = torch.arange(n, device=i.device)[:, None].expand_as(mid)
            hidden[rows[keep], mid[keep]] = win_h[:, r : 3 * r][keep]
        scores = model.scorer(hidden, None if enc.query is None else enc.query[i])
        attended_after = enc.mask[i[:, None], src[p, :width]] & new_mask  # boundary tokens stay unattended
        results.append(_output_from_states(model, enc, i, hidden, scores, attended_after))
    return torch.cat(results)


def _one_layer_rnn(encoder) -> bool:
    """Whether ``encoder`` is a one-layer (bidirectional) LSTM or GRU (``RNNEncoder``)."""
    rnn = getattr(encoder, "rnn", None)
    return isinstance(encoder, RNNEncoder) and isinstance(rnn, (nn.LSTM, nn.GRU)) and rnn.num_layers == 1


def _encodes_embeddings(model) -> bool:
    """Whether ``model.encode`` feeds ``Encoded.embedded`` to its encoder (the flat and pair models' ``encode``)."""
    return type(model).encode in (AttentionClassifier.encode, PairAttentionClassifier.encode)


def _lstm_cells(rnn, embedded, hidden, mask, reverse: bool) -> torch.Tensor:
    """The cell states c_t (B, T, H) of one direction of an LSTM from its inputs and outputs h_t: its gates at t
    are a function of e_t and the previous h, and c_t = f_t c_{t−1} + i_t g_t (torch's gate order i, f, g, o);
    0 on padding (``mask``: the sequences' positions)."""
    w = direction_weights(rnn, reverse)
    gates = embedded @ w["weight_ih_l0"].T
    if rnn.bias:
        gates = gates + w["bias_ih_l0"] + w["bias_hh_l0"]
    previous = torch.zeros_like(hidden)  # the state before each step, in reading order
    if reverse:
        previous[:, :-1] = hidden[:, 1:]
    else:
        previous[:, 1:] = hidden[:, :-1]
    i, f, g, _ = (gates + previous @ w["weight_hh_l0"].T).chunk(4, dim=-1)
    i, f, g = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g)
    cells = torch.zeros_like(hidden)
    c = hidden.new_zeros(hidden.shape[0], hidden.shape[2])
    steps = range(hidden.shape[1] - 1, -1, -1) if reverse else range(hidden.shape[1])
    for t in steps:
        c = (f[:, t] * c + i[:, t] * g[:, t]) * mask[:, t, None]
        cells[:, t] = c
    return cells


def _loo_recurrent(model, batch, inst, pos, chunk_size):
    """As a full re-run, for a one-layer (bidirectional) LSTM or GRU: deleting token p leaves the forward
    direction's states before p, and the backward direction's after it, as they were; the forward direction
    is run over the tokens after p from its state at p − 1 (c recovered by :func:`_lstm_cells`), the backward
    one over the tokens before p, in reverse, from its state at p + 1.

    The deletions of one position p run together (at most ``chunk_size`` at a time; results in the given order):
    every row then reads exactly p tokens backward and the rest of its text forward, and its new states are the
    original ones with the re-run ones beside them (slices, no scatter) — the L(L − 1) recurrent steps per
    instance that exact deletions need, and little else."""
    enc = model.encode(batch)
    rnn = model.encoder.rnn
    size, directions = rnn.hidden_size, 2 if rnn.bidirectional else 1
    t_max = enc.mask.shape[1]
    positions = torch.arange(t_max, device=enc.mask.device)
    real = positions[None, :] < enc.lengths[:, None]
    states = []  # per direction: (h, c) of every position, c only for an LSTM
    for d in range(directions):
        h = enc.hidden[..., d * size : (d + 1) * size]
        c = _lstm_cells(rnn, enc.embedded, h, real, reverse=d == 1) if isinstance(rnn, nn.LSTM) else None
        states.append(tuple(x for x in (h, c) if x is not None))
    order = torch.argsort(pos, stable=True)
    values, counts = torch.unique_consecutive(pos[order], return_counts=True)
    deleted = None
    for p, group in zip(values.tolist(), torch.split(order, counts.tolist())):
        for chunk in equal_length_chunks(enc.lengths[inst[group]], chunk_size, slack=GRADIENT_SLACK):
            rows = group[chunk]  # texts of similar length: little padding past the shorter ones
            i = inst[rows]
            width = int(enc.lengths[i].max())  # past the chunk's longest text every row is padding
            hidden = enc.hidden.new_empty(len(i), width - 1, enc.hidden.shape[-1])  # the text without token p
            _forward_after(rnn, enc, states[0], i, p, width, hidden[..., :size])
            if directions == 2:
                _backward_before(rnn, enc, states[1], i, p, width, hidden[..., size:])
            new_mask = positions[None, : width - 1] < (enc.lengths[i] - 1)[:, None]
            attended_after = torch.cat([enc.mask[i, :p], enc.mask[i, p + 1 : width]], 1) & new_mask  # no boundary
            scores = model.scorer(hidden, None if enc.query is None else enc.query[i])
            probs = _output_from_states(model, enc, i, hidden, scores, attended_after)
            if deleted is None:
                deleted = probs.new_empty((len(inst), probs.shape[1]))
            deleted[rows] = probs
    return deleted


def _forward_after(rnn, enc, states, i, p: int, width: int, out: torch.Tensor) -> None:
    """Writes into ``out`` (n, width − 1, H) the forward direction's states of instances ``i`` (texts of at most
    ``width`` tokens) with token p deleted: the original ones before p, then the tokens after p read from the state
    at p − 1 (zeros for p = 0). Rows shorter than ``width`` read padding at their end, which changes none of
    their real states."""
    out[:, :p] = enc.hidden[i, :p, : rnn.hidden_size]
    if p + 1 < width:
        start = tuple(x[i, p - 1] for x in states) if p > 0 else None
        out[:, p:] = run_direction(rnn, False, enc.embedded[i, p + 1 : width], start)


def _backward_before(rnn, enc, states, i, p: int, width: int, out: torch.Tensor) -> None:
    """Writes into ``out`` (n, width − 1, H) the backward direction's states of instances ``i`` with token p
    deleted: the tokens before p read in reverse from the state at p + 1 (zeros where p is the text's last
    token), then the original ones after p."""
    out[:, p:] = enc.hidden[i, p + 1 : width, rnn.hidden_size :]
    if p > 0:
        inside = ((p + 1) < enc.lengths[i]).unsqueeze(-1).to(out.dtype)
        start = tuple(x[i, min(p + 1, enc.mask.shape[1] - 1)] * inside for x in states)
        out[:, :p] = run_direction(rnn, True, enc.embedded[i, :p].flip(1), start).flip(1)


def _embedding_forward(model, batch: dict, target: torch.Tensor | None = None):
    """(forward, embedded, fields) for Captum: forward(E, *fields) = ŷ (N, C) of the full model (the
    attention recomputed from E) — with ``target`` (B,), that class's log-odds (N,) instead —, ``fields``
    the batch's per-instance tensors that Captum repeats with E."""
    batch = batch if target is None else {**batch, "_target": target}
    names = [k for k, v in batch.items() if torch.is_tensor(v) and v.shape[:1] == batch["ids"].shape[:1]]

    def forward(embedded, *fields):
        sub = dict(zip(names, fields))
        enc = model.encode(sub, embedded=embedded)
        logits = model.decode(enc, model.attend(enc))
        return model.probabilities(logits) if target is None else log_odds(logits, sub["_target"])

    with torch.no_grad():
        embedded = model.embed(batch)
    return forward, embedded.detach().requires_grad_(True), tuple(batch[k] for k in names)


def input_x_gradient(model, batch: dict, target: torch.Tensor) -> torch.Tensor:
    """Σ_d e_td ∂p(ŷ)/∂e_td, signed, gradients through the attention (Captum ``InputXGradient``), taken
    through ŷ's log-odds: per instance p(ŷ)(1 − p(ŷ)) times smaller, the same ranking and signs (the
    module ``attn_study.models.outputs``)."""
    from captum.attr import InputXGradient

    def compute(rows, sub):
        forward, embedded, fields = _embedding_forward(model, sub, target[rows])
        with torch.enable_grad(), grad_context(embedded.device):
            attributions = InputXGradient(forward).attribute(embedded, additional_forward_args=fields)
        return (attributions.sum(-1),)

    (scores,) = by_length(batch, compute)
    return scores * batch["mask"]


def integrated_gradients(
    model, batch: dict, target: torch.Tensor, steps: int = 50, internal_batch_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(IG_t, gap): Σ_d of Captum's ``IntegratedGradients`` of p(ŷ) w.r.t. the embeddings, the
    baseline being the text's tokens' embeddings set to 0 (boundary tokens kept), gradients through the
    attention; ``steps`` Gauss–Legendre points. ``gap`` = Σ_t IG_t − (p(ŷ|x) − p(ŷ|baseline)) per
    instance: completeness says it is 0 up to the quadrature error."""
    from captum.attr import IntegratedGradients

    def compute(rows, sub):
        forward, embedded, fields = _embedding_forward(model, sub)
        baseline = embedded * (~token_mask(sub)).unsqueeze(-1)
        chunk = None if internal_batch_size is None else max(int(internal_batch_size), len(rows))
        with torch.enable_grad(), grad_context(embedded.device):
            attributions, gap = IntegratedGradients(forward).attribute(
                embedded,
                baselines=baseline,
                target=target[rows],
                additional_forward_args=fields,
                n_steps=steps,
                internal_batch_size=chunk,
                return_convergence_delta=True,
            )
        return attributions.sum(-1), gap

    scores, gap = by_length(batch, compute)
    return scores * batch["mask"], gap


def signed_leave_one_out(model, batch: dict, probs: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """p(ŷ|x) − p(ŷ|x₋ₜ): how much deleting token t lowers the predicted class's probability (signed)."""
    scores = torch.zeros(batch["mask"].shape, device=probs.device, dtype=probs.dtype)
    inst, pos, deleted = deletion_probabilities(model, batch, chunk_size)
    if deleted is not None:
        scores[inst, pos] = probability_drop(probs[inst], deleted, probs.argmax(-1)[inst])
    return scores


# ------------------------------------------------------------------------------------------------
# every method behind one signature
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportanceOptions:
    chunk_size: int = 512  # deletion sequences / IG steps per model call
    ig_steps: int = 50  # integrated gradients' quadrature points
    seed: int = 0  # the random ranking's draws (each instance's own: analysis.seeding)
    aggregation: AggregationOptions = AggregationOptions()  # raw, rollout, flow, norms: layer, head, flow's bound


def _attention(model, batch, alpha, probs, options):
    return alpha, {}


def _gradient(model, batch, alpha, probs, options):
    return gradient_importance(model, batch, detach_attention=True, normalise=False), {}


def _grad_norm(model, batch, alpha, probs, options):
    return gradient_norm_importance(model, batch, detach_attention=False, normalise=False), {}


def _input_x_gradient(model, batch, alpha, probs, options):
    return input_x_gradient(model, batch, probs.argmax(-1)), {}


def _integrated_gradients(model, batch, alpha, probs, options):
    scores, gap = integrated_gradients(model, batch, probs.argmax(-1), options.ig_steps, options.chunk_size)
    return scores, {"ig_completeness_gap": gap}


def _loo(model, batch, alpha, probs, options):
    return signed_leave_one_out(model, batch, probs, options.chunk_size), {}


def _random(model, batch, alpha, probs, options):
    return instance_draws(batch["index"], batch["mask"], options.seed, "faithfulness_random"), {}


#: importance method → (model, batch, α, ŷ's distribution, options) → ((B, T) scores, higher = more important
#: for the predicted class; {extra per-instance column: (B,)}) — what each computes: keys.FF_METHODS of
#: families/faithfulness
METHODS = {
    "attention": _attention,
    "gradient": _gradient,
    "grad_norm": _grad_norm,
    "input_x_gradient": _input_x_gradient,
    "integrated_gradients": _integrated_gradients,
    "loo": _loo,
    "random": _random,
}


def _aggregated(method: str):
    def compute(model, batch, alpha, probs, options):
        return aggregated_importance(method, model, batch, alpha, options.aggregation)

    return compute


# a Transformer's layer attention through the pooling α (analysis.aggregation): raw, rollout, flow, norms
METHODS.update({method: _aggregated(method) for method in AGGREGATIONS})


def importance(method: str, model, batch: dict, alpha, probs, options: ImportanceOptions = ImportanceOptions()):
    """``METHODS[method]`` on one batch: ((B, T) scores, {extra column: (B,)})."""
    return METHODS[method](model, batch, alpha, probs, options)
