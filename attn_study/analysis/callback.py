"""The base of every test family: a Lightning callback that analyses the model it is attached to.

- ``on_test_end``: the family's full analysis on ``split`` (the test split by default) of the model
  just tested; per-instance rows, summary and figures go to ``<out_dir>/analysis/<family>/``
  (written into a hidden partial folder, renamed into place when complete) and the summary to every
  logger of the trainer (figures, tables and histograms too when one is a ``WandbLogger``).
- ``on_validation_epoch_end``, every ``every_n_epochs`` epochs: ``val_tests`` (a subset of the tests)
  on a fixed subsample of ``val_split`` (``val_max_instances`` instances drawn with
  ``subsample_seed``); each statistic is logged as ``val/<key>`` (e.g. ``val/jw/tau_grad/mean``) and
  kept in the callback's state (saved in checkpoints, so a resumed run keeps it), then written as
  ``epochs.csv`` (one row per epoch) and ``epochs.parquet`` (one row per instance and epoch) beside
  the full analysis. The tracking runs in eval mode on a forked RNG: training is the same with it or
  without it.

A family implements ``measure`` (per-instance rows: a loop over :meth:`AnalysisCallback.measuring`'s batches,
each method or sub-test a timed step), ``summarise`` (the flat key → value summary) and ``artefacts`` (figures);
see ``families/jain_wallace/callback.py``. The model and data it needs are described in ``protocol.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import WandbLogger

from attn_study import keys, layout, ranges
from attn_study.analysis.protocol import analysis_data, staged_model
from attn_study.analysis.token_scores import TokenScores, coloured_cells
from attn_study.errors import UserError
from attn_study.figures.training import epochs_figure
from attn_study.io import publish_mode, write_csv_atomic, write_json_atomic, write_parquet_atomic
from attn_study.layout import EPOCHS_CSV, EPOCHS_FIGURE, EPOCHS_PARQUET, INSTANCES, SUMMARY, TOKENS
from attn_study.progress import Progress, seconds_lines
from attn_study.tracking import final_values, histogram, logger_name, reported

log = logging.getLogger(__name__)


@dataclass
class Measured:
    """What ``measure`` returns: one row per instance, seconds per sub-test, family extras (e.g. the adversarial
    attentions shown in heatmaps), and each instance's text with the per-token importances the family computed
    (written as ``tokens.parquet``: ``token_scores.py``)."""

    frame: pd.DataFrame
    seconds: dict
    extras: dict = field(default_factory=dict)
    tokens: TokenScores = field(default_factory=TokenScores)


def instance_work(lengths: torch.Tensor, quadratic: bool) -> float:
    """What the time left is counted in: Σ T over the instances' lengths T, or Σ T² for a family whose work per
    instance is T × T (``QUADRATIC``)."""
    return float((lengths**2 if quadratic else lengths).sum())


class Measuring:
    """What a family's ``measure`` loops over (``AnalysisCallback.measuring``): iterating gives the batches on the
    device; ``step(name)`` times a method or sub-test (``seconds``: per step, in the order the family named them);
    ``record`` keeps each instance's row (:func:`record_rows`) and ``frame()`` gives the rows in ``indices``'s
    order."""

    def __init__(
        self, progress: Progress, data, split: str, indices: np.ndarray, batch_size: int, device, quadratic: bool
    ):
        self.progress, self.indices, self.quadratic = progress, indices, quadratic
        self.split_data = data.split(split)
        self.rows: dict[int, dict] = {}
        self._batches = lambda: data.loader(split, batch_size=batch_size, indices=indices)
        self._device = device

    def __iter__(self):
        for batch in self._batches():
            self.progress.begin_batch(len(batch["index"]))
            yield {k: v.to(self._device) for k, v in batch.items()}
            self.progress.update(len(batch["index"]), work=instance_work(batch["lengths"].double(), self.quadratic))

    def step(self, name: str):
        """Time the block as step ``name`` (``progress.Progress.step``)."""
        return self.progress.step(name)

    @property
    def seconds(self) -> dict:
        return dict(self.progress.seconds)

    def record(self, batch: dict, probs, columns: dict) -> None:
        record_rows(self.rows, self.split_data, batch, probs, columns)

    def named_rows(self) -> dict[int, dict]:
        """``rows``, each instance's begun with :func:`instance_row`: for a family that fills them column by column."""
        self.rows.update({int(i): instance_row(self.split_data, i) for i in self.indices})
        return self.rows

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([self.rows[int(i)] for i in self.indices])


