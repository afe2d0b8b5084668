"""LightningModule around the staged classifier: loss, optimiser, metrics."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import AUROC, Accuracy, F1Score, MaxMetric, MetricCollection


def _metrics(num_classes: int) -> MetricCollection:
    """Accuracy, macro-F1 and macro one-vs-rest AUROC on the distribution ŷ (B, C). For two classes
    these equal the binary accuracy at 0.5 and the binary AUROC."""
    return MetricCollection({
        "acc": Accuracy(task="multiclass", num_classes=num_classes),
        "f1": F1Score(task="multiclass", num_classes=num_classes, average="macro"),
        "auroc": AUROC(task="multiclass", num_classes=num_classes),
    })


class AttentionModule(L.LightningModule):
    """Trains an ``AttentionClassifier``: BCE on the sigmoid logit (binary) or cross-entropy,
    optional class weights; Adam (AMSGrad, as Jain & Wallace's code) with weight decay on the
    embedding/encoder/decoder and ``attention_weight_decay`` on the attention scorer.

    Logged: ``{train,val,test}/loss``, ``/acc``, ``/f1`` (macro), ``/auroc``, and ``val/acc_best``.
    """

    def __init__(self, model: nn.Module, lr: float = 1e-3, weight_decay: float = 1e-5,
                 attention_weight_decay: float = 0.0, amsgrad: bool = True,
                 class_weights: list[float] | None = None):
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        self.model = model
        k = model.num_classes
        if class_weights is not None and len(class_weights) != k:
            raise ValueError(f"model.class_weights has {len(class_weights)} values for {k} classes")
        self.register_buffer("class_weights", torch.tensor(class_weights, dtype=torch.float) if class_weights else None)
        self.train_metrics = _metrics(k).clone(prefix="train/")
        self.val_metrics = _metrics(k).clone(prefix="val/")
        self.test_metrics = _metrics(k).clone(prefix="test/")
        self.val_acc_best = MaxMetric()

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] == 1:
            target = labels.float()
            weight = None if self.class_weights is None else self.class_weights[labels]
            return F.binary_cross_entropy_with_logits(logits.squeeze(-1), target, weight=weight)
        return F.cross_entropy(logits, labels, weight=self.class_weights)

    def _step(self, batch: dict, stage: str) -> torch.Tensor:
        logits, _ = self.model(batch)
        loss = self.loss(logits, batch["labels"])
        getattr(self, f"{stage}_metrics").update(self.model.probabilities(logits.detach()), batch["labels"])
        size = batch["labels"].shape[0]
        self.log(f"{stage}/loss", loss, prog_bar=stage != "test", batch_size=size, on_step=False, on_epoch=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def _log_epoch(self, stage: str) -> dict:
        values = getattr(self, f"{stage}_metrics").compute()
        self.log_dict(values, prog_bar=stage == "val")
        getattr(self, f"{stage}_metrics").reset()
        return values

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.val_acc_best.update_count:  # a resumed run keeps its best dev accuracy so far
            checkpoint["val_acc_best"] = float(self.val_acc_best.compute())

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "val_acc_best" in checkpoint:
            self.val_acc_best.reset()
            self.val_acc_best.update(torch.tensor(checkpoint["val_acc_best"]))

    def on_train_epoch_end(self):
        self._log_epoch("train")

    def on_validation_epoch_end(self):
        values = self._log_epoch("val")
        if not self.trainer.sanity_checking:
            self.val_acc_best.update(values["val/acc"])
            self.log("val/acc_best", self.val_acc_best.compute())

    def on_test_epoch_end(self):
        self._log_epoch("test")

    def configure_optimizers(self):
        attention = [p for n, p in self.model.named_parameters() if n.startswith("scorer.") and p.requires_grad]
        rest = [p for n, p in self.model.named_parameters() if not n.startswith("scorer.") and p.requires_grad]
        groups = [{"params": rest, "weight_decay": self.hparams.weight_decay}]
        if attention:
            groups.append({"params": attention, "weight_decay": self.hparams.attention_weight_decay})
        return torch.optim.Adam(groups, lr=self.hparams.lr, amsgrad=self.hparams.amsgrad)
