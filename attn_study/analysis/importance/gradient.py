"""Gradient importances: ∂ŷ/∂e_t (Jain & Wallace Algorithm 1) and its norm (Meister et al. Eqs. 4–5), input ×
gradient and integrated gradients (Captum's), the input → hidden gradients g_{h_p}(x) and the importance of the
intermediate representations h (Meister et al.). Gradients "of ŷ" are of the predicted class's log-odds (the
package's docstring)."""

from __future__ import annotations

import torch

from attn_study.models.outputs import log_odds

from .batches import (
    TINY,
    by_length,
    equal_length_chunks,
    grad_context,
    logits_from_leaf,
    normalise_rows,
    rows_of,
    token_mask,
)


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
            emb, logits = logits_from_leaf(model, sub, detach_attention)
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
            emb, logits = logits_from_leaf(model, sub, detach_attention)
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
    return torch.where(total > 0, scores / total.clamp_min(TINY), torch.full_like(scores, float("nan")))


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


def embedding_forward(model, batch: dict, target: torch.Tensor | None = None):
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
        forward, embedded, fields = embedding_forward(model, sub, target[rows])
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
        forward, embedded, fields = embedding_forward(model, sub)
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
