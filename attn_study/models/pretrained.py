"""``encoder=pretrained``: a locally stored Hugging Face encoder (BERT, RoBERTa, DistilBERT) under the project's
attention and decoder (docs/pretrained.md).

    E = embed(batch)                     # the checkpoint's word-piece table (the model's ``embedding``)
    H = encoder(E, mask, lengths, ids)   # its layers, from E (inputs_embeds: gradients reach E); padding 0
    α = attend(enc)                      # attention=additive|dot, any projection, over the text's pieces only
    logits = decode(enc, α)              # the project's decoder on c = Σ_t α_t h_t

The text's pieces are what α weighs and every test scores: the tokenizer's special tokens (``[CLS]``, ``[SEP]``,
``<s>``, ``</s>``) and a pair's second text are read by the encoder, never weighed (the batch's ``token_mask``,
``data/pretrained.py``). ``attention=cls`` reads the classification token's state instead (α one-hot on position 0,
Devlin et al. 2019 §3: C ∈ R^H, softmax(C Wᵀ)): a model without a pooling attention, which the families that perturb
or rank α refuse in one line.

Training follows the fine-tuning recipe of the Hugging Face literature (:func:`fine_tuning`): AdamW, the encoder at
its own learning rate (``encoder.lr``) and the attention and decoder at the model's (``model.optimizer.lr``), a
linear warm-up over the first ``encoder.warmup`` of the steps, then a linear decay to 0. On a CUDA GPU that has
bfloat16 the encoder runs under bf16 autocast while training (``encoder.mixed_precision``); evaluation, testing and
every analysis run in float32.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_study.errors import UserError
from attn_study.models.classifier import AttentionClassifier, Encoded, attended
from attn_study.models.encoders import LayerTrace
from attn_study.models.huggingface import layer_trace, load_encoder, load_tokenizer, position_limit


class PretrainedEncoder(nn.Module):
    """The encoder of the checkpoint in ``path`` (``huggingface.load_encoder``), its word-piece table taken out as
    :attr:`word_embeddings` (the classifier's ``embedding``, which gradient importance differentiates against; the
    encoder reads embeddings, never ids). m = the checkpoint's hidden size.

    ``finetune``: train its weights (else frozen: only the attention and the decoder learn). ``lr``,
    ``weight_decay`` and ``warmup``: its part of :func:`fine_tuning`. ``max_length``: the pieces a text may have,
    special tokens included (null: the model's positions; the data module cuts texts to it). ``mixed_precision``:
    bf16 autocast while training on a CUDA device with bfloat16 (:meth:`forward`).
    """

    def __init__(
        self,
        path: str | None = None,
        finetune: bool = True,
        max_length: int | None = None,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup: float = 0.1,
        mixed_precision: bool = True,
    ):
        super().__init__()
        self.hf, tokenizer = load_encoder(checkpoint(path))
        config = self.hf.config
        self.max_length = piece_limit(config, tokenizer, max_length)
        self.kind = config.model_type
        # the word-piece table leaves the checkpoint's modules (it reads inputs_embeds only) for the classifier's
        # ``embedding``: held in a tuple, it is no module of the encoder, so the sanity cascade's stage "encoder"
        # re-initialises the layers and its stage "embeddings" the table
        self._table = (self.hf.embeddings.word_embeddings,)
        self.hf.embeddings.word_embeddings = None
        heads = getattr(config, "num_attention_heads", None) or config.n_heads
        layers = getattr(config, "num_hidden_layers", None) or config.n_layers
        self.output_dim = int(getattr(config, "hidden_size", None) or config.dim)
        self.attention_shape = (int(layers), int(heads), True)  # layers, heads, f^h known (aggregation methods)
        # [SEP]'s id as the tokenizer builds pairs (a real BERT's config.json has no sep_token_id)
        self.separator = (
            tokenizer.sep_token_id if tokenizer.sep_token_id is not None else getattr(config, "sep_token_id", None)
        )
        if self.kind == "bert" and self.separator is None:
            raise UserError(f"encoder.path={path}: a BERT checkpoint's tokenizer needs a sep_token ([SEP])")
        self.finetune, self.lr, self.weight_decay, self.warmup = bool(finetune), float(lr), float(weight_decay), warmup
        self.mixed_precision = bool(mixed_precision)
        self.hf.requires_grad_(self.finetune)
        self.word_embeddings.requires_grad_(self.finetune)
        self.train()  # loaded in eval mode; a module is built to train (frozen: :meth:`train` keeps it in eval)
        self.word_embeddings.train()  # (a table behaves alike in either mode; Lightning warns of one in eval)

    @property
    def word_embeddings(self) -> nn.Embedding:
        """The checkpoint's word-piece table (the classifier registers it as its ``embedding``)."""
        return self._table[0]

    def train(self, mode: bool = True):
        """A frozen encoder stays in eval mode (no dropout: the same states every epoch) while the rest trains."""
        return super().train(mode and self.finetune)

    def inputs(self, ids: torch.Tensor | None) -> dict:
        """The encoder's inputs besides the embeddings: BERT's segment of each piece (``token_type_ids``), 0 up to
        and including the first ``[SEP]``, 1 after it — as its tokenizer builds a pair (a single text: 0
        throughout) —, read off the ids, so that a piece deleted or a batch cut keeps them right. RoBERTa and
        DistilBERT have none."""
        if self.kind != "bert" or ids is None:
            return {}
        separators = (ids == self.separator).long()
        return {"token_type_ids": ((separators.cumsum(1) - separators) > 0).long()}

    def forward(
        self, embedded: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor, ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """H (B, T, m) from the embeddings E (B, T, d) of the pieces ``mask`` marks (the special tokens included);
        0 on padding. In training on a CUDA device with bfloat16 (``mixed_precision``) the layers run under bf16
        autocast and H returns in E's dtype."""
        fast = self.training and self.mixed_precision and embedded.is_cuda and torch.cuda.is_bf16_supported()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=fast):
            out = self.hf(inputs_embeds=embedded, attention_mask=mask.long(), **self.inputs(ids))
        return out.last_hidden_state.to(embedded.dtype) * mask.unsqueeze(-1)

    def trace(self, embedded: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor | None = None) -> LayerTrace:
        """Each layer's attention, each head's f^h and the states (``huggingface.layer_trace``), in float32."""
        return layer_trace(self.hf, self.kind, self.attention_shape[1], embedded, mask, **self.inputs(ids))

    def summarize(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The classification token's state (position 0)."""
        return h[:, 0]


def checkpoint(path: str | None) -> str:
    """``encoder.path``, refused in one line when it is not given."""
    if not path:
        raise UserError(
            "encoder=pretrained: give encoder.path=<the folder of a Hugging Face BERT, RoBERTa or DistilBERT "
            "checkpoint> (nothing is downloaded)"
        )
    return str(path)


def piece_limit(config, tokenizer, max_length: int | None) -> int:
    """The pieces a text may have, special tokens included: ``encoder.max_length``, or the checkpoint's own limit
    (``huggingface.position_limit``) when null; more than the checkpoint has positions for is refused in one
    line."""
    limit = position_limit(config, tokenizer)
    if max_length is None:
        return limit
    if max_length > limit:
        raise UserError(
            f"encoder.max_length={max_length}: the checkpoint reads at most {limit} pieces; give at most that"
        )
    return int(max_length)


class ClassificationToken(nn.Module):
    """``attention=cls``: no attention — the decoder reads the classification token's state (``[CLS]``, ``<s>``),
    as Devlin et al. (2019) classify; α is one-hot on position 0, a special token no test scores. Only
    ``encoder=pretrained`` has that token (refused otherwise when the model is built)."""

    classification_token = True

    def __init__(self, hidden_dim: int, query_dim: int | None = None):
        super().__init__()

    def forward(self, hidden: torch.Tensor, query: torch.Tensor | None = None) -> torch.Tensor:
        raise UserError("attention=cls reads the classification token of encoder=pretrained; use it with that encoder")


class PretrainedAttentionClassifier(AttentionClassifier):
    """The flat model (``AttentionClassifier``: its attention, decoder, ``decode_many``, every intervention) on a
    :class:`PretrainedEncoder`: ``embedding`` is the checkpoint's word-piece table, ``encode`` reads the pieces'
    ids too (BERT's segments), ``dropout`` applies to the pooled vector (the encoder has its own). A pair task is
    one sequence, as its tokenizer builds a pair; α weighs the first text's pieces (``token_mask``)."""

    def __init__(
        self,
        encoder: PretrainedEncoder,
        num_classes: int,
        scorer,
        projection: nn.Module,
        dropout: float = 0.0,
        freeze_embeddings: bool = False,
    ):
        nn.Module.__init__(self)  # AttentionClassifier's own table and encoder are not built: the checkpoint's are
        self.num_classes = num_classes
        self.encoder = encoder
        self.embedding = encoder.word_embeddings
        if freeze_embeddings:
            self.embedding.requires_grad_(False)
        self.scorer = scorer(hidden_dim=encoder.output_dim)
        self.projection = projection
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(encoder.output_dim, 1 if num_classes == 2 else num_classes)
        self.attention_shape = encoder.attention_shape

    @property
    def pooling_attention(self) -> bool:
        """Whether α is a pooling attention to perturb and rank by (not ``attention=cls``)."""
        return not getattr(self.scorer, "classification_token", False)

    def encode(self, batch: dict, embedded: torch.Tensor | None = None) -> Encoded:
        embedded = self.embed(batch) if embedded is None else embedded
        hidden = self.encoder(embedded, batch["mask"], batch["lengths"], batch["ids"])
        return Encoded(
            embedded=embedded,
            hidden=hidden,
            mask=attended(batch),
            lengths=batch["lengths"],
            candidates=batch.get("candidates"),
            fixed_attention=batch.get("fixed_attention"),
            fixed_lengths=batch.get("fixed_lengths"),
        )

    def attend(self, enc: Encoded) -> torch.Tensor:
        if self.pooling_attention:
            return super().attend(enc)
        alpha = torch.zeros(enc.hidden.shape[:2], dtype=enc.hidden.dtype, device=enc.hidden.device)
        alpha[:, 0] = 1.0
        return alpha

    def layer_trace(self, batch: dict) -> LayerTrace:
        """The encoder's layers on this batch (``PretrainedEncoder.trace``), for rollout, flow, raw and norms."""
        return self.encoder.trace(self.embed(batch), batch["mask"], batch["ids"])

    def configure_optimizers(self, hparams, extra: list, total_steps: float) -> dict:
        """Lightning's optimiser and scheduler of :func:`fine_tuning` (``extra``: the training objective's own
        parameters, trained as the head's)."""
        return fine_tuning(self, hparams, extra, total_steps)


def decays(parameter: nn.Parameter) -> bool:
    """Whether weight decay applies to a parameter of the encoder: not to its biases and layer-norm weights (the
    one-dimensional parameters), as in BERT's own optimiser (Devlin et al.'s ``AdamWeightDecayOptimizer``
    excludes ``bias`` and ``LayerNorm``)."""
    return parameter.dim() > 1


def warmup_then_linear(step: int, total: int, warmup: float) -> float:
    """The learning rate's factor at optimiser step ``step`` (0-based) of ``total``: w = round(warmup · total)
    warm-up steps rising linearly from 0 (step/w), then a linear decay from 1 to 0 at step ``total``
    ((total − step)/(total − w)), never below 0."""
    steps = max(int(round(warmup * total)), 0)
    if step < steps:
        return step / steps
    return max(0.0, (total - step) / max(total - steps, 1))


def fine_tuning(model: PretrainedAttentionClassifier, hparams, extra: list, total_steps: float) -> dict:
    """AdamW (``model.optimizer.amsgrad``) over three groups — the encoder and its word-piece table at
    ``encoder.lr`` with ``encoder.weight_decay`` (none on biases and layer norms: :func:`decays`), the attention
    scorer at ``model.optimizer.lr`` with ``attention_weight_decay``, the decoder and ``extra`` at
    ``model.optimizer.lr`` with ``weight_decay`` (decoupled, as AdamW's) — and the factor
    :func:`warmup_then_linear` on every group's rate, stepped per optimiser step over ``total_steps`` (Lightning's
    estimate for the run). A run of unbounded steps (early stopping with ``trainer.max_epochs=-1``) is refused: the
    decay needs its end."""
    if not math.isfinite(total_steps):
        raise UserError(
            "encoder=pretrained decays the learning rate linearly to 0 over the training steps, and this run's are "
            "unbounded (trainer.max_epochs=-1): give trainer.max_epochs"
        )
    encoder = model.encoder
    pretrained = {id(p) for p in list(encoder.parameters()) + list(model.embedding.parameters())}
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {
            "params": [p for n, p in named if id(p) in pretrained and decays(p)],
            "lr": encoder.lr,
            "weight_decay": encoder.weight_decay,
        },
        {"params": [p for n, p in named if id(p) in pretrained and not decays(p)], "lr": encoder.lr, "weight_decay": 0},
        {
            "params": [p for n, p in named if n.startswith("scorer.")],
            "lr": hparams.lr,
            "weight_decay": hparams.attention_weight_decay,
        },
        {
            "params": [p for n, p in named if id(p) not in pretrained and not n.startswith("scorer.")] + list(extra),
            "lr": hparams.lr,
            "weight_decay": hparams.weight_decay,
        },
    ]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], amsgrad=hparams.amsgrad)
    total = max(int(total_steps), 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_then_linear(step, total, encoder.warmup)
    )
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def pretrained_data(cfg, settings: dict):
    """The run's data module under ``encoder=pretrained``: the dataset (``settings``: ``TextDataModule``'s) split
    into the checkpoint's word pieces, at most ``encoder.max_length`` a text (:func:`piece_limit`). ROAR masks a
    piece with one of the tokenizer's special tokens (no text holds one): another ``roar.token`` is refused."""
    from attn_study.data.pretrained import PretrainedTextData

    config, tokenizer = load_tokenizer(checkpoint(cfg.encoder.get("path")))
    roar = cfg.get("roar")
    if roar and float(roar.fraction) > 0 and str(roar.token) not in tokenizer.all_special_tokens:
        raise UserError(
            f"roar.token={roar.token}: encoder=pretrained masks a piece with one of its tokenizer's special tokens "
            f"(none is a piece of a text); give roar.token={tokenizer.mask_token or tokenizer.unk_token}"
        )
    limit = piece_limit(config, tokenizer, cfg.encoder.get("max_length"))
    return PretrainedTextData(tokenizer=tokenizer, max_length=limit, **settings)


