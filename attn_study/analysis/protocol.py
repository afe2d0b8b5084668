"""What the test families need from a model and from its data — nothing else of attn_study.

Any model with these stages can be analysed, whether attn_study built it or not (see the README's
plain-Lightning example and docs/architecture.md):

    enc   = model.encode(batch)              # an Encoded: embedded (B,T,d), hidden (B,T,m), mask, lengths
    alpha = model.attend(enc)                # (B, T), rows sum to 1 over the mask, exactly 0 elsewhere
    out   = model.decode(enc, alpha)         # logits (B, C) from ANY attention the caller supplies

A LightningModule either is such a model or holds one as ``.model``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from attn_study.errors import UserError


@runtime_checkable
class StagedModel(Protocol):
    """A classifier with explicit stages ``embed → encode → attend → decode``.

    - ``num_classes``: C; a binary model may emit one logit (then ``probabilities`` returns both).
    - ``embed(batch)``: embeddings E (B, T, d) of ``batch['ids']``.
    - ``encode(batch, embedded=None)``: an ``attn_study.models.classifier.Encoded`` (``embedded``,
      ``hidden`` H (B, T, m), ``mask`` (B, T) bool, ``lengths``, optional ``query`` and ``candidates``);
      with ``embedded`` given, the states are computed from it (gradients w.r.t. a leaf E).
    - ``attend(enc)``: α (B, T).
    - ``decode(enc, alpha)``: logits (B, C') from α and the states (C' = 1 for a one-logit binary model).
    - ``decode_many(enc, alphas)``: logits (B, K, C') for K attentions per instance (B, K, T).
    - ``decode_pooled(context, query=None, candidates=None)``: logits (N, C') from pooled vectors
      c = Σ_t α_t h_t (N, m), the zero vector included (Serrano & Smith erase everything).
    - ``probabilities(logits)``: the output distribution ŷ (…, C).
    - ``model(batch)``: (logits, α) of a full forward pass (leave-one-out re-runs it on shorter inputs).

    Optional: ``token_attention`` (False when α is over sentences, not tokens); ``encoder``,
    ``scorer`` and ``projection`` let leave-one-out skip work for context-free and convolutional
    encoders (without them it re-runs the whole model, with the same result).
    """

    num_classes: int

    def embed(self, batch: dict): ...

    def encode(self, batch: dict, embedded=None): ...

    def attend(self, enc): ...

    def decode(self, enc, alpha): ...

    def decode_many(self, enc, alphas): ...

    def decode_pooled(self, context, query=None, candidates=None): ...

    def probabilities(self, logits): ...

    def __call__(self, batch: dict): ...


@runtime_checkable
class AnalysisData(Protocol):
    """The data side (``attn_study.data.datamodule.TextDataModule`` is one):

    - ``name``; ``num_classes``; ``data.label_names``; ``vocab.decode(ids) → tokens``;
    - ``split(name)``: an object with ``ids`` (token id arrays), ``labels``, ``uids``, ``lengths``;
    - ``loader(split, batch_size=…, indices=…)``: batches (dicts of tensors, as the model takes them)
      of those instances of the split, each with ``index`` (the instance's position in the split).
    """

    name: str

    def split(self, name: str): ...

    def loader(self, split: str, shuffle: bool = False, batch_size: int | None = None, indices=None): ...


_MODEL_METHODS = ("embed", "encode", "attend", "decode", "decode_many", "decode_pooled", "probabilities")


def staged_model(module) -> StagedModel:
    """The staged model of a LightningModule: ``module.model`` when that has the stages, else
    ``module`` itself; a one-line error naming the missing methods otherwise."""
    for candidate in (getattr(module, "model", None), module):
        if candidate is not None and isinstance(candidate, StagedModel):
            return candidate
    missing = [m for m in _MODEL_METHODS if not callable(getattr(module, m, None))]
    raise UserError(
        f"{type(module).__name__} cannot be analysed: it (or its .model) lacks {', '.join(missing)}; "
        "see attn_study.analysis.protocol.StagedModel"
    )


def analysis_data(trainer, family: str) -> AnalysisData:
    """The trainer's datamodule, which the analyses read their splits from."""
    data = getattr(trainer, "datamodule", None)
    if data is None or not isinstance(data, AnalysisData):
        raise UserError(
            f"analysis {family}: pass a datamodule with split() and loader() to trainer.fit/test "
            "(see attn_study.analysis.protocol.AnalysisData)"
        )
    return data
