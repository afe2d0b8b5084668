"""A run assembled in one place — its data, the runs it is built on, its model, its analyses — for training
(``training.py``), analysing again (``analyze.py``) and reading a finished run back (:func:`load`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from attn_study import saved
from attn_study.build import build_analyses, build_datamodule, build_model
from attn_study.data.checks import check_data
from attn_study.data.datamodule import TextDataModule
from attn_study.errors import UserError
from attn_study.models.module import AttentionModule
from attn_study.models.selector import soft_token_attention
from attn_study.preflight import check_positions
from attn_study.roar import job as roar_job


@dataclass
class Assembled:
    datamodule: TextDataModule
    module: AttentionModule
    data_metrics: dict = field(default_factory=dict)  # data/… keys of the data checks (data.checks.check_data)
    warnings: list = field(default_factory=list)  # what those checks flagged
    references: dict | None = None  # split → recorder of the run this one is built on (attach_reference)
    analyses: list = field(default_factory=list)
    roar: dict | None = None  # what the data was masked by (attn_study.roar.job.prepare); None: not a ROAR run


def data_and_model(cfg: DictConfig, run_dir: str | Path) -> Assembled:
    """The data (set up and checked: :func:`check_data`), the model, and the run it is built on attached to the
    data (``attention.source``, ``training.base``), refused in one line when the model has no attention over
    tokens to build on."""
    datamodule = build_datamodule(cfg)
    datamodule.setup()
    shuffled = datamodule.shuffle_labels(cfg.seed) if cfg.dataset.get("shuffle_labels") else None
    roar = roar_job.prepare(cfg, datamodule, run_dir, load)  # ROAR: masked by another run's importance (conf/roar/)
    data_metrics, warnings = check_data(datamodule, cfg.dataset.preprocessing.get("max_length"))
    data_metrics.update(roar_job.summary_keys(roar))
    check_positions(cfg, datamodule)
    if shuffled is not None:
        data_metrics["data/shuffled_labels"] = shuffled  # train and dev labels changed by the permutation
    module = build_model(cfg, datamodule)
    reference = saved.reference_option(cfg)
    if reference and not soft_token_attention(module.model):
        raise UserError(
            f"{reference[0]} builds on another run's attention over tokens, which "
            f"{type(module.model).__name__} does not have: use model=flat or model=pair"
        )
    return Assembled(datamodule, module, data_metrics, warnings, attach_reference(cfg, datamodule, run_dir), roar=roar)


def with_analyses(assembled: Assembled, cfg: DictConfig, run_dir: str | Path) -> Assembled:
    """``cfg.analysis`` built, writing into ``run_dir``, and checked against the model and data — before any
    training or testing."""
    assembled.analyses = build_analyses(cfg)
    for analysis in assembled.analyses:
        analysis.out_dir = analysis.out_dir or Path(run_dir)
        analysis.check(assembled.module.model, assembled.datamodule)
    return assembled


def load(run: str | Path, option: str = "ckpt_path", force: bool = False) -> saved.SavedRun:
    """The run at ``run`` (a run directory or its checkpoint) with its data and best model, in eval mode;
    it must be complete (:func:`saved.require_complete`) unless ``force``."""
    run_dir, ckpt = saved.locate(run, option)
    saved.require_complete(run_dir, option, force)
    cfg = saved.run_config(run_dir)
    assembled = data_and_model(cfg, run_dir)
    saved.load_state(assembled.module, ckpt)
    assembled.module.eval().requires_grad_(False)
    return saved.SavedRun(run_dir, cfg, assembled.datamodule, assembled.module)


def attach_reference(cfg: DictConfig, datamodule, run_dir: str | Path) -> dict | None:
    """For a run built on another (:func:`reference_option`): that run, loaded, checked to hold the same
    instances (an error naming both runs otherwise), its attention attached to ``datamodule``'s batches;
    returns its :func:`saved.record` of every split (attention and outputs from one pass)."""
    reference = saved.reference_option(cfg)
    if reference is None:
        return None
    option, value = reference
    if not value:
        raise UserError(f"{option} is not set: give the run directory of the trained model to build on")
    base = load(saved.resolve_run(value, option, run_dir), option=option, force=bool(cfg.get("force")))
    if not soft_token_attention(base.model):
        raise UserError(f"{option}={value}: {type(base.model).__name__} has no soft attention over tokens to reuse")
    saved.check_same_data(base, datamodule, option, this_run=run_dir)
    recorded = saved.record(base.model, base.datamodule, ("train", "dev", "test"))
    datamodule.fix_attention({split: recorder.attention for split, recorder in recorded.items()})
    return recorded
