"""Every method that scores a text's tokens for the predicted class, as a record — one class each, Captum's way: its
name, its formula (the class docstring), its paper, whether its scores are signed, whether α's dependence on the
input enters them, whether it explains a class, whether it reads a Transformer's layer attention — and its
computation behind one signature (:meth:`ImportanceMethod.scores`). :data:`METHODS` holds them by name, and
:func:`importance` runs one; the families, ROAR and the report's conventions read these records.

Notation: e_t the embedding of token t, α the model's pooling attention, c = ŷ the predicted class, p_c its
probability and ℓ_c = log(p_c / (1 − p_c)) its log-odds (the package docstring: a gradient of ℓ_c is that of p_c
times 1 / (p_c (1 − p_c)), the same ranking without float32's saturation).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

import torch

from attn_study.analysis.aggregation import AggregationOptions, aggregated_importance
from attn_study.analysis.seeding import SHARED_STREAMS, instance_draws

from .gradient import gradient_importance, gradient_norm_importance, input_x_gradient, integrated_gradients
from .leave_one_out import signed_leave_one_out


@dataclass(frozen=True)
class ImportanceOptions:
    chunk_size: int = 512  # deletion sequences / IG steps per model call
    ig_steps: int = 50  # integrated gradients' quadrature points
    seed: int = 0  # the random ranking's draws (each instance's own: analysis.seeding)
    aggregation: AggregationOptions = AggregationOptions()  # raw, rollout, flow, norms: layer, head, flow's bound


class ImportanceMethod:
    """An importance method: how it scores token t of a text (its formula: the subclass's docstring)."""

    name: ClassVar[str]
    paper: ClassVar[str]  # where it comes from
    signed: ClassVar[bool]  # a score may be negative: the token speaks against the class
    through_attention: ClassVar[bool]  # α's dependence on the tokens enters the score (α itself, a gradient through
    # it, a deletion that recomputes it); False: α held constant, or not read
    explains_class: ClassVar[bool] = True  # the score is of the predicted class's output; False: of no class
    layer_attention: ClassVar[bool] = False  # reads a Transformer's layer attention (encoder=transformer)

    @property
    def formula(self) -> str:
        return inspect.getdoc(type(self)) or ""

    def scores(self, model, batch: dict, alpha, probs, options: ImportanceOptions) -> tuple[torch.Tensor, dict]:
        """((B, T) scores, higher = more important for the predicted class; {extra per-instance column: (B,)}) of
        the batch's texts, from the staged ``model`` in eval mode, its attention α and output distribution ŷ."""
        raise NotImplementedError


class Attention(ImportanceMethod):
    """The model's own attention:

    s_t = α_t
    """

    name, paper = "attention", "Jain & Wallace 2019 (attention read as an explanation)"
    signed, through_attention, explains_class = False, True, False

    def scores(self, model, batch, alpha, probs, options):
        return alpha, {}


class Gradient(ImportanceMethod):
    """The gradient times the input, α held constant:

        s_t = | ∂ℓ_c/∂e_t · e_t |

    (normalised, |∂p_c/∂e_t · e_t| / Σ_k |∂p_c/∂e_k · e_k|: the same).
    """

    name, paper = "gradient", "Jain & Wallace 2019, Algorithm 1"
    signed, through_attention = False, False

    def scores(self, model, batch, alpha, probs, options):
        return gradient_importance(model, batch, detach_attention=True, normalise=False), {}


class GradientNorm(ImportanceMethod):
    """The gradient's norm, the gradient flowing through the attention:

    s_t = ‖ ∂ℓ_c/∂e_t ‖₂
    """

    name, paper = "grad_norm", "Meister et al. 2021, Eq. 4"
    signed, through_attention = False, True

    def scores(self, model, batch, alpha, probs, options):
        return gradient_norm_importance(model, batch, detach_attention=False, normalise=False), {}


class InputXGradient(ImportanceMethod):
    """Input × gradient summed over the embedding, signed, through the attention:

    s_t = Σ_d e_td ∂ℓ_c/∂e_td
    """

    name, paper = "input_x_gradient", "Shrikumar et al. 2016 (Captum's InputXGradient)"
    signed, through_attention = True, True

    def scores(self, model, batch, alpha, probs, options):
        return input_x_gradient(model, batch, probs.argmax(-1)), {}


class IntegratedGradients(ImportanceMethod):
    """Integrated gradients of p_c summed over the embedding, signed, through the attention, from the baseline e'
    (the text's embeddings 0, boundary tokens kept):

        s_t = Σ_d (e_td − e'_td) ∫₀¹ ∂p_c(e' + a (e − e'))/∂e_td da

    by Gauss–Legendre quadrature with ``ig_steps`` points; ``ig_completeness_gap`` = Σ_t s_t − (p_c(e) − p_c(e')).
    """

    name, paper = "integrated_gradients", "Sundararajan et al. 2017 (Captum's IntegratedGradients)"
    signed, through_attention = True, True

    def scores(self, model, batch, alpha, probs, options):
        scores, gap = integrated_gradients(model, batch, probs.argmax(-1), options.ig_steps, options.chunk_size)
        return scores, {"ig_completeness_gap": gap}


class LeaveOneOut(ImportanceMethod):
    """The drop of p_c when token t is deleted (the sequence one shorter, the whole model re-run), signed:

    s_t = p_c(x) − p_c(x₋ₜ)
    """

    name, paper = "loo", "Jain & Wallace 2019 (leave-one-out; here signed)"
    signed, through_attention = True, True

    def scores(self, model, batch, alpha, probs, options):
        return signed_leave_one_out(model, batch, probs, options.chunk_size), {}


class Random(ImportanceMethod):
    """A uniformly random ranking, each instance's own draws (``analysis.seeding``, stream ``random_importance``):

    s_t ~ U[0, 1)
    """

    name, paper = "random", "the floor any method must beat"
    signed, through_attention, explains_class = False, False, False

    def scores(self, model, batch, alpha, probs, options):
        stream = SHARED_STREAMS["random_importance"]
        return instance_draws(batch["index"], batch["mask"], options.seed, stream), {}


class LayerAttention(ImportanceMethod):
    """A Transformer's self-attention through its layers, composed with the pooling α (``analysis.aggregation``):
    M[i, t], how much the encoder's output at i draws on input token t, and

        s_t = Σ_i α_i M[i, t] / Σ_k Σ_i α_i M[i, k]
    """

    signed, through_attention, explains_class, layer_attention = False, True, False, True

    def scores(self, model, batch, alpha, probs, options):
        return aggregated_importance(self.name, model, batch, alpha, options.aggregation)


class Raw(LayerAttention):
    """One layer's attention A_l (``attention_layer``), one head or the mean over heads, through α:

    s_t ∝ Σ_i α_i A_l[i, t]
    """

    name, paper = "raw", "Abnar & Zuidema 2020 (raw attention)"


class Rollout(LayerAttention):
    """Attention rollout through α, the residual connection an equal share of each position:

    s_t ∝ Σ_i α_i R[i, t],   R = Â_L ⋯ Â_1,   Â_l = 0.5 Ā_l + 0.5 I   (Ā_l: the mean over heads)
    """

    name, paper = "rollout", "Abnar & Zuidema 2020"


class Flow(LayerAttention):
    """Attention flow into the pooled vector c, in the layer graph whose edges are node (l, i) → (l + 1, k) of
    capacity Â_{l+1}[k, i] and node (L, i) → c of capacity α_i:

        s_t ∝ maxflow(input token t → c)

    normalised over the text; NaN past ``flow_max_length`` (``flow_too_long``).
    """

    name, paper = "flow", "Abnar & Zuidema 2020"


class Norms(LayerAttention):
    """Attention weighted by the norm of what each head adds (f^h: the value transformation and output projection),
    one layer (``attention_layer``), through α:

        s_t ∝ Σ_i α_i ‖ Σ_h A_l^h[i, t] f^h(x_t) ‖
    """

    name, paper = "norms", "Kobayashi et al. 2020"


#: importance method → its record, in the order of the families' options and tables
METHODS: dict[str, ImportanceMethod] = {
    method.name: method()
    for method in (
        Attention,
        Gradient,
        GradientNorm,
        InputXGradient,
        IntegratedGradients,
        LeaveOneOut,
        Random,
        Raw,
        Rollout,
        Flow,
        Norms,
    )
}


def importance(method: str, model, batch: dict, alpha, probs, options: ImportanceOptions = ImportanceOptions()):
    """``METHODS[method]`` on one batch: ((B, T) scores, {extra column: (B,)})."""
    return METHODS[method].scores(model, batch, alpha, probs, options)
