"""A locally stored Hugging Face sequence classifier as a staged model (docs/transformer_attention.md), and what
``encoder=pretrained`` (models/pretrained.py, docs/pretrained.md) shares with it: loading a checkpoint, its positions,
the trace of its layers.

``transformers`` is an optional extra (``pip install -e '.[hf]'``); nothing is downloaded: the checkpoint is read
from a directory (``local_files_only``). The classifier reads its classification token's final state (BERT's
``[CLS]``, RoBERTa's ``<s>``), so its "pooling attention" is α = one-hot on position 0 — a boundary token, never one
of the text's — and

    enc = encode(batch)        # the encoder's states H from the word embeddings (inputs_embeds: gradients reach E)
    α   = attend(enc)          # one-hot on the classification token
    out = decode(enc, α)       # the checkpoint's own head on Σ_t α_t h_t (its output exactly, for that α)

Attention per layer and head comes from the eager attention (``output_attentions``); each head's value vectors
f^h(x_j) = W_O^h (W_V^h x_j + b_V^h) from hooks on the value projections (BERT, RoBERTa, DistilBERT). Deleting a
token re-runs the model on the shorter sequence. What needs a pooling attention to perturb (permuted, adversarial,
erased α; Meister's intermediate states; attention as an importance) is refused by the families in one line.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch import nn

from attn_study.errors import UserError
from attn_study.models import outputs
from attn_study.models.classifier import Encoded, attended
from attn_study.models.encoders import LayerTrace

#: model type → (its base model's attribute, where each layer's value and output projections are)
SUPPORTED = {
    "bert": ("bert", "attention.self.value", "attention.output.dense"),
    "roberta": ("roberta", "attention.self.value", "attention.output.dense"),
    "distilbert": ("distilbert", "attention.v_lin", "attention.out_lin"),
}


def load_pretrained(path: str | Path, option: str = "hf_model"):
    """(model in eval mode with eager attention, tokenizer) from the directory ``path``; a one-line ``UserError``
    when ``transformers`` is missing, the directory holds no checkpoint, its type is not supported, or any of the
    classifier's weights is not in it or has another shape (a bare encoder's classification head, a head for
    another number of labels: transformers would initialise it at random, and every number measured would be
    noise)."""
    transformers = _transformers(option)
    # a weight of another shape is loaded, then refused below naming it
    model, loading, tokenizer = _load(
        transformers.AutoModelForSequenceClassification, path, option, ignore_mismatched_sizes=True
    )
    missing = sorted(str(key) for key in loading.get("missing_keys") or ())
    resized = sorted(str(key[0] if isinstance(key, tuple) else key) for key in loading.get("mismatched_keys") or ())
    if missing or resized:
        faults = ([f"lacks {_listed(missing)}"] if missing else []) + (
            [f"holds {_listed(resized)} in another shape"] if resized else []
        )
        raise UserError(
            f"{option}={path}: the checkpoint {' and '.join(faults)}, which transformers would initialise at random; "
            f"give the directory of a {type(model).__name__} fine-tuned on your task, saved with its head"
        )
    return model.eval(), tokenizer


def load_encoder(path: str | Path, option: str = "encoder.path"):
    """(the bare encoder — ``BertModel``, ``RobertaModel`` or ``DistilBertModel``, eager attention, no pooler —,
    tokenizer) from the directory ``path``: a pretrained encoder's, or a classifier's (its head is left out). A
    one-line ``UserError`` as :func:`load_pretrained`'s, and when a weight of the encoder is not in the checkpoint
    (transformers would initialise it at random)."""
    transformers = _transformers(option)
    kind = _model_type(path, option)
    extra = {"add_pooling_layer": False} if kind in ("bert", "roberta") else {}  # the pooler is not read
    model, loading, tokenizer = _load(transformers.AutoModel, path, option, **extra)
    missing = sorted(str(key) for key in loading.get("missing_keys") or ())
    if missing:
        raise UserError(
            f"{option}={path}: the checkpoint lacks {_listed(missing)}, which transformers would initialise at "
            f"random; give the directory of a pretrained {kind} model"
        )
    return model.eval(), tokenizer


def load_tokenizer(path: str | Path, option: str = "encoder.path"):
    """(config, tokenizer) saved in the checkpoint directory ``path`` (one line when they cannot be read)."""
    transformers = _transformers(option)
    _model_type(path, option)
    folder = Path(path).expanduser()
    with _quiet():
        try:
            config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
            return config, transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as err:
            raise UserError(f"{option}={path}: cannot load its tokenizer: {str(err).splitlines()[0]}") from None


def position_limit(config, tokenizer) -> int:
    """The most pieces one sequence may hold, special tokens included: the model's position table — less the
    positions RoBERTa reserves below its padding index (its positions start at ``pad_token_id`` + 1) — and the
    tokenizer's own ``model_max_length``."""
    positions = int(getattr(config, "max_position_embeddings", 512))
    if config.model_type == "roberta":
        positions -= int(config.pad_token_id) + 1
    return min(positions, int(tokenizer.model_max_length))