@contextlib.contextmanager
def analysis_mode(model):
    """Eval mode, no parameter gradients (gradients w.r.t. inputs only), autograd on — also inside
    Lightning's inference mode — and the global RNG state restored afterwards."""
    was_training = model.training
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    device = params[0].device if params else torch.device("cpu")
    devices = [device] if device.type == "cuda" else []
    with torch.inference_mode(False), torch.random.fork_rng(devices=devices):
        model.eval()
        for p in params:
            p.requires_grad_(False)
        try:
            yield model
        finally:
            for p, flag in zip(params, flags):
                p.requires_grad_(flag)
            model.train(was_training)


def instance_row(split_data, i: int) -> dict:
    """The columns that name instance ``i`` of a split in every family's per-instance frame: its position
    (``index``), ``uid`` and gold ``label``."""
    i = int(i)
    return {"index": i, "uid": split_data.uids[i], "label": int(split_data.labels[i])}


#: per-instance columns that are counts: written as integers
INTEGER_COLUMNS = ("length", "rationale_size", "support")


def record_rows(rows: dict, split_data, batch: dict, probs, columns: dict) -> None:
    """``rows[i]`` for each instance ``i`` of ``batch``: :func:`instance_row`, the prediction, its probability
    and every per-instance column of ``columns`` (name → (B,) tensor), counts as integers."""
    values = {name: column.detach().double().cpu().tolist() for name, column in columns.items()}
    pred, conf = probs.argmax(-1).tolist(), probs.max(-1).values.tolist()
    for r, i in enumerate(batch["index"].tolist()):
        rows[i] = {
            **instance_row(split_data, i),
            "prediction": pred[r],
            "probability": conf[r],
            **{name: v[r] for name, v in values.items()},
        }
        for name in INTEGER_COLUMNS:
            if name in values:
                rows[i][name] = int(rows[i][name])


def checked(option: str, value, allowed) -> None:
    """A one-line ``UserError`` naming ``option`` when ``value`` is outside ``allowed`` (an ``attn_study.ranges``
    range): a family's options are refused as every other numeric option of the config is, in the same words."""
    ranges.require(option, value, UserError, allowed)


def whole(option: str, value, low: int = 1, optional: bool = False) -> int | None:
    """``value``, a whole number ≥ ``low`` (null allowed when ``optional``): ``abc``, ``1.5`` and ``2.0`` are
    refused, never read as something else."""
    checked(option, value, ranges.whole(low, optional=optional))
    return None if value is None else int(value)


def finite(option: str, value, low: float = 0.0) -> float:
    """``value``, a finite number ≥ ``low`` — a learning rate, a penalty's weight, a scale: NaN, an infinity and a
    word are refused."""
    checked(option, value, ranges.number(low))
    return float(value)


def probability(option: str, value) -> float:
    """``value`` in (0, 1) — a significance level, a threshold."""
    checked(option, value, ranges.number(0, 1, above=True, below=True))
    return float(value)


def _positive_or_none(option: str, value) -> int | None:
    return whole(option, value, 1, optional=True)


