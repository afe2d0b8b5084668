"""LightningModule around the staged classifier: loss, optimiser, metrics, and Bai et al.'s two
mitigations of combinatorial shortcuts as training options (random-attention pretraining, instance
weighting; ``attn_study.models.mitigation``)."""

from __future__ import annotations

import random
import time

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import AUROC, Accuracy, F1Score, MaxMetric, MetricCollection

from attn_study.errors import TrainingDiverged, UserError
from attn_study.models.classifier import AttentionClassifier, attended
from attn_study.models.encoders import conicity
from attn_study.models.han import HierarchicalAttentionClassifier
from attn_study.models.mitigation import MaskClassifier, shortcut_weights
from attn_study.models.selector import soft_token_attention
from attn_study.models.word_tying import KINDS as WORD_TYING_KINDS
from attn_study.models.word_tying import WordTying

SCHEDULES = ("standard", "random_attention_pretraining", "model_consistent_adversary")
#: the model-consistent adversary's KL(α_adv ‖ α_base) floors α_base here (a sparse base has zeros)
BASE_FLOOR = 1e-10
#: an epoch's mean training loss above this many times ln(C) (the loss of a uniform guess) has exploded
EXPLODED = 100.0


def _metrics(num_classes: int) -> MetricCollection:
    """Accuracy, macro-F1 and macro one-vs-rest AUROC on the distribution ŷ (B, C). For two classes
    these equal the binary accuracy at 0.5 and the binary AUROC."""
    return MetricCollection(
        {
            "acc": Accuracy(task="multiclass", num_classes=num_classes),
            "f1": F1Score(task="multiclass", num_classes=num_classes, average="macro"),
            "auroc": AUROC(task="multiclass", num_classes=num_classes),
        }
    )


