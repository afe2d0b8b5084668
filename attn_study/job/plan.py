"""A job's plan, made once, and the one way a job stands on another run.

- :func:`check_plan` — everything the config alone tells, before anything is read or written: the recipe, every
  setting's kind and range, the constructors' parameters, what the schema cannot see, the families' own options (their
  callbacks are built here, once). A :class:`Plan` results.
- :func:`build_plan` — the plan's data (read and checked), its model, the runs it stands on and the analyses checked
  against them, before any training. Training (``attempt.py``) and analysing again (``analyze.py``) take the plan,
  never the config again: nothing is checked or built twice.
- :class:`OtherRuns` — a run built on another (``attention.source``, ``training.base``, ``explainer.target``,
  ``roar.source``, a family's base, label run or explained run): resolve, require complete, load, check the same
  data, with one message per failure naming the option. The plan hands it down (to ``roar``, to every family), so no
  shared code reaches up for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from attn_study import layout
from attn_study.config import check_config
from attn_study.errors import UserError
from attn_study.job.checks import check_options, check_pairs, check_recipe

if TYPE_CHECKING:  # the heavy parts (torch, Lightning) are imported once a plan is built, not to check one
    from attn_study.data.datamodule import TextDataModule
    from attn_study.job.saved import SavedRun
    from attn_study.models.module import AttentionModule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OtherRuns:
    """How the job at ``this_run`` stands on other runs: each named by an option (``training.base``,
    ``analysis.sanity.label_run``) whose value is a run directory, a checkpoint in one, or ``sibling:<experiment>``
    (the job of the same sweep with that experiment). ``force``: a run that is not complete is used all the same,
    said in the log."""

    this_run: Path
    force: bool = False

    def directory(self, option: str, value) -> Path:
        """The run ``option=value`` names, required complete (unless ``force``); one line naming ``option`` if not."""
        return self._located(option, value)[0]

    def config(self, option: str, value) -> DictConfig:
        """The recorded config of the run ``option=value`` names (:meth:`directory`)."""
        from attn_study.job import saved

        return saved.run_config(self.directory(option, value))

    def load(self, option: str, value, data: TextDataModule | None = None) -> SavedRun:
        """The run ``option=value`` names (:meth:`directory`) with its data and model (its best checkpoint, or the
        checkpoint ``value`` names), in eval mode; with ``data``, refused unless it holds ``data``'s vocabulary and
        instances in the same order."""
        from attn_study.job import saved

        run_dir, ckpt = self._located(option, value)
        cfg = saved.run_config(run_dir)
        datamodule, module, _ = _data_and_model(cfg, run_dir, OtherRuns(run_dir, self.force))
        saved.load_state(module, ckpt)
        module.eval().requires_grad_(False)
        loaded = saved.SavedRun(run_dir, cfg, datamodule, module)
        if data is not None:
            saved.check_same_data(loaded, data, option, this_run=self.this_run)
        return loaded

    def _located(self, option: str, value) -> tuple[Path, Path]:
        """(run directory, checkpoint) of ``option=value``, the run required complete (unless ``force``)."""
        from attn_study.job import saved

        if not value:
            raise UserError(f"{option} is not set: give the directory of the run it builds on")
        path = saved.resolve_run(str(value), option, self.this_run)
        run_dir = layout.run_of(path) if path.is_file() else path
        saved.require_complete(run_dir, option, self.force)
        return saved.locate(path, option)


def load_run(run: str | Path, option: str = "ckpt_path", force: bool = False) -> SavedRun:
    """The finished run at ``run`` (its directory or a checkpoint in it) with its data and best model, in eval mode:
    :meth:`OtherRuns.load` from nowhere in particular (a sibling cannot be named)."""
    path = Path(run).expanduser().resolve()
    return OtherRuns(path if path.is_dir() else path.parent, force).load(option, str(path))


@dataclass
class Plan:
    """A job: its checked config and built analyses (:func:`check_plan`); once :func:`build_plan` has run, its data,
    model, the runs it stands on and what the data checks found."""

    cfg: DictConfig
    analyses: list = field(default_factory=list)
    datamodule: TextDataModule | None = None
    module: AttentionModule | None = None
    data_metrics: dict = field(default_factory=dict)  # data/… keys of the data and embeddings checks
    warnings: list = field(default_factory=list)  # what those checks flagged
    references: dict | None = None  # split → recorder of the run this one is built on (attention.source, …)
    roar: dict | None = None  # what the data was masked by (attn_study.roar.job.prepare); None: not a ROAR run


def check_plan(cfg: DictConfig) -> Plan:
    """:class:`Plan` of ``cfg``, refused in one line (``UserError``) at the first thing the config alone says is
    wrong; nothing is read or written."""
    check_recipe(cfg, warn=False)
    check_config(cfg)
    check_pairs(cfg)
    from attn_study.job.components import build_analyses, check_components  # the constructors: Lightning, torch

    check_components(cfg)
    check_options(cfg)
    return Plan(cfg, build_analyses(cfg))  # their constructors check the families' options


def build_plan(plan: Plan, run_dir: str | Path, training: bool = True) -> Plan:
    """``plan`` with its data, model and the runs it stands on, and its analyses checked against them (each given
    the plan's :class:`OtherRuns`); with ``training``, also what only training needs: a model with something to
    train, the targets it trains towards (a model-consistent adversary's base outputs, an explainer's black box)
    and the embeddings' coverage. Every refusal is one line, before any training."""
    cfg, run_dir = plan.cfg, Path(run_dir)
    other_runs = OtherRuns(run_dir, force=bool(cfg.get("force")))
    plan.datamodule, plan.module, built = _data_and_model(cfg, run_dir, other_runs)
    plan.data_metrics, plan.warnings, plan.references, plan.roar = built
    if training:
        _training_targets(plan, other_runs)
    for analysis in plan.analyses:
        analysis.out_dir = analysis.out_dir or run_dir
        analysis.other_runs = other_runs
        analysis.check(plan.module.model, plan.datamodule)
    return plan


def _data_and_model(cfg: DictConfig, run_dir: Path, other_runs: OtherRuns):
    """(datamodule, module, (data metrics, warnings, references, roar)): the data set up, masked (``roar``) and
    checked, the model built on it, and the run it is built on attached to its batches (``attention.source``,
    ``training.base``), refused in one line when the model has no attention over tokens to build on."""
    from attn_study.data.checks import check_data
    from attn_study.job import saved
    from attn_study.job.checks import check_positions
    from attn_study.job.components import build_datamodule, build_model
    from attn_study.models.selector import soft_token_attention
    from attn_study.roar import job as roar_job

    datamodule = build_datamodule(cfg)
    datamodule.setup()
    shuffled = datamodule.shuffle_labels(cfg.seed) if cfg.dataset.get("shuffle_labels") else None
    roar = roar_job.prepare(cfg, datamodule, run_dir, other_runs)  # ROAR: masked by another run's importance
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
    references = _attach_reference(reference, datamodule, other_runs)
    return datamodule, module, (data_metrics, warnings, references, roar)


def _attach_reference(reference: tuple[str, str] | None, datamodule, other_runs: OtherRuns) -> dict | None:
    """For a run built on another (``saved.reference_option``): that run, loaded and checked to hold the same
    instances, its attention attached to ``datamodule``'s batches; its :func:`saved.record` of every split (attention
    and outputs from one pass)."""
    from attn_study.job import saved
    from attn_study.models.selector import soft_token_attention

    if reference is None:
        return None
    option, value = reference
    base = other_runs.load(option, value, datamodule)
    if not soft_token_attention(base.model):
        raise UserError(f"{option}={value}: {type(base.model).__name__} has no soft attention over tokens to reuse")
    recorded = saved.record(base.model, base.datamodule, ("train", "dev", "test"))
    datamodule.fix_attention({split: recorder.attention for split, recorder in recorded.items()})
    return recorded


def _training_targets(plan: Plan, other_runs: OtherRuns) -> None:
    """What only training needs of the plan: weights to train, the outputs it trains towards (a model-consistent
    adversary's base run; an explainer's black box, ``explainer.target``), the share of the vocabulary with a
    pretrained vector (a warning below a threshold)."""
    from attn_study.data.checks import check_embeddings
    from attn_study.job import saved

    module, datamodule = plan.module, plan.datamodule
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(
            "every weight of the model is frozen: training would change nothing and the model tested would be "
            "untrained; leave some trainable (model.embeddings.freeze=false)"
        )
    if plan.references is not None and module.objective.trains_towards_base:
        module.use_soft_targets({split: recorder.probabilities() for split, recorder in plan.references.items()})
    metrics, warnings = check_embeddings(module.embedding_coverage)
    plan.data_metrics.update(metrics)
    plan.warnings += warnings
    target = (plan.cfg.get("explainer") or {}).get("target")
    if target:  # an explainer: trained to reproduce a black-box run's predictions
        module.use_soft_targets(saved.predictions(other_runs.load("explainer.target", target, datamodule)))