def pretrained_classifier(cfg, datamodule, component) -> PretrainedAttentionClassifier:
    """The run's model under ``encoder=pretrained`` (``component``: the job's builder of a config node), refused in
    one line for ``attention=cls`` on another encoder, a model other than the flat one (a pair task is one
    sequence, as the tokenizer builds it: ``model=pair`` is read as ``flat``), and word vectors of a file."""
    encoder, model = cfg.encoder.name, cfg.model
    if encoder != "pretrained":
        raise UserError(
            f"attention=cls reads the classification token ([CLS]) of encoder=pretrained, and encoder={encoder} has "
            "none; choose attention=additive or attention=dot"
        )
    if model.name not in ("flat", "pair"):
        raise UserError(
            f"model={model.name}: encoder=pretrained reads one sequence of word pieces (a pair task's two texts as "
            "its tokenizer builds a pair); use model=flat"
        )
    if model.embeddings.path:
        raise UserError(
            f"model.embeddings.path={model.embeddings.path}: encoder=pretrained reads its checkpoint's own "
            "word-piece table; leave it null"
        )
    built = component(cfg.encoder, option="encoder")
    if built.word_embeddings.num_embeddings < len(datamodule.vocab):
        raise UserError(
            f"encoder.path={cfg.encoder.path}: its tokenizer has {len(datamodule.vocab)} tokens and its model a table "
            f"of {built.word_embeddings.num_embeddings}; give a checkpoint saved with its own tokenizer"
        )
    return PretrainedAttentionClassifier(
        built,
        datamodule.num_classes,
        scorer=component(cfg.attention, partial=True, option="attention"),
        projection=component(cfg.projection, option="projection"),
        dropout=float(model.network.dropout),
        freeze_embeddings=bool(model.embeddings.freeze),
    )
