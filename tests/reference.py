"""Every per-instance statistic of the families, from its definition, one instance at a time: a text is run
alone (no batch, no padding), gradients are taken of ŷ itself through ``torch.sigmoid``/``softmax`` (the
models are float64, where nothing saturates), deletions re-run the whole model on the shorter text, rank
correlations are scipy's. The families' batched, vectorised code is tested against these."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from tests.helpers import token_batch


def single(ids: list[int], boundary: bool = False) -> dict:
    return token_batch([ids], boundary=boundary)


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    if logits.shape[-1] == 1:
        p = torch.sigmoid(logits)
        return torch.cat([1 - p, p], -1)
    return torch.softmax(logits, -1)


def forward(model, ids, boundary=False, embedded=None, detach_attention=False, hidden_leaf=False):
    """(E, H, α, ŷ) of the text alone; E (and H with ``hidden_leaf``) leaves for gradients."""
    batch = single(ids, boundary)
    emb = (model.embed(batch) if embedded is None else embedded).detach().requires_grad_(True)
    enc = model.encode(batch, embedded=emb)
    if hidden_leaf:
        enc.hidden = enc.hidden.detach().requires_grad_(True)
    alpha = model.attend(enc)
    probs = probabilities(model.decode(enc, alpha.detach() if detach_attention else alpha))[0]
    return emb, enc.hidden, alpha[0], probs


def text_positions(ids, boundary):
    return slice(1, len(ids) + 1) if boundary else slice(0, len(ids))


def attention(model, ids, boundary=False) -> np.ndarray:
    with torch.no_grad():
        return forward(model, ids, boundary)[2][text_positions(ids, boundary)].numpy()


def predicted(model, ids, boundary=False) -> int:
    with torch.no_grad():
        return int(forward(model, ids, boundary)[3].argmax())


def gradient_jw(model, ids, boundary=False) -> np.ndarray:
    """|∂ŷ_c/∂e_t · e_t|, c the predicted class, attention detached (Jain & Wallace)."""
    with torch.enable_grad():
        emb, _, _, probs = forward(model, ids, boundary, detach_attention=True)
        (grad,) = torch.autograd.grad(probs[probs.argmax()], emb)
    return (grad[0] * emb[0]).sum(-1).abs()[text_positions(ids, boundary)].detach().numpy()


def gradient_norm(model, ids, boundary=False) -> np.ndarray:
    """‖∂ŷ_c/∂e_t‖, through the attention (Meister et al. Eq. 4)."""
    with torch.enable_grad():
        emb, _, _, probs = forward(model, ids, boundary)
        (grad,) = torch.autograd.grad(probs[probs.argmax()], emb)
    return grad[0].norm(dim=-1)[text_positions(ids, boundary)].detach().numpy()


def hidden_gradient(model, ids, boundary=False) -> np.ndarray:
    """‖∂ŷ_c/∂h_t‖ (Meister et al.'s intermediate importance)."""
    with torch.enable_grad():
        _, hidden, _, probs = forward(model, ids, boundary, hidden_leaf=True)
        (grad,) = torch.autograd.grad(probs[probs.argmax()], hidden)
    return grad[0].norm(dim=-1)[text_positions(ids, boundary)].detach().numpy()


def deleted(ids, t: int) -> list[int]:
    return ids[:t] + ids[t + 1 :]


def leave_one_out(model, ids, boundary=False, predicted_class: bool = False) -> np.ndarray:
    """TVD(ŷ(x₋ₜ), ŷ(x)) per token t (with ``predicted_class``: |ŷ_c(x₋ₜ) − ŷ_c(x)|); NaN for one token."""
    if len(ids) < 2:
        return np.array([math.nan])
    with torch.no_grad():
        probs = forward(model, ids, boundary)[3]
        c = int(probs.argmax())
        out = []
        for t in range(len(ids)):
            q = forward(model, deleted(ids, t), boundary)[3]
            out.append(float((q[c] - probs[c]).abs()) if predicted_class else 0.5 * float((q - probs).abs().sum()))
    return np.array(out)


def erase_each(model, ids, boundary=False) -> np.ndarray:
    """|ŷ_c − ŷ_c(α with state t erased, the rest renormalised)| per token t (encoder untouched)."""
    with torch.no_grad():
        batch = single(ids, boundary)
        enc = model.encode(batch)
        alpha = model.attend(enc)
        probs = probabilities(model.decode(enc, alpha))[0]
        c = int(probs.argmax())
        out = []
        for t in range(len(ids)):
            kept = alpha.clone()
            kept[0, t + 1 if boundary else t] = 0
            if kept.sum() > 0:
                q = probabilities(model.decode(enc, kept / kept.sum()))[0]
            else:  # nothing left to pool: the zero vector
                q = probabilities(model.decode_pooled(torch.zeros_like(enc.hidden[:, 0]), enc.query, enc.candidates))[0]
            out.append(float((q[c] - probs[c]).abs()))
    return np.array(out)


def normalised_entropy(scores: np.ndarray) -> float:
    """−Σ p log p / log n of scores / Σ scores (NaN for one entry or all-zero scores)."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) < 2 or scores.sum() <= 0:
        return math.nan
    p = scores / scores.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum() / math.log(len(scores)))


def one_tie_within(scores, resolution: float = 1e-9) -> np.ndarray:
    """Scores on a grid of ``resolution`` × their largest magnitude: values equal but for rounding (a repeated
    word computed at another position) become exactly equal, so scipy ranks them as one tie."""
    scores = np.asarray(scores, dtype=float)
    step = resolution * np.abs(scores).max() if len(scores) and np.abs(scores).max() > 0 else 1.0
    return np.round(scores / step) * step


def tau(a, b) -> tuple[float, float]:
    """scipy's Kendall τ-b and p-value (NaN for fewer than two entries or a constant side)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan, math.nan
    result = stats.kendalltau(a, b)
    return float(result.statistic), float(result.pvalue)


def kept_probability(model, ids, keep: list[bool], boundary=False, c: int | None = None) -> float:
    """ŷ_c of the text with only the tokens where ``keep`` (in order; boundary tokens always stay)."""
    with torch.no_grad():
        rest = [w for w, k in zip(ids, keep) if k]
        probs = forward(model, ids, boundary)[3]
        c = int(probs.argmax()) if c is None else c
        return float(forward(model, rest, boundary)[3][c]) if rest else math.nan


def input_x_gradient(model, ids, boundary=False) -> np.ndarray:
    """Σ_d e_td ∂ŷ_c/∂e_td, signed, through the attention."""
    with torch.enable_grad():
        emb, _, _, probs = forward(model, ids, boundary)
        (grad,) = torch.autograd.grad(probs[probs.argmax()], emb)
    return (grad[0] * emb[0]).sum(-1)[text_positions(ids, boundary)].detach().numpy()


def signed_leave_one_out(model, ids, boundary=False) -> np.ndarray:
    """ŷ_c(x) − ŷ_c(x₋ₜ) per token t (0 for a text of one token: nothing is left to run)."""
    if len(ids) < 2:
        return np.zeros(len(ids))
    with torch.no_grad():
        probs = forward(model, ids, boundary)[3]
        c = int(probs.argmax())
        return np.array([float(probs[c] - forward(model, deleted(ids, t), boundary)[3][c]) for t in range(len(ids))])


def removal(model, ids, scores, fraction: float, boundary=False) -> tuple[float, float]:
    """ERASER's (comprehensiveness, sufficiency) at ``fraction`` for a ranking by ``scores`` (no ties):
    ŷ_c(x) − ŷ_c(x without the top ⌈f·n⌉ tokens), ŷ_c(x) − ŷ_c(those tokens alone, in order)."""
    n = len(ids)
    if n < 2:
        return math.nan, math.nan
    k = math.ceil(round(fraction * n, 9))
    top = set(np.argsort(-np.asarray(scores), kind="stable")[:k].tolist())
    with torch.no_grad():
        probs = forward(model, ids, boundary)[3]
    c = int(probs.argmax())
    full = float(probs[c])
    without = kept_probability(model, ids, [t not in top for t in range(n)], boundary, c)
    alone = kept_probability(model, ids, [t in top for t in range(n)], boundary, c)
    return full - without, full - alone
