"""A finished run read back: its config, its data and its trained model (``attn-study-analyze``, an
explainer's black box, a teacher's outputs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from attn_study.errors import UserError


def locate(ckpt_path: str | Path, option: str = "ckpt_path") -> tuple[Path, Path]:
    """(run directory, checkpoint file) from a run directory or a checkpoint path."""
    path = Path(ckpt_path).expanduser().resolve()
    if path.is_dir():
        run_dir, ckpt = path, path / "checkpoints" / "best.ckpt"
    else:
        ckpt = path
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    if not ckpt.is_file():
        raise UserError(f"{option}={ckpt_path}: no checkpoint at {ckpt}; give a run directory or its .ckpt file")
    if not (run_dir / ".hydra" / "config.yaml").is_file():
        raise UserError(f"{option}={ckpt_path}: {run_dir} has no .hydra/config.yaml; give a directory made by attn-study")
    return run_dir, ckpt


def run_config(run_dir: Path) -> DictConfig:
    """The run's own config, resolved (its data and model are the trained ones whatever the caller's is)."""
    cfg = OmegaConf.load(Path(run_dir) / ".hydra" / "config.yaml")
    OmegaConf.resolve(cfg)
    return cfg


def load_state(module, ckpt: Path) -> None:
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    except Exception as err:  # truncated or not a checkpoint
        raise UserError(f"{ckpt}: not a readable checkpoint ({type(err).__name__}); train the run again") from None
    for name in getattr(module, "non_persistent_keys", set)():
        state.pop(name, None)
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


def load(run: str | Path, option: str = "ckpt_path") -> SavedRun:
    """The run at ``run`` (a run directory or its checkpoint) with its data and best model, in eval mode."""
    from attn_study.build import build_datamodule, build_model

    run_dir, ckpt = locate(run, option)
    cfg = run_config(run_dir)
    datamodule = build_datamodule(cfg)
    datamodule.setup()
    module = build_model(cfg, datamodule)
    load_state(module, ckpt)
    module.eval().requires_grad_(False)
    return SavedRun(run_dir, cfg, datamodule, module)


def check_same_data(saved: SavedRun, datamodule, option: str) -> None:
    """Fail unless ``datamodule`` holds the same instances, in the same order, with the same vocabulary
    as the saved run's data (their outputs are then aligned by position)."""
    ours, theirs = datamodule.data, saved.datamodule.data
    if ours.vocab.itos != theirs.vocab.itos:
        raise UserError(f"{option}={saved.path}: its vocabulary differs from this run's; use the same dataset options")
    for split in ("train", "dev", "test"):
        if list(ours.splits[split].uids) != list(theirs.splits[split].uids):
            raise UserError(f"{option}={saved.path}: its {split} instances differ from this run's "
                            "(another dataset, filter or seed); use the same dataset options")


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
