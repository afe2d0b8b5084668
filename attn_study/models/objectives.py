"""The training objectives of ``conf/training/*.yaml``, one class per ``training.schedule``: what a training
step minimises, which epochs may become the best checkpoint, and what a run of it logs and needs.
``objective(training)`` builds one from the config's ``training`` node; ``AttentionModule`` asks its objective,
and so do the checks before training (``preflight``) and the loading of a base run (``saved``).

With ℓ_i the loss of instance i (BCE on the sigmoid logit or cross-entropy; class weights c_i; another
model's output distribution as a soft target where the run has one):

- ``standard``: mean_i ℓ_i.
- ``standard`` with ``instance_weighting`` (Bai et al. 2021, ``conf/training/instance_weighting.yaml``):
  Σ_i c_i w_i ℓ_i / Σ_i c_i w_i, w_i = p(y_i) / p̂(y_i | α_i) (``mitigation.shortcut_weights``), plus the
  mask-only classifier's own cross-entropy (it is trained alongside on the detached patterns).
- ``random_attention_pretraining`` (Bai et al. 2021): for the first ``pretrain_epochs`` epochs (phase 1), ℓ_i
  with α drawn independently of the input (``model.random_attention``); then (phase 2) only the attention's
  own parameters train, on the standard (or instance-weighted) loss. Phase-1 epochs are never the best
  checkpoint.
- ``model_consistent_adversary`` (Wiegreffe & Pinter 2019): mean_i [TVD(ŷ_i, ŷ_i^base) − λ KL(α_i ‖ α_i^base)],
  the base run's outputs as soft targets and its attention in the batches' ``fixed_attention`` (α^base floored
  at ``BASE_FLOOR`` inside the logarithm). Logged on every split as ``<stage>/adversary_{loss,tvd,kl}``; its
  checkpoint is the one of least ``val/adversary_loss``.

Every objective keeps epochs before ``select_from_epoch`` out of model selection (Jain & Wallace's code never
keeps epoch 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

import torch
import torch.nn.functional as F

from attn_study.errors import UserError
from attn_study.models.classifier import attended
from attn_study.models.mitigation import MaskClassifier, shortcut_weights
from attn_study.models.selector import soft_token_attention

#: the model-consistent adversary's KL(α_adv ‖ α_base) floors α_base here (a sparse base has zeros)
BASE_FLOOR = 1e-10


@dataclass
class Standard:
    """``training=standard`` (and ``training=instance_weighting``, its loss weighted): the module docstring."""

    schedule: ClassVar[str] = "standard"
    #: dev keys the run logs beyond loss, accuracy, F1 and AUROC (what a checkpoint may be chosen by)
    monitored: ClassVar[frozenset[str]] = frozenset()
    #: whether the base run's (``training.base``) output distributions are its training targets
    trains_towards_base: ClassVar[bool] = False
    select_from_epoch: int = 0
    instance_weighting: bool = False
    weight_clip: tuple[float, float] = (0.1, 10.0)

    def __post_init__(self):
        self.select_from_epoch = int(self.select_from_epoch or 0)
        self.instance_weighting = bool(self.instance_weighting)
        self.weight_clip = (float(self.weight_clip[0]), float(self.weight_clip[1]))

    @property
    def first_selectable(self) -> int:
        """The first epoch that may become the best checkpoint."""
        return self.select_from_epoch

    def check(self, model) -> None:
        """Refuse a model this objective cannot train (a ``UserError`` naming the option)."""

    def mask_classifier(self, num_classes: int) -> MaskClassifier | None:
        """Instance weighting's p̂(y | α), trained alongside (the module owns it, so it is saved and optimised)."""
        return MaskClassifier(num_classes) if self.instance_weighting else None

    def pretraining(self, epoch: int) -> bool:
        """Whether ``epoch`` trains on random attention (phase 1)."""
        return False

    def start_epoch(self, module) -> None:
        """Set what trains in the epoch about to start."""

    def training_loss(self, module, logits, attention, batch: dict, soft) -> torch.Tensor:
        """One training batch's loss: mean_i ℓ_i, or with ``instance_weighting`` (outside phase 1) the weighted one."""
        if not self.instance_weighting or self.pretraining(module.current_epoch):
            return module.loss(logits, batch["labels"], soft)
        return self._weighted_loss(module, logits, attention, batch, soft)

    def evaluate(self, module, logits, attention, batch: dict, soft, stage: str) -> None:
        """Log what this objective adds on a dev or test batch (nothing, for most)."""

    def _weighted_loss(self, module, logits, attention, batch, soft) -> torch.Tensor:
        """Σ c_i w_i ℓ_i / Σ c_i w_i (c: class weights, w: shortcut weights) + the mask-only classifier's loss."""
        labels = batch["labels"]
        aux_logits = module.mask_classifier(attention.detach(), attended(batch))
        aux_loss = F.cross_entropy(aux_logits, labels)
        with torch.no_grad():
            conditional = torch.softmax(aux_logits, -1).gather(1, labels[:, None]).squeeze(1)
            weights = shortcut_weights(module.class_prior[labels], conditional, self.weight_clip)
            if module.class_weights is not None:
                weights = weights * module.class_weights[labels]
        size = labels.shape[0]
        module.log("train/shortcut_aux_loss", aux_loss, batch_size=size, on_step=False, on_epoch=True)
        module.log("train/shortcut_weight_max", weights.max(), batch_size=size, on_step=False, on_epoch=True)
        per_instance = module.per_instance_loss(logits, labels, soft)
        return (weights * per_instance).sum() / weights.sum() + aux_loss


