"""Leave-one-out importance: ŷ with each token deleted (the sequence one shorter), by the model's algebra where it
has one — a context-free encoder as one (T×T)(T×H) product, a convolution over the windows a deletion touches, a
one-layer RNN run only past the deletion — else by re-encoding every deletion; unsigned (TVD) or signed."""

from __future__ import annotations

import torch
from torch import nn

from attn_study.models.classifier import AttentionClassifier, PairAttentionClassifier
from attn_study.models.encoders import CNNEncoder, RNNEncoder, direction_weights, run_direction
from attn_study.stats import probability_drop, tvd

from .batches import GRADIENT_SLACK, TEXT_FIELDS, equal_length_chunks, predict, token_mask


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


def sub_batch(batch: dict, inst: torch.Tensor, pos: torch.Tensor) -> dict:
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
    context_free = scores_states(model) and getattr(getattr(model, "encoder", None), "context_free", False)
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


def deletion_index(batch: dict):
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


def scores_states(model) -> bool:
    """Whether ``model`` is of attn_study's staged shape with α = projection(scorer(H, q)) — what the deletion
    shortcuts re-use; not a pre-loaded attention (another run's α, renormalised: the general path re-runs it)."""
    return hasattr(model, "scorer") and hasattr(model, "projection") and not getattr(model.scorer, "fixed", False)


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
    inst, pos, src = deletion_index(batch)
    if len(inst) == 0:
        return inst, pos, None
    encoder = getattr(model, "encoder", None)
    shortcuts = scores_states(model)
    if shortcuts and getattr(encoder, "context_free", False):
        deleted = _loo_context_free(model, batch, inst, pos, chunk_size)
    elif shortcuts and isinstance(encoder, CNNEncoder):
        deleted = _loo_convolution(model, batch, inst, pos, src, chunk_size)
    elif shortcuts and one_layer_rnn(encoder) and encodes_embeddings(model) and not model.training:
        deleted = _loo_recurrent(model, batch, inst, pos, chunk_size)
    else:  # the deletions of one length together (no padding), as the model sees them: a sequence one shorter
        deleted = None
        for rows in equal_length_chunks(batch["lengths"][inst], chunk_size):
            probs = model.probabilities(model(sub_batch(batch, inst[rows], pos[rows]))[0])
            if deleted is None:
                deleted = probs.new_empty((len(inst), probs.shape[1]))
            deleted[rows] = probs
    return inst, pos, deleted[same_sequence(batch, inst, pos)]


def same_sequence(batch: dict, inst: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
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


def one_layer_rnn(encoder) -> bool:
    """Whether ``encoder`` is a one-layer (bidirectional) LSTM or GRU (``RNNEncoder``)."""
    rnn = getattr(encoder, "rnn", None)
    return isinstance(encoder, RNNEncoder) and isinstance(rnn, (nn.LSTM, nn.GRU)) and rnn.num_layers == 1


def encodes_embeddings(model) -> bool:
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


def signed_leave_one_out(model, batch: dict, probs: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """p(ŷ|x) − p(ŷ|x₋ₜ): how much deleting token t lowers the predicted class's probability (signed)."""
    scores = torch.zeros(batch["mask"].shape, device=probs.device, dtype=probs.dtype)
    inst, pos, deleted = deletion_probabilities(model, batch, chunk_size)
    if deleted is not None:
        scores[inst, pos] = probability_drop(probs[inst], deleted, probs.argmax(-1)[inst])
    return scores