def _transformers(option: str):
    try:
        import transformers
    except ImportError:
        raise UserError(f"{option}: the transformers package is missing; pip install -e '.[hf]'") from None
    return transformers


def _model_type(path, option: str) -> str:
    """The checkpoint's ``model_type``, refused in one line when there is no checkpoint or it is not supported."""
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise UserError(f"{option}={path}: no Hugging Face checkpoint there (config.json missing)")
    try:
        kind = _transformers(option).AutoConfig.from_pretrained(folder, local_files_only=True).model_type
    except (OSError, ValueError) as err:
        raise UserError(f"{option}={path}: cannot load it: {str(err).splitlines()[0]}") from None
    if kind not in SUPPORTED:
        raise UserError(f"{option}={path}: a {kind} model; supported: {', '.join(sorted(SUPPORTED))}")
    return kind


@contextlib.contextmanager
def _quiet():
    """transformers' table of the weights it initialised and its progress bars off (what matters is said in one
    line by the caller)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _load(auto_model, path, option: str, **extra):
    """(model, loading info, tokenizer) of the checkpoint in ``path`` with eager attention (each layer's weights
    readable), nothing downloaded."""
    transformers = _transformers(option)
    _model_type(path, option)
    folder = Path(path).expanduser()
    with _quiet():
        try:
            model, loading = auto_model.from_pretrained(
                folder, local_files_only=True, attn_implementation="eager", output_loading_info=True, **extra
            )
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as err:
            raise UserError(f"{option}={path}: cannot load it: {str(err).splitlines()[0]}") from None
    return model, loading, tokenizer


def _listed(names: list[str], at_most: int = 4) -> str:
    return ", ".join(names[:at_most]) + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


class PretrainedClassifier(nn.Module):
    """A Hugging Face ``…ForSequenceClassification`` with the stages of ``analysis.protocol.StagedModel``."""

    token_attention = True
    pooling_attention = False  # α is fixed on the classification token: nothing to perturb or rank by

    def __init__(self, hf_model):
        super().__init__()
        kind = hf_model.config.model_type
        if kind not in SUPPORTED:
            raise UserError(f"a {kind} checkpoint; supported: {', '.join(sorted(SUPPORTED))}")
        self.hf = hf_model
        self.kind = kind
        self.base = getattr(hf_model, SUPPORTED[kind][0])
        self.num_classes = int(hf_model.config.num_labels)
        config = hf_model.config
        layers = getattr(config, "num_hidden_layers", None) or config.n_layers
        heads = getattr(config, "num_attention_heads", None) or config.n_heads
        self.attention_shape = (int(layers), int(heads), True)

    # -- the stages ------------------------------------------------------------------------------

    def embed(self, batch: dict) -> torch.Tensor:
        return self.hf.get_input_embeddings()(batch["ids"])

    def _states(self, batch: dict, embedded: torch.Tensor, attentions: bool = False):
        return self.base(inputs_embeds=embedded, attention_mask=batch["mask"].long(), output_attentions=attentions)

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        embedded = self.embed(batch) if embedded is None else embedded
        hidden = self._states(batch, embedded).last_hidden_state * batch["mask"].unsqueeze(-1)
        return Encoded(embedded=embedded, hidden=hidden, mask=attended(batch), lengths=batch["lengths"])

    def attend(self, enc: Encoded) -> torch.Tensor:
        alpha = torch.zeros(enc.hidden.shape[:2], dtype=enc.hidden.dtype, device=enc.hidden.device)
        alpha[:, 0] = 1.0
        return alpha

    def decode_pooled(self, context: torch.Tensor, query=None, candidates=None) -> torch.Tensor:
        """The checkpoint's classification head on the vector it reads at the classification token."""
        hf = self.hf
        if self.kind == "bert":
            return hf.classifier(hf.dropout(hf.bert.pooler(context.unsqueeze(1))))
        if self.kind == "roberta":
            return hf.classifier(context.unsqueeze(1))
        hidden = hf.dropout(nn.functional.relu(hf.pre_classifier(context)))  # distilbert
        return hf.classifier(hidden)

    def decode(self, enc: Encoded, alpha: torch.Tensor) -> torch.Tensor:
        return self.decode_pooled(torch.einsum("bt,btm->bm", alpha, enc.hidden))

    def decode_many(self, enc: Encoded, alphas: torch.Tensor) -> torch.Tensor:
        context = torch.einsum("bkt,btm->bkm", alphas, enc.hidden)
        return self.decode_pooled(context.flatten(0, 1)).unflatten(0, alphas.shape[:2])

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        return outputs.probabilities(logits)

    def forward(self, batch: dict):
        enc = self.encode(batch)
        alpha = self.attend(enc)
        return self.decode(enc, alpha), alpha

    # -- the layers, for the aggregation methods -------------------------------------------------

    def layer_trace(self, batch: dict) -> LayerTrace:
        """Each layer's attention and each head's value vectors (:func:`layer_trace`)."""
        return layer_trace(self.base, self.kind, self.attention_shape[1], self.embed(batch), batch["mask"])