class AttentionModule(L.LightningModule):
    """Trains an ``AttentionClassifier``: BCE on the sigmoid logit (binary) or cross-entropy,
    optional class weights; Adam (AMSGrad, as Jain & Wallace's code) with weight decay on the
    embedding/encoder/decoder and ``attention_weight_decay`` on the attention scorer.

    Logged: ``{train,val,test}/loss``, ``/acc``, ``/f1`` (macro), ``/auroc``, and ``val/acc_best``.

    Bai et al.'s mitigations (``training`` in the config):

    - ``schedule='random_attention_pretraining'``: for the first ``pretrain_epochs`` epochs (phase 1)
      the model is trained with attention drawn independently of the input (``model.random_attention``:
      uniform weights on the simplex for soft attention, random k-subsets for a selector), so the
      layers after the attention cannot learn from *which* positions are chosen; then (phase 2) every
      parameter but the attention's own (``model.attention_parameters()``) is frozen and the attention
      is trained. Phase-1 epochs are never chosen as the best checkpoint: their ``val/acc`` is logged
      as NaN (the real values under ``val/early/``); so are the epochs before ``select_from_epoch``.
    - ``instance_weighting``: each training instance's loss is weighted by p(y)/p̂(y | attention
      pattern) from a mask-only classifier trained alongside (``mitigation.py``).

    Wiegreffe & Pinter's model-consistent adversary (``schedule='model_consistent_adversary'``, a base run's
    outputs as soft targets and its attention in the batches' ``fixed_attention``): the training loss is
    mean_i [TVD(ŷ_i, ŷ_i^base) − λ KL(α_i ‖ α_i^base)] with λ = ``adversary_lam`` (α^base floored at
    ``BASE_FLOOR`` inside the logarithm): match the base model's predictions with attention as far from
    its as possible. Dev/test loss and accuracy are as for any run with soft targets.

    Models built to make attention faithful (flat and pair models, whose states are per token): the
    conicity of the states (``encoders.conicity``) is logged per epoch as ``{train,val,test}/conicity/mean``
    (each test instance's value kept in ``test_conicity`` for the run's interval); an encoder with
    ``conicity_weight`` λ > 0 (the Diversity LSTM) adds λ · mean conicity to the training loss; with
    ``word_tying`` λ > 0, Tutek & Šnajder's word-level objective (``word_tying.py``) adds λ · its loss.
    Both are logged as ``train/conicity_penalty`` and ``train/word_tying_loss``.
    """

    def __init__(
        self,
        model: nn.Module,
        lr: float = 1e-3,
        weight_decay: float = 1e-5,
        attention_weight_decay: float = 0.0,
        amsgrad: bool = True,
        class_weights: list[float] | None = None,
        schedule: str = "standard",
        pretrain_epochs: int = 0,
        instance_weighting: bool = False,
        weight_clip: tuple[float, float] = (0.1, 10.0),
        class_prior: list[float] | None = None,
        select_from_epoch: int = 0,
        adversary_lam: float = 0.0,
        word_tying: float = 0.0,
        word_tying_kind: str = "predict",
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["model"], logger=False)  # loggers get the run's config (tracking.py)
        self.model = model
        k = model.num_classes
        self.token_states = isinstance(model, AttentionClassifier) and not isinstance(
            model, HierarchicalAttentionClassifier
        )  # one state per input token: conicity and the faithful-by-design objectives apply
        self.conicity_weight = float(getattr(getattr(model, "encoder", None), "conicity_weight", 0.0) or 0.0)
        if word_tying < 0:
            raise UserError(f"training.word_tying.weight={word_tying}: a loss weight is >= 0")
        if word_tying_kind not in WORD_TYING_KINDS:
            raise UserError(f"training.word_tying.kind={word_tying_kind}: choose one of {list(WORD_TYING_KINDS)}")
        objectives = {"encoder.conicity_weight": self.conicity_weight, "training.word_tying.weight": word_tying}
        for option, value in objectives.items():
            if value and not self.token_states:
                raise UserError(
                    f"{option}={value} needs a flat or pair model (states per token), not a {type(model).__name__}"
                )
        self.word_tying = (
            WordTying(model.encoder.output_dim, model.embedding.embedding_dim, word_tying_kind) if word_tying else None
        )
        self.test_conicity: list[torch.Tensor] = []  # each test instance's conicity, in test order
        if class_weights is not None and len(class_weights) != k:
            raise UserError(f"model.class_weights={list(class_weights)}: {len(class_weights)} values for {k} classes")
        if schedule not in SCHEDULES:
            raise UserError(f"training.schedule={schedule}: choose from {list(SCHEDULES)}")
        needs = ("random_attention", "forward_with_attention", "attention_parameters")
        if schedule == "random_attention_pretraining" and not all(hasattr(model, n) for n in needs):
            raise UserError(f"training.schedule={schedule} needs a flat or selector model, not {type(model).__name__}")
        if schedule == "model_consistent_adversary" and not soft_token_attention(model):
            raise UserError(
                f"training.schedule={schedule} needs soft attention over tokens, not {type(model).__name__}"
            )
        if schedule == "random_attention_pretraining" and int(pretrain_epochs) < 1:
            raise UserError(
                f"training.pretrain_epochs={pretrain_epochs}: random-attention pretraining needs >= 1 epoch"
            )
        if instance_weighting and class_prior is None:
            raise ValueError("instance weighting needs the class prior of the training split")
        self.register_buffer("class_weights", torch.tensor(class_weights, dtype=torch.float) if class_weights else None)
        # recomputed from the training split on every build: not part of the checkpoint (older ones lack it)
        self.register_buffer(
            "class_prior", torch.tensor(class_prior, dtype=torch.float) if class_prior else None, persistent=False
        )
        self.mask_classifier = MaskClassifier(k) if instance_weighting else None
        self.test_recorder = None  # saved.AttentionRecorder: each test instance's α and ŷ, kept while testing
        self._seconds_before = 0.0
        self.train_metrics = _metrics(k).clone(prefix="train/")
        self.val_metrics = _metrics(k).clone(prefix="val/")
        self.test_metrics = _metrics(k).clone(prefix="test/")
        self.val_acc_best = MaxMetric()

    def use_soft_targets(self, targets: dict[str, torch.Tensor]) -> None:
        """Train towards another model's output distributions (``{split: (N, C)}``, aligned with the
        splits by instance position) instead of the gold labels: an explainer reproducing a black box,
        a model matching a base model. Accuracy is still against the gold labels; ``<stage>/fidelity``
        is the agreement with the targets' argmax. Not saved in checkpoints."""
        for split, values in targets.items():
            self.register_buffer(f"soft_targets_{split}", values.float(), persistent=False)

    def soft_targets(self, batch: dict, stage: str) -> torch.Tensor | None:
        split = {"train": "train", "val": "dev", "test": "test"}[stage]
        values = getattr(self, f"soft_targets_{split}", None)
        return None if values is None else values[batch["index"]]

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, soft: torch.Tensor | None = None) -> torch.Tensor:
        if soft is not None:  # class weights do not apply to a teacher's distributions
            if logits.shape[-1] == 1:
                return F.binary_cross_entropy_with_logits(logits.squeeze(-1), soft[:, 1])
            return F.cross_entropy(logits, soft)
        if logits.shape[-1] == 1:
            target = labels.float()
            weight = None if self.class_weights is None else self.class_weights[labels]
            return F.binary_cross_entropy_with_logits(logits.squeeze(-1), target, weight=weight)
        return F.cross_entropy(logits, labels, weight=self.class_weights)

    def _per_instance_loss(
        self, logits: torch.Tensor, labels: torch.Tensor, soft: torch.Tensor | None = None
    ) -> torch.Tensor:
        if logits.shape[-1] == 1:
            target = labels.float() if soft is None else soft[:, 1]
            return F.binary_cross_entropy_with_logits(logits.squeeze(-1), target, reduction="none")
        return F.cross_entropy(logits, labels if soft is None else soft, reduction="none")

    @property
    def selectable(self) -> bool:
        """Whether this epoch may be chosen as the best checkpoint: not before ``select_from_epoch`` (Jain &
        Wallace's code never keeps epoch 0), not in phase 1 of random-attention pretraining."""
        return not self.pretraining and self.current_epoch >= self.hparams.select_from_epoch

    @property
    def pretraining(self) -> bool:
        """Whether this epoch is phase 1 of random-attention pretraining."""
        return (
            self.hparams.schedule == "random_attention_pretraining"
            and self.current_epoch < self.hparams.pretrain_epochs
        )

    def on_train_epoch_start(self) -> None:
        if self.hparams.schedule != "random_attention_pretraining":
            return
        if not hasattr(self, "_trainable"):  # what the config leaves trainable (frozen embeddings stay frozen)
            self._trainable = {id(p): p.requires_grad for p in self.model.parameters()}
        attention = {id(p) for p in self.model.attention_parameters()}
        for p in self.model.parameters():  # phase 2: only the attention learns
            p.requires_grad_(self._trainable[id(p)] and (self.pretraining or id(p) in attention))

    def training_step(self, batch, batch_idx):
        enc = None
        if self.pretraining:
            weights = self.model.random_attention(attended(batch))
            logits, attention = self.model.forward_with_attention(batch, weights), weights
        else:
            logits, attention, enc = self._forward(batch, "train")
        soft = self.soft_targets(batch, "train")
        if self.hparams.schedule == "model_consistent_adversary":
            loss = self._adversary_loss(logits, attention, batch, soft, "train")
        elif self.mask_classifier is None or self.pretraining:
            loss = self.loss(logits, batch["labels"], soft)
        else:
            loss = self._weighted_loss(logits, attention, batch, soft)
        if enc is not None:
            loss = loss + self._faithfulness_objectives(enc, batch)
        self._record(logits, batch, soft, "train")
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                f"training diverged at epoch {self.current_epoch}, step {self.global_step}: "
                f"train/loss = {float(loss)}; lower model.optimizer.lr (now {self.hparams.lr:g})"
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0], on_step=False, on_epoch=True)
        return loss

    def _adversary_loss(self, logits, attention, batch, soft, stage: str) -> torch.Tensor:
        """mean_i TVD(ŷ_i, ŷ_i^base) − λ KL(α_i ‖ α_i^base) (the class docstring), logged with its two terms
        as ``<stage>/adversary_{loss,tvd,kl}``."""
        if soft is None or "fixed_attention" not in batch:
            raise RuntimeError("the model-consistent adversary needs the base run's outputs and attention")
        change = 0.5 * (self.model.probabilities(logits) - soft).abs().sum(-1)
        base = batch["fixed_attention"].clamp_min(BASE_FLOOR)
        kl = torch.where(
            attention > 0,
            attention * (torch.log(attention.clamp_min(BASE_FLOOR)) - torch.log(base)),
            torch.zeros_like(attention),
        ).sum(-1)
        size = batch["labels"].shape[0]
        loss = (change - self.hparams.adversary_lam * kl).mean()
        for name, value in (("tvd", change.mean()), ("kl", kl.mean()), ("loss", loss)):
            self.log(f"{stage}/adversary_{name}", value, batch_size=size, on_step=False, on_epoch=True)
        return loss

    def _record(self, logits, batch, soft, stage: str) -> None:
        probs = self.model.probabilities(logits.detach())
        getattr(self, f"{stage}_metrics").update(probs, batch["labels"])
        if soft is not None:
            agree = (probs.argmax(-1) == soft.argmax(-1)).float().mean()
            self.log(f"{stage}/fidelity", agree, batch_size=batch["labels"].shape[0], on_step=False, on_epoch=True)

    def _weighted_loss(self, logits, attention, batch, soft=None) -> torch.Tensor:
        """Σ c_i w_i ℓ_i / Σ c_i w_i (c: class weights, w: shortcut weights) + the mask-only classifier's loss."""
        labels = batch["labels"]
        aux_logits = self.mask_classifier(attention.detach(), attended(batch))
        aux_loss = F.cross_entropy(aux_logits, labels)
        with torch.no_grad():
            conditional = torch.softmax(aux_logits, -1).gather(1, labels[:, None]).squeeze(1)
            weights = shortcut_weights(self.class_prior[labels], conditional, self.hparams.weight_clip)
            if self.class_weights is not None:
                weights = weights * self.class_weights[labels]
        size = labels.shape[0]
        self.log("train/shortcut_aux_loss", aux_loss, batch_size=size, on_step=False, on_epoch=True)
        self.log("train/shortcut_weight_max", weights.max(), batch_size=size, on_step=False, on_epoch=True)
        per_instance = self._per_instance_loss(logits, labels, soft)
        return (weights * per_instance).sum() / weights.sum() + aux_loss

    def _forward(self, batch: dict, stage: str):
        """(logits, α, the encoder pass or None): a model with states per token is run stage by stage (the same
        computation as ``model(batch)``) so that its states' conicity is logged as ``<stage>/conicity/mean``."""
        if not self.token_states:
            return *self.model(batch), None
        enc = self.model.encode(batch)
        attention = self.model.attend(enc)
        logits = self.model.decode(enc, attention)
        values = conicity(enc.hidden.detach(), enc.mask)
        if stage == "test":
            self.test_conicity.append(values.cpu())
        finite = torch.isfinite(values)
        if finite.any():
            self.log(
                f"{stage}/conicity/mean",
                values[finite].mean(),
                batch_size=int(finite.sum()),
                on_step=False,
                on_epoch=True,
            )
        return logits, attention, enc

    def _faithfulness_objectives(self, enc, batch: dict) -> torch.Tensor:
        """λ_div · mean conicity (Diversity LSTM) + λ_tie · the word-level loss (word tying); 0 when neither."""
        total = enc.hidden.new_zeros(())
        size = batch["labels"].shape[0]
        if self.conicity_weight:
            penalty = conicity(enc.hidden, enc.mask).nanmean()
            self.log("train/conicity_penalty", penalty, batch_size=size, on_step=False, on_epoch=True)
            total = total + self.conicity_weight * penalty
        if self.word_tying is not None:
            tying = self.word_tying(enc.hidden, enc.mask, batch["ids"], self.model.embedding)
            self.log("train/word_tying_loss", tying, batch_size=size, on_step=False, on_epoch=True)
            total = total + self.hparams.word_tying * tying
        return total

    def _step(self, batch: dict, stage: str) -> torch.Tensor:
        logits, attention, _ = self._forward(batch, stage)
        soft = self.soft_targets(batch, stage)
        if self.hparams.schedule == "model_consistent_adversary":  # what its checkpoint is chosen by
            self._adversary_loss(logits, attention, batch, soft, stage)
        loss = self.loss(logits, batch["labels"], soft)
        self._record(logits, batch, soft, stage)
        if stage == "test" and self.test_recorder is not None:
            self.test_recorder.add(batch, attention, self.model.probabilities(logits))
        size = batch["labels"].shape[0]
        self.log(f"{stage}/loss", loss, prog_bar=stage != "test", batch_size=size, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def _log_epoch(self, stage: str) -> dict:
        values = getattr(self, f"{stage}_metrics").compute()
        self.log_dict(values, prog_bar=stage == "val")
        getattr(self, f"{stage}_metrics").reset()
        return values

    def on_fit_start(self) -> None:
        self._fit_started = time.time()
        self._fit_seconds = None

    def on_fit_end(self) -> None:
        # frozen here: testing reloads the best checkpoint, whose train_seconds (as of that epoch) must not be
        # added to the time since fit started, nor the testing and analyses counted as training
        self._fit_seconds = self.train_seconds

    @property
    def seconds_before(self) -> float:
        """The earlier attempts' training seconds (0 unless resumed), as of their last checkpoint."""
        return self._seconds_before

    @property
    def train_seconds(self) -> float:
        """Seconds of training over every attempt: the earlier attempts' (as of their last checkpoint)
        and this one's so far (up to the end of fit, once it has ended)."""
        if getattr(self, "_fit_seconds", None) is not None:
            return self._fit_seconds
        return self._seconds_before + (time.time() - self._fit_started if hasattr(self, "_fit_started") else 0.0)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.val_acc_best.update_count:  # a resumed run keeps its best dev accuracy so far
            checkpoint["val_acc_best"] = float(self.val_acc_best.compute())
        checkpoint["train_seconds"] = self.train_seconds
        checkpoint["rng_states"] = _rng_states()  # a resumed run draws the numbers the uninterrupted one would

    def non_persistent_keys(self) -> set[str]:
        """Buffers rebuilt from the data on every build (the class prior): a checkpoint that holds them
        (written before they stopped being saved) loads all the same."""
        return {name for name, _ in self.named_buffers()} - set(self.state_dict())

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        for name in self.non_persistent_keys():
            checkpoint.get("state_dict", {}).pop(name, None)
        if "val_acc_best" in checkpoint:
            self.val_acc_best.reset()
            self.val_acc_best.update(torch.tensor(checkpoint["val_acc_best"]))
        if self.trainer.state.fn == "fit":  # resuming: the earlier attempts' training (not a reload for testing)
            self._seconds_before = float(checkpoint.get("train_seconds", 0.0))
        if "rng_states" in checkpoint and self.trainer.state.fn == "fit":
            _set_rng_states(checkpoint["rng_states"])

    def on_train_epoch_end(self):
        self._log_epoch("train")
        mean = self.trainer.callback_metrics.get("train/loss")
        limit = EXPLODED * float(np.log(max(self.model.num_classes, 2)))
        if mean is not None and float(mean) > limit:
            raise TrainingDiverged(
                f"training diverged in epoch {self.current_epoch}: mean train/loss {float(mean):.3g} > "
                f"{limit:.3g} (100 × the loss of a uniform guess); lower model.optimizer.lr "
                f"(now {self.hparams.lr:g})"
            )

    def on_validation_epoch_end(self):
        if not self.selectable:  # not a candidate for the best checkpoint: the real values under val/early/
            values = self.val_metrics.compute()
            self.val_metrics.reset()
            self.log_dict({k.replace("val/", "val/early/"): v for k, v in values.items()})
            self.log_dict({k: float("nan") for k in values}, prog_bar=True)
            return
        values = self._log_epoch("val")
        loss = self.trainer.callback_metrics.get("val/loss")
        if loss is not None and not torch.isfinite(loss):
            raise TrainingDiverged(
                f"validation loss is {float(loss)} after epoch {self.current_epoch}: training "
                f"diverged; lower model.optimizer.lr (now {self.hparams.lr:g})"
            )
        if not self.trainer.sanity_checking:
            self.val_acc_best.update(values["val/acc"])
            self.log("val/acc_best", self.val_acc_best.compute())

    def on_test_epoch_start(self) -> None:
        self.test_conicity = []

    def on_test_epoch_end(self):
        self._log_epoch("test")

    def configure_optimizers(self):
        attention = [p for n, p in self.model.named_parameters() if n.startswith("scorer.") and p.requires_grad]
        rest = [p for n, p in self.model.named_parameters() if not n.startswith("scorer.") and p.requires_grad]
        for extra in (self.mask_classifier, self.word_tying):
            if extra is not None:
                rest += list(extra.parameters())
        groups = [{"params": rest, "weight_decay": self.hparams.weight_decay}]
        if attention:
            groups.append({"params": attention, "weight_decay": self.hparams.attention_weight_decay})
        return torch.optim.Adam(groups, lr=self.hparams.lr, amsgrad=self.hparams.amsgrad)


def _rng_states() -> dict:
    """The global random-number states, as tensors and plain values (checkpoints load with weights_only)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    n = states["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