@dataclass
class RandomAttentionPretraining(Standard):
    """``training=random_attention_pretraining``: the module docstring."""

    schedule: ClassVar[str] = "random_attention_pretraining"
    #: what a model needs for it: attention drawn at random, a forward pass with given attention, its parameters
    NEEDS: ClassVar[tuple[str, ...]] = ("random_attention", "forward_with_attention", "attention_parameters")
    pretrain_epochs: int = 4

    def __post_init__(self):
        super().__post_init__()
        self.pretrain_epochs = int(self.pretrain_epochs)
        if self.pretrain_epochs < 1:
            raise UserError(
                f"training.pretrain_epochs={self.pretrain_epochs}: random-attention pretraining needs >= 1 epoch"
            )

    @property
    def first_selectable(self) -> int:
        return max(self.select_from_epoch, self.pretrain_epochs)

    def check(self, model) -> None:
        if not all(hasattr(model, name) for name in self.NEEDS):
            raise UserError(
                f"training.schedule={self.schedule} needs a flat or selector model, not {type(model).__name__}"
            )

    def pretraining(self, epoch: int) -> bool:
        return epoch < self.pretrain_epochs

    def start_epoch(self, module) -> None:
        """Phase 1 trains what the config leaves trainable (frozen embeddings stay frozen); phase 2 only the
        attention's own parameters among them."""
        if not hasattr(module, "trainable_by_config"):
            module.trainable_by_config = {id(p): p.requires_grad for p in module.model.parameters()}
        attention = {id(p) for p in module.model.attention_parameters()}
        phase_one = self.pretraining(module.current_epoch)
        for p in module.model.parameters():
            p.requires_grad_(module.trainable_by_config[id(p)] and (phase_one or id(p) in attention))


@dataclass
class ModelConsistentAdversary(Standard):
    """``training=model_consistent_adversary``: the module docstring."""

    schedule: ClassVar[str] = "model_consistent_adversary"
    monitored: ClassVar[frozenset[str]] = frozenset(
        {"val/adversary_loss", "val/adversary_tvd", "val/adversary_kl", "val/fidelity"}
    )
    trains_towards_base: ClassVar[bool] = True
    base: str | None = None
    lam: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        self.lam = float(self.lam or 0.0)
        if self.instance_weighting:
            raise UserError(
                "training.instance_weighting=true: the model-consistent adversary's loss has no instance weights; "
                "leave it false"
            )

    def check(self, model) -> None:
        if not soft_token_attention(model):
            raise UserError(
                f"training.schedule={self.schedule} needs soft attention over tokens, not {type(model).__name__}"
            )

    def training_loss(self, module, logits, attention, batch: dict, soft) -> torch.Tensor:
        return self._loss(module, logits, attention, batch, soft, "train")

    def evaluate(self, module, logits, attention, batch: dict, soft, stage: str) -> None:
        self._loss(module, logits, attention, batch, soft, stage)  # what its checkpoint is chosen by

    def _loss(self, module, logits, attention, batch, soft, stage: str) -> torch.Tensor:
        """mean_i TVD(ŷ_i, ŷ_i^base) − λ KL(α_i ‖ α_i^base), logged with its two terms."""
        if soft is None or "fixed_attention" not in batch:
            raise RuntimeError("the model-consistent adversary needs the base run's outputs and attention")
        change = 0.5 * (module.model.probabilities(logits) - soft).abs().sum(-1)
        base = batch["fixed_attention"].clamp_min(BASE_FLOOR)
        kl = torch.where(
            attention > 0,
            attention * (torch.log(attention.clamp_min(BASE_FLOOR)) - torch.log(base)),
            torch.zeros_like(attention),
        ).sum(-1)
        size = batch["labels"].shape[0]
        loss = (change - self.lam * kl).mean()
        for name, value in (("tvd", change.mean()), ("kl", kl.mean()), ("loss", loss)):
            module.log(f"{stage}/adversary_{name}", value, batch_size=size, on_step=False, on_epoch=True)
        return loss


#: ``training.schedule`` → its objective
OBJECTIVES: dict[str, type[Standard]] = {
    cls.schedule: cls for cls in (Standard, RandomAttentionPretraining, ModelConsistentAdversary)
}


def objective(training: Mapping | None) -> Standard:
    """The objective a config's ``training`` node names (``schedule``; absent: standard), with its options."""
    training = dict(training or {})
    schedule = training.get("schedule") or "standard"
    if schedule not in OBJECTIVES:
        raise UserError(f"training.schedule={schedule}: choose from {list(OBJECTIVES)}")
    cls = OBJECTIVES[schedule]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in training.items() if k in names and v is not None})