def layers_of(base, kind: str):
    """The encoder's layers (a ``ModuleList``)."""
    return base.transformer.layer if kind == "distilbert" else base.encoder.layer


def layer_trace(base, kind: str, heads: int, embedded: torch.Tensor, mask: torch.Tensor, **inputs) -> LayerTrace:
    """What the encoder ``base`` (of ``kind``, ``heads`` heads a layer) does to the embeddings ``embedded`` (B, T, d)
    over the positions ``mask`` (B, T) (``inputs``: more of its inputs, e.g. ``token_type_ids``): each layer's
    eager attention (B, L, H, T, T), each head's value vectors through its slice of the output projection,
    f^h(x_j) = W_O^h (W_V^h x_j + b_V^h) (B, L, H, T, m), from hooks on the value projections, and the last
    layer's states; padding rows and states 0."""
    _, value_path, output_path = SUPPORTED[kind]
    layers = layers_of(base, kind)
    values: list[torch.Tensor] = []
    hooks = [
        layer.get_submodule(value_path).register_forward_hook(lambda _m, _i, out: values.append(out))
        for layer in layers
    ]
    try:
        out = base(inputs_embeds=embedded, attention_mask=mask.long(), output_attentions=True, **inputs)
    finally:
        for hook in hooks:
            hook.remove()
    attention = torch.stack(out.attentions, 1) * mask[:, None, None, :, None]
    transformed = []
    for layer, value in zip(layers, values):
        b, t, m = value.shape
        w_o = layer.get_submodule(output_path).weight.view(m, heads, m // heads)  # columns of head h: W_O^h
        transformed.append(torch.einsum("bjhd,ohd->bhjo", value.view(b, t, heads, m // heads), w_o))
    hidden = out.last_hidden_state * mask.unsqueeze(-1)
    return LayerTrace(attention, torch.stack(transformed, 1), hidden)
