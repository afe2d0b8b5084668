"""Every method that scores tokens for the predicted class behind one signature: :data:`METHODS` and
:func:`importance`."""

from __future__ import annotations

from dataclasses import dataclass

from attn_study.analysis.aggregation import AGGREGATIONS, AggregationOptions, aggregated_importance
from attn_study.analysis.seeding import instance_draws

from .gradient import gradient_importance, gradient_norm_importance, input_x_gradient, integrated_gradients
from .leave_one_out import signed_leave_one_out


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
