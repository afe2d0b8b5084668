"""A finished run read back: its config, its data and its trained model (``attn-study-analyze``, an
explainer's black box, a teacher's outputs)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attn_study import layout
from attn_study.data.digest import text_digests
from attn_study.errors import UserError

log = logging.getLogger(__name__)


def locate(ckpt_path: str | Path, option: str = "ckpt_path") -> tuple[Path, Path]:
    """(run directory, checkpoint file) from a run directory or a checkpoint path."""
    path = Path(ckpt_path).expanduser().resolve()
    run_dir = layout.run_of(path)
    ckpt = path / layout.CHECKPOINTS / layout.BEST if path.is_dir() else path
    if not ckpt.is_file():
        raise UserError(f"{option}={ckpt_path}: no checkpoint at {ckpt}; give a run directory or its .ckpt file")
    if not (run_dir / layout.RECORD / layout.CONFIG).is_file():
        raise UserError(
            f"{option}={ckpt_path}: {run_dir} has no .hydra/config.yaml; give a directory made by attn-study"
        )
    return run_dir, ckpt


def run_config(run_dir: Path) -> DictConfig:
    """The run's own config, resolved (its data and model are the trained ones whatever the caller's is)."""
    cfg = OmegaConf.load(Path(run_dir) / layout.RECORD / layout.CONFIG)
    OmegaConf.resolve(cfg)
    return cfg


def load_state(module, ckpt: Path) -> None:
    """The checkpoint's weights into ``module``; a checkpoint of another model (made by another version of
    attn_study, or of another config) is one line naming the weights that differ."""
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    except Exception as err:  # truncated or not a checkpoint
        raise UserError(f"{ckpt}: not a readable checkpoint ({type(err).__name__}); train the run again") from None
    for name in getattr(module, "non_persistent_keys", set)():
        state.pop(name, None)
    expected = module.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    resized = sorted(k for k in set(state) & set(expected) if tuple(state[k].shape) != tuple(expected[k].shape))
    if missing or unexpected or resized:
        parts = [
            f"{what}: {', '.join(names[:4])}{' …' if len(names) > 4 else ''}"
            for what, names in (("missing", missing), ("unexpected", unexpected), ("other shapes", resized))
            if names
        ]
        raise UserError(
            f"{ckpt}: its weights are not this model's ({'; '.join(parts)}): the run was made by another "
            "version of attn_study or with another config"
        )
    module.load_state_dict(state)


@dataclass
class SavedRun:
    path: Path
    cfg: DictConfig
    datamodule: object
    module: object

    @property
    def model(self):
        return self.module.model


def require_complete(run_dir: Path, option: str, force: bool = False) -> None:
    """A run another builds on (or that is analysed) must be complete: its numbers and its checkpoint are
    final only then. ``force`` accepts any other state (said in the log), never a directory that does not exist
    or that no attn-study run made."""
    from attn_study.job import state

    if not Path(run_dir).is_dir():
        raise UserError(f"{option}={run_dir}: no such directory; give the directory of a run made by attn-study")
    if not layout.is_run(run_dir):
        raise UserError(
            f"{option}={run_dir}: not a run directory (it has no {layout.RECORD}/{layout.CONFIG}); give the "
            "directory of a run made by attn-study"
        )
    status = state.read_status(run_dir)
    if state.is_complete(run_dir, status):
        return
    current = status.get("state") or "never started"
    if current == "complete":  # marked complete, but its results are not there
        current = f"complete, but without its {layout.SUMMARY}"
    if force:
        log.warning("%s=%s is not complete (state: %s); used anyway (force=true)", option, run_dir, current)
        return
    raise UserError(
        f"{option}={run_dir}: that run is not complete (state: {current}), so its model may be "
        "half-trained; finish it first, or set force=true to use it anyway"
    )


def check_same_data(saved: SavedRun, datamodule, option: str, this_run: str | Path | None = None) -> None:
    """Fail unless ``datamodule`` holds the same instances, in the same order, with the same vocabulary
    as the saved run's data (their outputs are then aligned by position)."""
    ours, theirs = datamodule.data, saved.datamodule.data
    this = f"this run ({this_run})" if this_run else "this run"
    if ours.vocab.itos != theirs.vocab.itos:
        raise UserError(f"{option}={saved.path}: its vocabulary differs from {this}'s; use the same dataset options")
    for split in ("train", "dev", "test"):
        mine, others = text_digests(ours.splits[split]), text_digests(theirs.splits[split])
        if mine != others:  # uids alone can agree on other texts (the synthetic task's, for another seed)
            first = next((i for i, (a, b) in enumerate(zip(mine, others)) if a != b), min(len(mine), len(others)))
            raise UserError(
                f"{option}={saved.path}: its {split} instances differ from {this}'s ({len(others)} vs "
                f"{len(mine)}, first difference at position {first}: another dataset, filter or "
                "seed); use the same dataset options"
            )


SIBLING = "sibling:"