class AnalysisCallback(Callback):
    """One test family as a Lightning callback (see the module docstring)."""

    name: ClassVar[str] = ""  # the family: config option, folder analysis/<name>/ (its folder under families/)
    TESTS: ClassVar[tuple[str, ...]] = ()  # its sub-tests
    DEFAULT_TESTS: ClassVar[tuple[str, ...] | None] = None  # those run when tests is not given (None: all TESTS)
    VAL_TESTS: ClassVar[tuple[str, ...]] = ()  # the default subset tracked during training
    TRACKABLE: ClassVar[tuple[str, ...] | None] = None  # the sub-tests that can be tracked (None: all TESTS)
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
        any of them itself)."""
        super().__init_subclass__(**kwargs)
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
        self.other_runs = None  # how the job stands on another run (assemble.OtherRuns), handed down by its plan
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

    # -- what a family implements ----------------------------------------------------------------

    def check_model(self, model) -> None:
        """Raise a ``UserError`` when the family cannot analyse ``model`` (called before training)."""

    def measure(self, model, data, split: str, indices: np.ndarray, tests: list[str]) -> Measured:
        raise NotImplementedError

    def summarise(self, measured: Measured, tests: list[str]) -> dict:
        """The flat ``<prefix>/…`` summary of the ``tests`` that ``measured`` holds."""
        raise NotImplementedError

    def artefacts(self, measured: Measured, out_dir: Path, data) -> dict[str, Path]:
        """Figures and pages written into ``out_dir``: ``{name: path}``."""
        return {}

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
                "run it through attn-study or attn-study-analyze (or set its other_runs: attn_study.assemble.OtherRuns)"
            )
        return self.other_runs

    # -- running ---------------------------------------------------------------------------------

    def check(self, model, data=None) -> None:
        """Everything that can be checked before training: the model, and the splits it will read."""
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
        """``batch_size``, or when it is null the device's choice (see the class attributes), said once."""
        if self.batch_size is not None:
            return self.batch_size
        lengths = np.asarray(data.split(split).lengths)[np.asarray(indices, dtype=np.int64)]
        longest = max(int(lengths.max()) if len(lengths) else 1, 1)
        if device.type == "cuda":
            free = torch.cuda.mem_get_info(device)[0]
            tokens, cap = free // 2 // self.GPU_BYTES_PER_TOKEN, self.GPU_MAX_BATCH
            where = f"half of {free / 2**30:.0f} GiB free"
        else:
            tokens, cap, where = self.CPU_TOKENS, self.CPU_MAX_BATCH, "CPU"
        size = max(1, min(cap, int(tokens // (longest * longest if self.QUADRATIC else longest))))
        said = (split, device.type, size)
        if said not in self._announced:
            self._announced.add(said)
            print(
                f"analysis:  {self.name} on {split}: batch_size={size} (auto: {where}, {tokens} tokens, longest "
                f"text {longest}{'²' if self.QUADRATIC else ''}; set {self._option('batch_size')} to choose)",
                flush=True,
            )
        return size

    @contextlib.contextmanager
    def measuring(self, model, data, split: str, indices: np.ndarray, steps, label: str = ""):
        """One pass over the instances ``indices`` of ``split`` (a :class:`Measuring`): their batches on the model's
        device — ``batch_size`` of them, or as many as the device's token budget holds —, a timer per step
        (``steps``, the family's methods and sub-tests) and the per-instance rows, shown by a
        ``progress.Progress`` ``<family>/<label> on <split>`` (bars on a terminal, a line every 30 s in a log)."""
        device = next(model.parameters()).device
        size = self.batch_size_for(data, split, indices, device)
        desc = f"{self.name}/{label}" if label else self.name
        lengths = torch.as_tensor(data.split(split).lengths[np.asarray(indices, dtype=np.int64)], dtype=torch.float64)
        with Progress(
            f"{desc} on {split}", len(indices), steps=steps, work=instance_work(lengths, self.QUADRATIC)
        ) as progress:
            yield Measuring(progress, data, split, indices, size, device, self.QUADRATIC)

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
        folder, artefacts = self._write(Path(out_dir), measured, summary, data, tokens)
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

    def _write(self, out_dir: Path, measured: Measured, summary: dict, data, tokens=None) -> tuple[Path, dict]:
        root = out_dir / layout.ANALYSIS
        final, partial = root / self.name, root / f".{self.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        publish_mode(partial)
        write_parquet_atomic(measured.frame, partial / INSTANCES)
        if tokens is not None:
            write_parquet_atomic(tokens, partial / TOKENS)
        write_json_atomic(partial / SUMMARY, summary)
        artefacts = self.artefacts(measured, partial, data)
        if self.history:
            epochs = pd.DataFrame(self.history)
            write_csv_atomic(epochs, partial / EPOCHS_CSV)
            write_parquet_atomic(pd.DataFrame(self.history_rows), partial / EPOCHS_PARQUET)
            figure = epochs_figure(
                epochs,
                self.TRACKED,
                partial / EPOCHS_FIGURE,
                title=f"{self.name} during training ({self.val_split} subsample)",
            )
            if figure is not None:
                artefacts["epochs"] = figure
        else:  # analysed again after training: keep what was tracked while it trained
            for name in (EPOCHS_CSV, EPOCHS_PARQUET, EPOCHS_FIGURE):
                if (final / name).is_file():
                    shutil.copy2(final / name, partial / name)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
        return final, {name: final / Path(path).name for name, path in artefacts.items()}

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


def log_analysis(
    loggers,
    prefix: str,
    summary: dict,
    frame: pd.DataFrame,
    artefacts: dict,
    data=None,
    split: str = "test",
    step=0,
    tokens: pd.DataFrame | None = None,
    disagreement: tuple[tuple[str, str], ...] = (),
    headline_keys: tuple[str, ...] = (),
) -> None:
    """The summary to every logger as final values (``tracking.final_values``: W&B's run summary, another
    logger's history at ``step``); to W&B also the figures and the per-instance table (:func:`readable`; with
    ``tokens``, the family's ``tokens.parquet`` table, an ``explanations`` column of coloured text for a bounded
    number of instances: ``token_scores.coloured_cells``) in the history's last row (the last epoch's; every
    family's in the same row), and histograms of the table's numeric columns in the run summary. Called once the
    results are on disk: a logger's failure is one error line (``tracking.reported``), never the analysis's."""
    for lg in loggers:
        with reported(logger_name(lg), f"{prefix}/ results"):
            final_values(lg, summary, step, headline_keys)
            if isinstance(lg, WandbLogger):
                import wandb

                payload = {
                    f"{prefix}/figures/{name}": wandb.Image(str(path))
                    for name, path in artefacts.items()
                    if Path(path).suffix == ".png"
                }
                table = readable(frame, data, split)
                if tokens is not None:
                    cells = coloured_cells(frame, tokens, disagreement)
                    table["explanations"] = [None if c is None else wandb.Html(c, inject=False) for c in cells]
                payload[f"{prefix}/instances"] = wandb.Table(dataframe=table)
                for name, path in artefacts.items():
                    if Path(path).suffix == ".html":
                        payload[f"{prefix}/{name}"] = wandb.Html(Path(path).read_text())
                histograms = {}
                for column in frame.select_dtypes("number").columns:
                    values = frame[column].to_numpy(dtype=float)
                    values = values[np.isfinite(values)]
                    if len(values) and column not in ("index", "label", "prediction"):
                        histograms[f"{prefix}/hist/{column}"] = histogram(values)
                lg.experiment.log(payload, commit=False)  # every family's media in the run's last history row
                lg.experiment.summary.update(histograms)


def readable(frame: pd.DataFrame, data=None, split: str = "test") -> pd.DataFrame:
    """The per-instance table as a person reads it: ``label`` and ``prediction`` as class names (where the data
    has them), and each instance's ``text`` (its tokens; a pair task's ``query`` too) after its id."""
    table = frame.copy()
    names = list(getattr(getattr(data, "data", None), "label_names", None) or [])

    def name(value) -> str:
        try:
            k = int(value)
        except (TypeError, ValueError):
            return str(value)
        return names[k] if 0 <= k < len(names) else str(value)

    for column in ("label", "prediction"):
        if names and column in table:
            table[column] = [name(v) for v in table[column]]
    vocab = getattr(data, "vocab", None) if data is not None else None
    if vocab is None or "index" not in table or not len(table):
        return table
    rows = data.split(split)
    at = list(table.columns).index("uid") + 1 if "uid" in table else 1
    indices = table["index"].to_numpy(int)
    table.insert(at, "text", [" ".join(vocab.decode(rows.ids[i])) for i in indices])
    if getattr(rows, "query_ids", None) is not None:
        table.insert(at + 1, "query", [" ".join(vocab.decode(rows.query_ids[i])) for i in indices])
    return table
