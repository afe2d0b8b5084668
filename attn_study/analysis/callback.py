"""The base of every test family: a Lightning callback that analyses the model it is attached to.

- ``on_test_end``: the family's full analysis on ``split`` (the test split by default) of the model
  just tested; per-instance rows, summary and figures go to ``<out_dir>/analysis/<family>/``
  (``folder.py``) and the summary to every logger of the trainer (figures, tables and histograms too when one
  is a ``WandbLogger``: ``logged.py``).
- ``on_validation_epoch_end``, every ``every_n_epochs`` epochs: ``val_tests`` (a subset of the tests)
  on a fixed subsample of ``val_split`` (``val_max_instances`` instances drawn with
  ``subsample_seed``); each statistic is logged as ``val/<key>`` (e.g. ``val/jw/tau_grad/mean``) and
  kept in the callback's state (saved in checkpoints, so a resumed run keeps it), then written as
  ``epochs.csv`` (one row per epoch) and ``epochs.parquet`` (one row per instance and epoch) beside
  the full analysis. The tracking runs in eval mode on a forked RNG: training is the same with it or
  without it.

The base owns the measuring loop (:meth:`AnalysisCallback.measure`); a family writes its hooks, ``summarise`` (the
flat key → value summary) and ``artefacts`` (figures) — see :class:`AnalysisCallback`. The model and data it needs
are described in ``protocol.py``; what else it may need of a model in ``needs.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from attn_study import keys
from attn_study.analysis.batch_size import TokenBudget
from attn_study.analysis.checks import whole
from attn_study.analysis.folder import write_analysis
from attn_study.analysis.logged import log_analysis
from attn_study.analysis.measuring import Measured, Measuring, analysis_mode, instance_work
from attn_study.analysis.needs import Need
from attn_study.analysis.protocol import analysis_data, staged_model
from attn_study.analysis.seeding import SHARED_STREAMS, instance_draws
from attn_study.errors import UserError
from attn_study.progress import Progress, seconds_lines


def _positive_or_none(option: str, value) -> int | None:
    return whole(option, value, 1, optional=True)


class AnalysisCallback(Callback):
    """One test family as a Lightning callback (see the module docstring).

    The base runs every pass over instances (:meth:`measure`, for the full analysis and for tracking alike): the
    batches, a timer and a progress bar per step, the rows. The family fills in the hooks it needs of this loop —
    Quantus's ``evaluate_instance``, per batch and per sub-test::

        run = Measuring(...)                     # model, data, split, tests, rows, tokens, extras, state
        begin(run)                               # once, inside the progress: per-pass state (randomised models, ε)
        for batch in run:                        # the batches on the model's device
            prepared = prepare(run, batch)       # timed as the step PREPARE (when set): predict, encode, score
            for test in run.tests:               # unless the batch lacks a field of BATCH_FIELDS[test]
                measure_<test>(run, batch, prepared)   # timed as the step <test> when step_names() names it
            record(run, batch, prepared)         # the batch's rows (run.record, or the family's own)
        frame = end(run)                         # the per-instance frame (default: run.frame())
        Measured(frame, run.seconds, run.extras, run.tokens)

    - ``measure_<test>``: one per name of ``TESTS`` (checked when the class is defined), found by the test's name.
    - ``step_names(model, tests)``: the timed steps, in the order the summary lists their seconds
      (``<ns>/seconds/<step>``) and the progress shows them; by default ``PREPARE`` then the tests. A hook times finer
      steps itself with ``run.step(name)`` (each importance method; sanity's randomisation); a test not among the
      steps is then not timed as one (sanity's, whose seconds are its methods').
    - ``label(model, tests)``: the progress bar's ``<family>/<label> on <split>`` (default: none).
    - ``NEEDS``: what the family needs of a model beyond the stages (``needs.Need``: attention over tokens, a soft
      attention), refused in one line before anything runs; ``check_model`` refuses what depends on its options.
    - ``STREAMS``: the family's own random streams, name → number: :meth:`draws` gives each instance its draws
      from (``seed``, the instance, the number) (``seeding.py``), so a copied family draws without any shared edit.

    Besides the loop, a family writes ``summarise`` (the flat ``<prefix>/…`` summary) and ``artefacts`` (figures),
    and names its options in its constructor (checked with ``checks.py``).
    """

    name: ClassVar[str] = ""  # the family: config option, folder analysis/<name>/ (its folder under families/)
    TESTS: ClassVar[tuple[str, ...]] = ()  # its sub-tests, each measured by the hook measure_<test>
    DEFAULT_TESTS: ClassVar[tuple[str, ...] | None] = None  # those run when tests is not given (None: all TESTS)
    VAL_TESTS: ClassVar[tuple[str, ...]] = ()  # the default subset tracked during training
    TRACKABLE: ClassVar[tuple[str, ...] | None] = None  # the sub-tests that can be tracked (None: all TESTS)
    PREPARE: ClassVar[str | None] = None  # the step prepare() is timed as (None: it times its own steps, if any)
    BATCH_FIELDS: ClassVar[dict[str, tuple[str, ...]]] = {}  # test → batch fields it reads (else skipped there)
    NEEDS: ClassVar[tuple[Need, ...]] = ()  # what it needs of a model (needs.py)
    STREAMS: ClassVar[dict[str, int]] = {}  # its own random streams: name → number (seeding.py)
    # from the family's own keys.py (beside its callback.py), read when the class is defined:
    NAMESPACE: ClassVar[str] = ""  # its key prefix
    TRACKED: ClassVar[tuple[str, ...]] = ()  # keys drawn against the epoch
    HEADLINE_KEYS: ClassVar[tuple[str, ...]] = ()  # its few statistics a team sorts runs by (W&B's headline/…)
    DISAGREEMENT: ClassVar[tuple[tuple[str, str], ...]] = ()  # (column, "low" | "high"): most disagreeing first
    # batch_size=null: as many instances as fit a token budget, the longest analysed text deciding (its
    # square where the work per instance is T×T); the budget is fixed on a CPU, from free memory on a GPU
    CPU_TOKENS: ClassVar[int] = 32_768
    CPU_MAX_BATCH: ClassVar[int] = 512
    GPU_BYTES_PER_TOKEN: ClassVar[int] = 256 * 1024
    GPU_MAX_BATCH: ClassVar[int] = 8192
    QUADRATIC: ClassVar[bool] = False
    # whether it applies to a pretrained Hugging Face checkpoint (attn-study-analyze hf_model=…): it explains the
    # model's attention without perturbing a pooling attention or its states, which such a model does not have
    PRETRAINED: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        """A family's callback in ``attn_study/families/<name>/callback.py`` is named ``<name>`` and takes its
        ``NAMESPACE``, ``TRACKED``, ``HEADLINE_KEYS`` (else its ``TRACKED``) and ``DISAGREEMENT`` from the sibling
        ``keys.py`` — so a copied family folder is its own family, whatever its callback says (a class may still set
        any of them itself). Every test has its hook ``measure_<test>``, and the family's streams are numbers of
        their own: a ``TypeError`` names what is missing, when the class is defined."""
        super().__init_subclass__(**kwargs)
        missing = [test for test in cls.TESTS if not callable(getattr(cls, f"measure_{test}", None))]
        if missing:
            raise TypeError(f"{cls.__name__}: no hook {', '.join(f'measure_{t}' for t in missing)} for TESTS {missing}")
        numbers = list(cls.STREAMS.values())
        shared = sorted(set(numbers) & set(SHARED_STREAMS.values()))
        if len(set(numbers)) != len(numbers) or shared or not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise TypeError(
                f"{cls.__name__}.STREAMS={cls.STREAMS}: give each stream a number ≥ 0 of its own, none of the shared "
                f"code's {SHARED_STREAMS}"
            )
        parts = cls.__module__.split(".")
        if parts[:2] != ["attn_study", "families"] or len(parts) != 4:
            return
        if "name" not in cls.__dict__:
            cls.name = parts[2]
        own = importlib.import_module(f"{cls.__module__.rpartition('.')[0]}.keys")
        declared = {
            "NAMESPACE": str(own.NAMESPACE),
            "TRACKED": tuple(own.TRACKED),
            "HEADLINE_KEYS": tuple(getattr(own, "HEADLINE_KEYS", own.TRACKED)),
            "DISAGREEMENT": keys.disagreement_of(own, own.__file__),
        }
        for attribute, value in declared.items():
            if attribute not in cls.__dict__:
                setattr(cls, attribute, value)

    def __init__(
        self,
        *,
        split: str = "test",
        max_instances: int | None = None,
        subsample_seed: int = 0,
        seed: int = 0,
        batch_size: int | None = None,
        tests=None,
        every_n_epochs: int | None = None,
        val_tests=None,
        val_split: str = "dev",
        val_max_instances: int | None = 200,
        out_dir: str | Path | None = None,
    ):
        self.split, self.val_split = str(split), str(val_split)
        self.max_instances = _positive_or_none(self._option("max_instances"), max_instances)
        self.val_max_instances = _positive_or_none(self._option("val_max_instances"), val_max_instances)
        self.batch_size = _positive_or_none(self._option("batch_size"), batch_size)
        self._announced: set = set()
        self.every_n_epochs = _positive_or_none(self._option("every_n_epochs"), every_n_epochs)
        self.subsample_seed, self.seed = int(subsample_seed), int(seed)
        default = self.TESTS if self.DEFAULT_TESTS is None else self.DEFAULT_TESTS
        self.tests = self._choose("tests", default if tests is None else tests, self.TESTS)
        if not self.tests:  # a family that tests nothing would write a summary of nothing
            raise UserError(
                f"{self._option('tests')}=[]: choose one or more of {list(self.TESTS)} (analysis=[] runs no family)"
            )
        trackable = self.TESTS if self.TRACKABLE is None else self.TRACKABLE
        self.val_tests = self._choose("val_tests", self.VAL_TESTS if val_tests is None else val_tests, trackable)
        if self.every_n_epochs and not self.val_tests:
            option = f"{self._option('every_n_epochs')}={every_n_epochs}"
            raise UserError(
                f"{option}: nothing to track ({self._option('val_tests')} is empty); choose from {list(trackable)}"
                if trackable
                else f"{option}: {self.name} measures nothing during training; leave it null"
            )
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.other_runs = None  # how the job stands on another run (job.plan.OtherRuns), handed down by its plan
        self.checked = False  # against the model and data (by the plan, before training)
        self.summary: dict = {}
        self.history: list[dict] = []  # per tracked epoch: {"epoch", key: value}
        self.history_rows: list[dict] = []  # per tracked epoch and instance

    @property
    def prefix(self) -> str:
        return self.NAMESPACE

    def _option(self, name: str) -> str:
        return f"analysis.{self.name}.{name}"

    def _choose(self, option: str, chosen, allowed) -> list[str]:
        chosen = [str(t) for t in chosen]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown:
            raise UserError(f"{self._option(option)}: unknown {unknown}; choose from {list(allowed)}")
        return [t for t in allowed if t in chosen]

    # -- what a family implements: the hooks of the measuring loop (class docstring) ---------------

    def step_names(self, model, tests: list[str]) -> list[str]:
        """The timed steps of a pass running ``tests``, in the order their seconds are listed."""
        return ([self.PREPARE] if self.PREPARE else []) + list(tests)

    def label(self, model, tests: list[str]) -> str:
        """What the progress bar names the pass after the family (``<family>/<label>``; empty: the family alone)."""
        return ""

    def begin(self, run: Measuring) -> None:
        """Once per pass, before its first batch: the pass's own state (``run.state``, ``run.extras``)."""

    def prepare(self, run: Measuring, batch: dict):
        """Per batch, before its tests: what they share (the prediction, the methods' scores); the tests get it."""

    def record(self, run: Measuring, batch: dict, prepared) -> None:
        """Per batch, after its tests: its instances' rows (``run.record``), unless the tests filled ``run.rows``."""

    def end(self, run: Measuring):
        """Once, after the last batch: the per-instance frame (``run.frame()``, or the family's reading of it)."""
        return run.frame()

    def check_model(self, model) -> None:
        """Raise a ``UserError`` when the family cannot analyse ``model`` for a reason its options decide (what it
        needs of every model is ``NEEDS``; called before training)."""

    def summarise(self, measured: Measured, tests: list[str]) -> dict:
        """The flat ``<prefix>/…`` summary of the ``tests`` that ``measured`` holds."""
        raise NotImplementedError

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict[str, Path]:
        """Figures and pages written into ``out_dir``: ``{name: path}``."""
        return {}

    def draws(
        self, batch: dict, mask: torch.Tensor, stream: str, leading: tuple[int, ...] = (), **kwargs
    ) -> torch.Tensor:
        """The batch's instances' own random draws from the family's stream ``stream`` (``STREAMS``) and ``seed``:
        ``seeding.instance_draws`` (``normal``, ``dtype`` passed on)."""
        return instance_draws(batch["index"], mask, self.seed, self.STREAMS[stream], leading, **kwargs)

    # -- another run the family builds on (a shuffled-label run, the explained run, a base run) ------

    def other_run_dir(self, option: str, value) -> Path:
        """The run ``analysis.<name>.<option>`` names — its directory, a checkpoint in it, or ``sibling:<experiment>``
        (the job beside this run) — required complete; a one-line error naming the option otherwise. Through
        :attr:`other_runs`, the job's way of standing on another run, which the job hands down."""
        return self._other_runs().directory(self._option(option), value)

    def load_other_run(self, option: str, value, data):
        """:meth:`other_run_dir`, loaded with its best model in eval mode, refused in one line unless it holds
        ``data``'s vocabulary and instances in the same order."""
        return self._other_runs().load(self._option(option), value, data)

    def other_run_config(self, option: str, value):
        """The recorded config of the run :meth:`other_run_dir` names."""
        return self._other_runs().config(self._option(option), value)

    def _other_runs(self):
        if self.other_runs is None:
            raise UserError(
                f"analysis.{self.name} builds on another run, and this callback was given no way to stand on one: "
                "run it through attn-study or attn-study-analyze (or set its other_runs: attn_study.job.plan.OtherRuns)"
            )
        return self.other_runs

    # -- running ---------------------------------------------------------------------------------

    def check(self, model, data=None) -> None:
        """Everything that can be checked before training: what the family needs of the model (``NEEDS``, then
        ``check_model``), and the splits it will read."""
        for need in self.NEEDS:
            refusal = need.refusal(self.name, model)
            if refusal:
                raise UserError(refusal)
        self.check_model(model)
        if data is None:
            return
        splits = [("split", self.split)] + ([("val_split", self.val_split)] if self.every_n_epochs else [])
        for option, split in splits:
            try:
                data.split(split)
            except KeyError:
                known = list(getattr(getattr(data, "data", None), "splits", {}) or ["train", "dev", "test"])
                raise UserError(f"{self._option(option)}={split}: no such split; choose from {known}") from None
        self.checked = True

    @staticmethod
    def instances(data, split: str, max_instances: int | None, seed: int) -> np.ndarray:
        """Indices of ``split`` to analyse: all, or a reproducible sample of ``max_instances``."""
        n = len(data.split(split))
        if max_instances is None or max_instances >= n:
            return np.arange(n)
        return np.sort(np.random.default_rng(seed).choice(n, size=max_instances, replace=False))

    def batch_size_for(self, data, split: str, indices: np.ndarray, device: torch.device) -> int:
        """``batch_size``, or when it is null the device's choice (``batch_size.TokenBudget`` of the class
        attributes), said once."""
        if self.batch_size is not None:
            return self.batch_size
        budget = TokenBudget(
            self.CPU_TOKENS, self.CPU_MAX_BATCH, self.GPU_BYTES_PER_TOKEN, self.GPU_MAX_BATCH, self.QUADRATIC
        )
        lengths = np.asarray(data.split(split).lengths)[np.asarray(indices, dtype=np.int64)]
        size, how = budget.batch_size(lengths, device)
        said = (split, device.type, size)
        if said not in self._announced:
            self._announced.add(said)
            print(
                f"analysis:  {self.name} on {split}: batch_size={size} ({how}; set {self._option('batch_size')} to "
                "choose)",
                flush=True,
            )
        return size

    @contextlib.contextmanager
    def measuring(self, model, data, split: str, indices: np.ndarray, tests: list[str]):
        """One pass over the instances ``indices`` of ``split`` running ``tests`` (a :class:`Measuring`): their
        batches on the model's device — ``batch_size`` of them, or as many as the device's token budget holds —, a
        timer per step (:meth:`step_names`) and the per-instance rows, shown by a ``progress.Progress``
        ``<family>/<label> on <split>`` (bars on a terminal, a line every 30 s in a log)."""
        device = next(model.parameters()).device
        size = self.batch_size_for(data, split, indices, device)
        label = self.label(model, tests)
        desc = f"{self.name}/{label}" if label else self.name
        lengths = torch.as_tensor(data.split(split).lengths[np.asarray(indices, dtype=np.int64)], dtype=torch.float64)
        steps = self.step_names(model, tests)
        with Progress(
            f"{desc} on {split}", len(indices), steps=steps, work=instance_work(lengths, self.QUADRATIC)
        ) as progress:
            yield Measuring(progress, model, data, split, indices, tests, size, self.QUADRATIC)

    def measure(self, model, data, split: str, indices: np.ndarray, tests: list[str]) -> Measured:
        """``tests`` on the instances ``indices`` of ``split``: one pass of the family's hooks (class docstring), each
        batch encoded once and every test reading it — a test's numbers are a function of the instance and the seed
        alone, so the order of tests and batches changes none of them."""
        timed = set(self.step_names(model, tests))
        with self.measuring(model, data, split, indices, tests) as run:
            self.begin(run)
            for batch in run:
                with run.step(self.PREPARE) if self.PREPARE else contextlib.nullcontext():
                    prepared = self.prepare(run, batch)
                for test in run.tests:
                    if all(name in batch for name in self.BATCH_FIELDS.get(test, ())):
                        with run.step(test) if test in timed else contextlib.nullcontext():
                            getattr(self, f"measure_{test}")(run, batch, prepared)
                self.record(run, batch, prepared)
            frame = self.end(run)
        return Measured(frame, run.seconds, run.extras, run.tokens)

    def analyse(self, model, data, out_dir: Path, loggers=(), step: int = 0) -> dict:
        """The full analysis of ``model`` on ``split``: results into ``<out_dir>/analysis/<family>/``
        and to ``loggers`` (as final values of the training's last ``step``); returns (and keeps as
        ``.summary``) the flat summary. Says how long each sub-test took (``progress.seconds_lines``)."""
        self.check(model, data)
        started = time.monotonic()
        with analysis_mode(model):
            indices = self.instances(data, self.split, self.max_instances, self.subsample_seed)
            measured = self.measure(model, data, self.split, indices, self.tests)
        wall = time.monotonic() - started
        for line in seconds_lines(f"{self.name} on {self.split}", len(indices), wall, measured.seconds):
            print(line, flush=True)
        summary = self.summarise(measured, self.tests)
        tokens = measured.tokens.table(measured.frame, data)
        folder, artefacts = write_analysis(
            Path(out_dir),
            self.name,
            measured.frame,
            summary,
            tokens,
            lambda partial: self.artefacts(measured, partial, data),
            self.history,
            self.history_rows,
            self.TRACKED,
            f"{self.name} during training ({self.val_split} subsample)",
        )
        self.summary = summary
        log_analysis(
            loggers,
            self.prefix,
            summary,
            measured.frame,
            artefacts,
            data,
            self.split,
            step,
            tokens,
            self.DISAGREEMENT,
            self.HEADLINE_KEYS,
        )
        print(f"analysis:  {folder}", flush=True)
        return summary

    def track(self, model, data, epoch: int) -> dict:
        """``val_tests`` on the fixed dev subsample; returns the ``val/…`` values and keeps them."""
        with analysis_mode(model):
            indices = self.instances(data, self.val_split, self.val_max_instances, self.subsample_seed)
            measured = self.measure(model, data, self.val_split, indices, self.val_tests)
        stats = self.summarise(measured, self.val_tests)
        self.history.append({"epoch": epoch, **{k: float(v) for k, v in stats.items()}})
        rows = measured.frame.assign(epoch=epoch)
        self.history_rows += rows.to_dict("records")
        return {keys.during_training(k): float(v) for k, v in stats.items()}

    # -- Lightning hooks -------------------------------------------------------------------------

    def setup(self, trainer, pl_module, stage: str) -> None:
        """A callback the job's plan has not checked (one attached to a trainer by hand) is checked here."""
        if not self.checked:
            self.check(staged_model(pl_module), analysis_data(trainer, self.name))

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if not self.every_n_epochs or trainer.sanity_checking or (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        values = self.track(staged_model(pl_module), analysis_data(trainer, self.name), trainer.current_epoch)
        pl_module.log_dict(values, on_step=False, on_epoch=True)

    def on_test_end(self, trainer, pl_module) -> None:
        out_dir = self.out_dir or Path(trainer.default_root_dir)
        data = analysis_data(trainer, self.name)
        self.analyse(staged_model(pl_module), data, out_dir, trainer.loggers, step=trainer.global_step)

    def state_dict(self) -> dict:
        return {"history": self.history, "history_rows": self.history_rows}

    def load_state_dict(self, state_dict: dict) -> None:
        """Add the tracked epochs of a checkpoint to those already here: a resumed run gets its
        earlier epochs back, and testing the best (earlier) checkpoint after training loses none."""
        known = {h["epoch"] for h in self.history}
        self.history = sorted(
            self.history + [h for h in state_dict.get("history", []) if h["epoch"] not in known],
            key=lambda h: h["epoch"],
        )
        self.history_rows = sorted(
            self.history_rows + [r for r in state_dict.get("history_rows", []) if r["epoch"] not in known],
            key=lambda r: r["epoch"],
        )
