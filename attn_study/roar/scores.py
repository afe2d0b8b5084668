"""The token scores a ROAR step ranks by: an importance method of ``attn_study.analysis.importance`` with two of
Madsen et al.'s (2022) conventions as options (``conf/roar/``).

- ``label``: the class explained. ``predicted`` (the importance records' convention, ``importance.METHODS``) or
  ``gold``, the instance's true label (Madsen et al.'s code: masking the tokens that support a wrong prediction
  would help the retrained model). The gradient methods then differentiate the gold class's log-odds ℓ_y; input ×
  gradient and integrated gradients take it as their target; leave-one-out is p(y|x) − p(y|x₋ₜ). A method whose
  record explains no class (attention, random, a Transformer's layer attention) is the same for either label.
- ``gradient``: what the method ``gradient`` is. ``jain_wallace``: |∇_{e_t} ℓ_c · e_t|, attention detached (the
  registry's). ``one_hot_norm`` (Madsen et al.): the 2-norm of the gradient of the class's logit with respect to
  the token's one-hot input x_t, ‖∂y_c/∂x_t‖₂ = ‖E ∂y_c/∂e_t‖₂ (E the V × d embedding matrix, e_t = Eᵀx_t), computed
  as √(gᵀ(EᵀE)g) with g = ∂y_c/∂e_t, the gradient through the attention. y_c is the class's logit; a binary model's
  single logit x is class 1's log-odds, so y_c = ±x (the logit difference of a two-logit model).
"""

from __future__ import annotations

import torch

from attn_study.analysis.importance import (
    METHODS,
    ImportanceOptions,
    by_length,
    deletion_probabilities,
    grad_context,
    importance,
    input_x_gradient,
    integrated_gradients,
    logits_from_leaf,
    predict,
    token_mask,
)
from attn_study.errors import UserError
from attn_study.models.outputs import log_odds
from attn_study.stats import probability_drop

LABELS = ("predicted", "gold")
GRADIENTS = ("jain_wallace", "one_hot_norm")


def class_logit(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """y_c (B,): the logit of class ``target``; a binary model's one logit x gives ±x (class 1: x, class 0: −x)."""
    if logits.shape[-1] == 1:
        return log_odds(logits, target)
    return logits.gather(-1, target[:, None]).squeeze(-1)


def embedding_gradient_scores(model, batch: dict, target, objective, reduce, detach_attention: bool) -> torch.Tensor:
    """reduce(g, E) (B, T) over the text's tokens, g = ∂ objective(logits, target)/∂E per instance, the embeddings E
    a leaf (the instances of one length together, no padding: ``by_length``)."""

    def compute(rows, sub):
        with torch.enable_grad(), grad_context(sub["mask"].device):
            emb, logits = logits_from_leaf(model, sub, detach_attention)
            (grad,) = torch.autograd.grad(objective(logits, target[rows]).sum(), emb)
        return (reduce(grad, emb),)

    (scores,) = by_length(batch, compute)
    return scores * token_mask(batch)


def one_hot_gradient_norm(model, batch: dict, target: torch.Tensor) -> torch.Tensor:
    """‖E ∂y_c/∂e_t‖₂ (B, T), c = ``target``: Madsen et al.'s gradient (module docstring)."""
    weight = getattr(getattr(model, "embedding", None), "weight", None)
    if weight is None:
        raise UserError(f"roar.gradient=one_hot_norm: {type(model).__name__} has no embedding matrix; use jain_wallace")
    gram = weight.detach().T @ weight.detach()  # EᵀE (d, d): ‖E g‖² = gᵀ EᵀE g

    def norm(grad, emb):
        return torch.einsum("ntd,de,nte->nt", grad, gram.to(grad.dtype), grad).clamp_min(0).sqrt()

    return embedding_gradient_scores(model, batch, target, class_logit, norm, detach_attention=False)


def _jain_wallace(grad, emb):
    return (grad * emb).sum(-1).abs()


def _norm(grad, emb):
    return grad.norm(dim=-1)


def scores(method: str, model, batch: dict, label: str, gradient: str, options: ImportanceOptions) -> torch.Tensor:
    """(B, T) scores of ``method`` for one batch, higher = more important: for the class ``label`` names, with
    ``gradient``'s definition of the method ``gradient`` (module docstring)."""
    if method == "random":  # the model plays no part: no forward pass
        return importance(method, model, batch, None, None, options)[0]
    _, alpha, probs = predict(model, batch)
    target = batch["labels"] if label == "gold" else probs.argmax(-1)
    if method == "gradient" and gradient == "one_hot_norm":
        return one_hot_gradient_norm(model, batch, target)
    if label == "predicted" or not METHODS[method].explains_class:
        return importance(method, model, batch, alpha, probs, options)[0]
    if method == "gradient":
        return embedding_gradient_scores(model, batch, target, log_odds, _jain_wallace, detach_attention=True)
    if method == "grad_norm":
        return embedding_gradient_scores(model, batch, target, log_odds, _norm, detach_attention=False)
    if method == "input_x_gradient":
        return input_x_gradient(model, batch, target)
    if method == "integrated_gradients":
        return integrated_gradients(model, batch, target, options.ig_steps, options.chunk_size)[0]
    if method == "loo":  # p(y|x) − p(y|x₋ₜ), y the gold class
        out = torch.zeros(batch["mask"].shape, device=probs.device, dtype=probs.dtype)
        inst, pos, deleted = deletion_probabilities(model, batch, options.chunk_size)
        if deleted is not None:
            out[inst, pos] = probability_drop(probs[inst], deleted, target[inst])
        return out
    raise UserError(f"roar.label=gold: {method} has no class to explain; use roar.label=predicted")
