"""LightningModule around the staged classifier: loss, optimiser, metrics, model selection; what a training
step minimises is the run's objective (``attn_study.models.objectives``, one per ``conf/training/*.yaml``)."""

from __future__ import annotations

import random
import time
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import Accuracy, F1Score, MaxMetric, MetricCollection
from torchmetrics.classification import MulticlassAUROC
from torchmetrics.utilities import dim_zero_cat

from attn_study.errors import TrainingDiverged, UserError
from attn_study.models.classifier import AttentionClassifier, attended
from attn_study.models.encoders import conicity
from attn_study.models.han import HierarchicalAttentionClassifier
from attn_study.models.objectives import Standard
from attn_study.models.word_tying import KINDS as WORD_TYING_KINDS
from attn_study.models.word_tying import WordTying

#: an epoch's mean training loss above this many times ln(C) (the loss of a uniform guess) has exploded
EXPLODED = 100.0


class PresentClassesAUROC(MulticlassAUROC):
    """Macro one-vs-rest AUROC over the classes the targets hold: the mean over classes c with an instance of
    AUROC(ŷ_c, 1[y = c]). torchmetrics' macro average counts a class no target has (its AUROC undefined) as 0,
    so classes that are never labels (bAbI's ``classes=words``) or a class a split lacks would pull it down."""

    def __init__(self, num_classes: int) -> None:
        super().__init__(num_classes=num_classes, average="none")

    def compute(self) -> torch.Tensor:
        present = torch.bincount(dim_zero_cat(self.target).long(), minlength=self.num_classes) > 0
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No positive samples in targets")
            return super().compute()[present].mean()


def _metrics(num_classes: int) -> MetricCollection:
    """Accuracy, macro-F1 and macro one-vs-rest AUROC (over the classes the targets hold) on the distribution
    ŷ (B, C). For two classes these equal the binary accuracy at 0.5 and the binary AUROC."""
    return MetricCollection(
        {
            "acc": Accuracy(task="multiclass", num_classes=num_classes),
            "f1": F1Score(task="multiclass", num_classes=num_classes, average="macro"),
            "auroc": PresentClassesAUROC(num_classes),
        }
    )


class AttentionModule(L.LightningModule):
    """Trains an ``AttentionClassifier``: BCE on the sigmoid logit (binary) or cross-entropy,
    optional class weights; Adam (AMSGrad, as Jain & Wallace's code) with weight decay on the
    embedding/encoder/decoder and ``attention_weight_decay`` on the attention scorer.

    Logged: ``{train,val,test}/loss``, ``/acc``, ``/f1`` (macro), ``/auroc``, and ``val/acc_best``.

    What a training step minimises is its ``objective`` (``objectives.py``, one per ``conf/training/*.yaml``:
    the standard loss, Bai et al.'s instance weighting and random-attention pretraining, Wiegreffe & Pinter's
    model-consistent adversary). Epochs the objective keeps out of model selection (before
    ``select_from_epoch``; phase 1 of random-attention pretraining) log their dev metrics under
    ``val/early/`` and NaN as ``val/acc``, so they are never chosen as the best checkpoint.

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
        objective: Standard | None = None,
        class_prior: list[float] | None = None,
        word_tying: float = 0.0,
        word_tying_kind: str = "predict",
    ):
        super().__init__()
        # loggers get the run's config (tracking.py); the objective is rebuilt from it, as the model is
        self.save_hyperparameters(ignore=["model", "objective"], logger=False)
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
        self.objective = objective if objective is not None else Standard()
        self.objective.check(model)
        if self.objective.instance_weighting and class_prior is None:
            raise ValueError("instance weighting needs the class prior of the training split")
        self.register_buffer("class_weights", torch.tensor(class_weights, dtype=torch.float) if class_weights else None)
        # recomputed from the training split on every build: not part of the checkpoint (older ones lack it)
        self.register_buffer(
            "class_prior", torch.tensor(class_prior, dtype=torch.float) if class_prior else None, persistent=False
        )
        self.mask_classifier = self.objective.mask_classifier(k)
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

    def per_instance_loss(
        self, logits: torch.Tensor, labels: torch.Tensor, soft: torch.Tensor | None = None
    ) -> torch.Tensor:
        if logits.shape[-1] == 1:
            target = labels.float() if soft is None else soft[:, 1]
            return F.binary_cross_entropy_with_logits(logits.squeeze(-1), target, reduction="none")
        return F.cross_entropy(logits, labels if soft is None else soft, reduction="none")

    @property
    def selectable(self) -> bool:
        """Whether this epoch may be chosen as the best checkpoint (``objective.first_selectable`` on)."""
        return self.current_epoch >= self.objective.first_selectable

    @property
    def pretraining(self) -> bool:
        """Whether this epoch trains on random attention (phase 1 of random-attention pretraining)."""
        return self.objective.pretraining(self.current_epoch)

    def on_train_epoch_start(self) -> None:
        self.objective.start_epoch(self)

    def training_step(self, batch, batch_idx):
        enc = None
        if self.pretraining:
            weights = self.model.random_attention(attended(batch))
            logits, attention = self.model.forward_with_attention(batch, weights), weights
        else:
            logits, attention, enc = self._forward(batch, "train")
        soft = self.soft_targets(batch, "train")
        loss = self.objective.training_loss(self, logits, attention, batch, soft)
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

    def _record(self, logits, batch, soft, stage: str) -> None:
        probs = self.model.probabilities(logits.detach())
        getattr(self, f"{stage}_metrics").update(probs, batch["labels"])
        if soft is not None:
            agree = (probs.argmax(-1) == soft.argmax(-1)).float().mean()
            self.log(f"{stage}/fidelity", agree, batch_size=batch["labels"].shape[0], on_step=False, on_epoch=True)

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
        self.objective.evaluate(self, logits, attention, batch, soft, stage)
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
        extras = [p for part in (self.mask_classifier, self.word_tying) if part is not None for p in part.parameters()]
        own = getattr(self.model, "configure_optimizers", None)
        if callable(own):  # a pretrained encoder's fine-tuning recipe (models/pretrained.py): AdamW, warm-up, decay
            return own(self.hparams, extras, self.trainer.estimated_stepping_batches)
        attention = [p for n, p in self.model.named_parameters() if n.startswith("scorer.") and p.requires_grad]
        rest = [p for n, p in self.model.named_parameters() if not n.startswith("scorer.") and p.requires_grad]
        rest += extras
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
