"""A Transformer's self-attention through its layers as token importance (docs/transformer_attention.md).

From a :class:`~attn_study.models.encoders.LayerTrace` — A_l^h (B, L, H, T, T), each head's attention in each
layer, and f^h(x_j), each position's vector as a head adds it — four matrices M (B, T, T), M[i, j] = how much
the encoder's output at position i draws on input token j:

- ``raw``: A_l of one layer (``layer``), one head or the mean over heads (``head``);
- ``rollout`` (Abnar & Zuidema 2020): R = Â_L ⋯ Â_1, Â_l = 0.5·Ā_l + 0.5·I (Ā_l: the mean over heads; the
  residual connection as an equal share of the position itself), rows renormalised;
- ``flow`` (Abnar & Zuidema 2020): the maximum flow from input token j through the layer graph (node (l, i)
  → (l + 1, k) with capacity Â_{l+1}[k, i]) to the pooled vector;
- ``norms`` (Kobayashi et al. 2020): N_l[i, j] = ‖Σ_h A_l^h[i, j] f^h(x_j)‖ (one head: A^h[i, j]·‖f^h(x_j)‖).

Each is composed with the model's pooling attention α (the classifier reads c = Σ_i α_i h_i) into a
distribution over the text's tokens: s_j = Σ_i α_i M[i, j], normalised over them (boundary tokens, which the
encoder reads but α never weighs, left out). For flow the pooling is the graph's last layer instead (edge
(L, i) → c with capacity α_i): a max-flow per input token rather than one per (output, input) pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attn_study.errors import UserError
from attn_study.models.classifier import AttentionClassifier, PairAttentionClassifier

#: the aggregations computed here, by the importance registry's names (each described by its record:
#: ``attn_study.analysis.importance.methods``)
AGGREGATIONS = ("raw", "rollout", "flow", "norms")

#: integer capacities for scipy's max-flow: c ↦ round(c·2^29); every capacity and every flow is ≤ 1, so ≤ 2^29
#: fits int32 with room, and a flow is within (edges of a minimum cut)·2^-30 of the exact one
FLOW_SCALE = 2**29


@dataclass(frozen=True)
class AggregationOptions:
    layer: int = -1  # raw, norms: the layer (0 = the first, −1 = the last, whose output α pools)
    head: int | None = None  # raw, norms: one head (from 0), or None: all of them
    flow_max_length: int = 128  # flow: sequences longer than this (as the encoder reads them) get NaN, counted


# ------------------------------------------------------------------------------------------------
# the math, on attention matrices
# ------------------------------------------------------------------------------------------------


def residual_attention(attention: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Â = 0.5·A + 0.5·I (…, T, T) over the real positions ``mask`` (B, T), rows renormalised to sum 1
    (rows of padding are 0). ``attention``: (B, …, T, T), its leading dims after B broadcast with the mask."""
    extra = attention.dim() - 3
    shape = (mask.shape[0],) + (1,) * extra + mask.shape[1:]
    real = mask.view(shape).to(attention.dtype)
    pair = real.unsqueeze(-1) * real.unsqueeze(-2)
    eye = torch.eye(attention.shape[-1], dtype=attention.dtype, device=attention.device)
    adjusted = (0.5 * attention + 0.5 * eye) * pair
    return adjusted / adjusted.sum(-1, keepdim=True).clamp_min(1e-30)