def resolve_run(value: str, option: str, run_dir: str | Path) -> Path:
    """A run directory from an option's value: a path, or ``sibling:<experiment>`` — the job of the same
    sweep whose overrides are this run's with ``experiment=<experiment>`` (how the dependent jobs of
    ``sweep=wiegreffe_pinter`` find their base run)."""
    value = str(value)
    if not value.startswith(SIBLING):
        return Path(value).expanduser()
    import yaml

    from attn_study.sweep.naming import job_dir_name, sweep_job_keys

    overrides_file = layout.overrides_file(run_dir)
    if not overrides_file.is_file():
        raise UserError(
            f"{option}={value}: only a sweep job has siblings, and {run_dir} has no .hydra/overrides.yaml;"
            " give the run directory instead"
        )
    overrides = [o for o in yaml.safe_load(overrides_file.read_text()) or [] if not o.startswith("experiment=")]
    keys = sweep_job_keys(Path(run_dir).parent)  # the sweep's own naming, not this process's environment
    return Path(run_dir).parent / job_dir_name([*overrides, f"experiment={value[len(SIBLING) :]}"], keys)


@torch.no_grad()
def predictions(saved: SavedRun, batch_size: int = 256) -> dict[str, torch.Tensor]:
    """The saved model's output distribution on every instance of every split: ``{split: (N, C)}``."""
    model = saved.model
    out = {}
    for split in ("train", "dev", "test"):
        probs = torch.zeros(len(saved.datamodule.split(split)), saved.datamodule.num_classes)
        for batch in saved.datamodule.loader(split, batch_size=batch_size):
            probs[batch["index"]] = model.probabilities(model(batch)[0]).float()
        out[split] = probs
    return out


def reference_option(cfg: DictConfig) -> tuple[str, str] | None:
    """(option, value) of the run this one is built on: ``attention.source`` (attention=frozen) or
    ``training.base`` (the model-consistent adversary); None for any other run."""
    if (cfg.get("attention") or {}).get("name") == "preloaded":
        return "attention.source", cfg.attention.get("source")
    if (cfg.get("training") or {}).get("schedule") == "model_consistent_adversary":
        return "training.base", cfg.training.get("base")
    return None


class AttentionRecorder:
    """Each instance's attention over its tokens and output distribution, by position in the split:
    filled batch by batch (``add``: during ``trainer.test``, or by :func:`write_attention`'s own pass) and
    written by uid (``write``) as the file other runs compare with (seed variance, W&P adversaries)."""

    def __init__(self, size: int):
        self.attention: list = [None] * size
        self.outputs: list = [None] * size

    def add(self, batch: dict, alpha: torch.Tensor, probs: torch.Tensor) -> None:
        alpha, probs = alpha.detach().float().cpu(), probs.detach().float().cpu()
        for r, (index, length) in enumerate(zip(batch["index"].tolist(), batch["lengths"].tolist())):
            self.attention[index], self.outputs[index] = alpha[r, :length].tolist(), probs[r].tolist()

    def missing(self) -> list[int]:
        """The positions no batch has shown yet."""
        return [i for i, a in enumerate(self.attention) if a is None]

    @torch.no_grad()
    def fill(self, model, datamodule, split: str, batch_size: int = 256) -> int:
        """Record the instances no batch has shown (a test cut short by ``trainer.limit_test_batches``) by an
        eval-mode pass of their own over them: the file then covers the whole split, as other runs need.
        Returns how many were missing."""
        missing = self.missing()
        if missing:
            _record_pass(self, model, datamodule, split, missing, batch_size)
        return len(missing)

    def probabilities(self) -> torch.Tensor:
        """The output distributions (N, C), in split order."""
        return torch.tensor(self.outputs, dtype=torch.float32)

    def write(self, split, path: Path) -> None:
        """The file, one row per instance of ``split`` (a processed split): uid, digest of its text
        (:func:`text_digests`), attention, output distribution."""
        import pandas as pd

        from attn_study.io import write_parquet_atomic

        missing = self.missing()
        if missing:  # a partial record would be read as the split's: the caller fills it first
            raise RuntimeError(
                f"attention recorder: {len(missing)} of {len(self.attention)} instances never recorded "
                "(AttentionRecorder.fill records them)"
            )
        write_parquet_atomic(
            pd.DataFrame(
                {
                    "uid": list(split.uids),
                    "text": text_digests(split),
                    "attention": self.attention,
                    "probabilities": self.outputs,
                }
            ),
            path,
        )


@torch.no_grad()
def record(model, datamodule, splits=("test",), batch_size: int = 256) -> dict[str, AttentionRecorder]:
    """``{split: AttentionRecorder}`` of ``model`` (soft attention over tokens) from one eval-mode pass each."""
    out = {}
    for split in splits:
        out[split] = AttentionRecorder(len(datamodule.split(split)))
        _record_pass(out[split], model, datamodule, split, None, batch_size)
    return out


@torch.no_grad()
def _record_pass(recorder: AttentionRecorder, model, datamodule, split: str, indices, batch_size: int) -> None:
    """``recorder`` fed from one eval-mode pass of ``model`` over ``split`` (or its ``indices``)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for batch in datamodule.loader(split, batch_size=batch_size, indices=indices):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits, alpha = model(batch)
            recorder.add(batch, alpha, model.probabilities(logits))
    finally:
        model.train(was_training)


def write_attention(model, datamodule, path: Path, split: str = "test") -> None:
    """:class:`AttentionRecorder`'s file for ``split`` from a pass of its own (a run that did not record it)."""
    record(model, datamodule, (split,))[split].write(datamodule.split(split), path)