def rollout(attention: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """R = Â_L ⋯ Â_1 (B, T, T) from the head-averaged attention (B, L, T, T): R[i, j] is the share of input
    token j in the last layer's output at i when every layer mixes as Â_l."""
    adjusted = residual_attention(attention, mask)
    out = adjusted[:, 0]
    for layer in range(1, adjusted.shape[1]):
        out = adjusted[:, layer] @ out
    return out


def layer_graph(adjusted: np.ndarray, alpha: np.ndarray):
    """The flow network of one sequence of n positions as a scipy CSR matrix of int32 capacities
    (:data:`FLOW_SCALE`): node l·n + i is position i after layer l (0: the input), node (L + 1)·n the pooled
    vector; (l, j) → (l + 1, i) has capacity Â_{l+1}[i, j] (``adjusted`` (L, n, n)), (L, i) → pooled α_i."""
    from scipy.sparse import csr_matrix

    layers, n, _ = adjusted.shape
    sink = (layers + 1) * n
    rows, cols, caps = [], [], []
    for layer in range(layers):
        i, j = np.nonzero(adjusted[layer] > 0)
        rows.append(layer * n + j)
        cols.append((layer + 1) * n + i)
        caps.append(adjusted[layer][i, j])
    (i,) = np.nonzero(alpha > 0)
    rows.append(layers * n + i)
    cols.append(np.full(len(i), sink))
    caps.append(alpha[i])
    capacity = np.rint(np.concatenate(caps).astype(np.float64) * FLOW_SCALE).astype(np.int32)
    graph = csr_matrix((capacity, (np.concatenate(rows), np.concatenate(cols))), shape=(sink + 1, sink + 1))
    graph.eliminate_zeros()
    return graph, sink


def flow(attention: torch.Tensor, alpha: torch.Tensor, mask: torch.Tensor, text: torch.Tensor, max_length: int):
    """(flows (B, T), too long (B,) bool): per text token j (``text``), the maximum flow from input j to the
    pooled vector through :func:`layer_graph` of the head-averaged attention (B, L, T, T), normalised to sum 1
    over the text's tokens; NaN rows for sequences longer than ``max_length`` (``mask``: what the encoder
    read). scipy's Dinic max-flow, one per text token (the cost: docs/transformer_attention.md)."""
    from scipy.sparse.csgraph import maximum_flow

    adjusted = residual_attention(attention.double(), mask).cpu().numpy()
    weights = (alpha.double() * mask).cpu().numpy()
    lengths = mask.sum(1).cpu().numpy()
    sources = text.cpu().numpy()
    out = np.zeros(mask.shape, dtype=np.float64)
    too_long = lengths > max_length
    for b in np.nonzero(~too_long)[0]:
        n = int(lengths[b])  # real positions come first
        graph, sink = layer_graph(adjusted[b, :, :n, :n], weights[b, :n])
        for j in np.nonzero(sources[b, :n])[0]:
            out[b, j] = maximum_flow(graph, int(j), sink).flow_value / FLOW_SCALE
    out[too_long] = np.nan
    result = torch.as_tensor(out, device=alpha.device)
    total = result.sum(1, keepdim=True)
    result = torch.where(total > 0, result / total.clamp_min(1e-30), result)
    return result.to(alpha.dtype), torch.as_tensor(too_long, device=alpha.device)


def attention_norms(attention: torch.Tensor, transformed: torch.Tensor, head: int | None = None) -> torch.Tensor:
    """N (B, T, T) of one layer: N[i, j] = ‖Σ_h A^h[i, j] f^h(x_j)‖ (``head`` None), or A^h[i, j]·‖f^h(x_j)‖
    for one head; ``attention`` (B, H, T, T), ``transformed`` f (B, H, T, m). The sum over heads through
    each position's Gram matrix G_j[h, g] = f^h(x_j)·f^g(x_j): ‖Σ_h a_h f^h‖² = aᵀ G_j a."""
    if head is not None:
        return attention[:, head] * transformed[:, head].norm(dim=-1).unsqueeze(1)
    gram = torch.einsum("bhjo,bgjo->bjhg", transformed, transformed)
    squared = torch.einsum("bhij,bjhg,bgij->bij", attention, gram, attention)
    return squared.clamp_min(0).sqrt()


def compose(matrix: torch.Tensor, alpha: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """s_j = Σ_i α_i M[i, j] (B, T) over the text's tokens ``text``, normalised to sum 1 over them (NaN where
    nothing reaches them)."""
    scores = torch.einsum("bi,bij->bj", alpha.to(matrix.dtype), matrix) * text
    total = scores.sum(1, keepdim=True)
    return torch.where(total > 0, scores / total.clamp_min(1e-30), torch.full_like(scores, float("nan")))


# ------------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------------


def tracer(model):
    """``batch → LayerTrace`` for ``model`` — its own ``layer_trace`` (a wrapped pretrained checkpoint), or its
    encoder's ``trace`` of its embeddings (``encoder=transformer``) — or None when it has no layer attention."""
    own = getattr(model, "layer_trace", None)
    if callable(own):
        return own
    encoder = getattr(model, "encoder", None)
    # the flat and pair models encode the text's embeddings with it (not a HAN's sentences)
    if callable(getattr(encoder, "trace", None)) and type(model).encode in (
        AttentionClassifier.encode,
        PairAttentionClassifier.encode,
    ):
        return lambda batch: encoder.trace(model.embed(batch), batch["mask"])
    return None


def layer_shape(model) -> tuple[int, int, bool] | None:
    """(layers, heads, whether f^h is known) of ``model``'s self-attention, None without any."""
    if tracer(model) is None:
        return None
    shape = getattr(model, "attention_shape", None) or model.encoder.attention_shape
    return tuple(shape)


def check_aggregations(model, methods, options: AggregationOptions, option: str) -> None:
    """A one-line ``UserError`` (``option``: the family's methods option) when ``methods`` holds one ``model``
    cannot give: an aggregation without layer attention, a layer or head it does not have, norms without f^h;
    the pooling attention of a model without one (a pretrained checkpoint)."""
    if "attention" in methods and not getattr(model, "pooling_attention", True):
        raise UserError(
            f"{option}: attention is the pooling attention, which {type(model).__name__} does not have; leave it "
            "out (raw, rollout, flow, norms are its attention)"
        )
    chosen = [m for m in methods if m in AGGREGATIONS]
    if not chosen:
        return
    shape = layer_shape(model)
    if shape is None:
        name = type(getattr(model, "encoder", None)).__name__ if hasattr(model, "encoder") else type(model).__name__
        raise UserError(
            f"{option}: {', '.join(chosen)} aggregate a Transformer's layer attention, and {name} has none; "
            "use encoder=transformer or leave them out"
        )
    layers, heads, has_vectors = shape
    if any(m in ("raw", "norms") for m in chosen):
        if not -layers <= options.layer < layers:
            raise UserError(f"{option}: layer={options.layer}, and the model has {layers} layers (0 … {layers - 1})")
        if options.head is not None and not 0 <= options.head < heads:
            raise UserError(f"{option}: head={options.head}, and the model has {heads} heads (0 … {heads - 1})")
    if "norms" in chosen and not has_vectors:
        raise UserError(f"{option}: norms need each head's value vectors, which {type(model).__name__} does not give")


@torch.no_grad()
def aggregated_importance(method: str, model, batch: dict, alpha: torch.Tensor, options: AggregationOptions):
    """((B, T) scores, {extra column: (B,)}) of the aggregation ``method`` on ``batch``: a distribution over the
    text's tokens (``batch['token_mask']`` or ``mask``); for flow also ``flow_too_long`` (1 where the sequence
    exceeded ``options.flow_max_length``: NaN scores)."""
    trace = tracer(model)(batch)
    mask = batch["mask"]
    text = batch.get("token_mask", mask)
    attention = trace.attention.to(alpha.dtype)
    if method == "flow":
        scores, too_long = flow(attention.mean(2), alpha, mask, text, options.flow_max_length)
        return scores, {"flow_too_long": too_long.to(alpha.dtype)}
    if method == "rollout":
        matrix = rollout(attention.mean(2), mask)
    elif method == "raw":
        layer = attention[:, options.layer]
        matrix = layer.mean(1) if options.head is None else layer[:, options.head]
    elif method == "norms":
        matrix = attention_norms(
            attention[:, options.layer], trace.transformed[:, options.layer].to(alpha.dtype), options.head
        )
    else:
        raise ValueError(f"unknown aggregation {method!r}; choose from {list(AGGREGATIONS)}")
    return compose(matrix, alpha, text), {}
