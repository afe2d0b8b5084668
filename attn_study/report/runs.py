"""Find the runs under a directory (one run, a sweep, or all of ``outputs/``) and what became of them.

A run is a directory with ``.hydra/config.yaml``. Its state comes from ``status.json``
(``attn_study.job.state``); only ``complete`` runs enter the tables. Jobs named in a
``sweep.json`` that have no run directory, or whose run never finished, are listed as missing.

A run is read here once, and whatever the report reads of it later is checked here (:func:`unreadable_file`): a
file that is not what attn_study writes — ``.hydra/config.yaml`` that is not YAML, a ``summary.json`` that is not
JSON, a family's ``instances.parquet`` or ``tokens.parquet`` that is not Parquet (truncated, another format) or lacks
the columns its readers need, an ``epochs.csv`` that is not CSV — makes the run ``unreadable``: listed with the file
and what is wrong, and left out; an unreadable ``sweep.json`` is listed likewise; the rest is reported.

A run may also be a trial (:func:`trial_reason`: a debug run, cut to a few batches, or one on synthetic data):
beside real runs, a report leaves it out of its tables (:func:`real_runs`) unless asked to keep it.

Runs are told apart by their config identity (what ``status.json`` records: the resolved config less
the settings that do not change results), not by dataset / model / encoder / attention / projection /
seed alone: only a run with the *same* identity replaces an older one. A run is labelled (``Run.variant``)
by what makes its model differ from the others of its dataset / model / encoder / attention / projection,
short: sparsegen's λ, the training variant (with its λ where it has one), and any other model setting where it
departs from the most common value (``lr=0.01``). The analyses' own options (``analysis.*``) describe the tests,
not the model, and never label a row; a family's report reads any recorded setting with :meth:`Run.option`.

Every run carries the code that made it (``status.json``'s ``code``: package version, git commit, uncommitted
changes): :func:`code_label` names it, :func:`code_note` says when the runs of a table come from more than one,
and :func:`latest_per_model` says which of two runs of one config it keeps, and why.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from omegaconf import DictConfig, OmegaConf

from attn_study import families, layout, tracking
from attn_study.config import family_names
from attn_study.errors import UserError
from attn_study.io import read_json
from attn_study.job import state
from attn_study.sweep.record import RECORD

SKIP_DIRS = layout.NOT_RUNS
# what identifies a model in the tables
MODEL_KEYS = ("dataset", "model", "encoder", "attention", "projection", "seed")


@dataclass
class Run:
    path: Path
    state: str  # complete / failed / running (unfinished) / none (never started)
    error: str = ""
    finished: float = 0.0
    config: dict = field(default_factory=dict)  # MODEL_KEYS + analysis + variant (+ variant_parts)
    labels: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)  # null (undefined) values read as NaN
    identity: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # the recorded config, flat (``encoder/hidden_size``)
    code: dict = field(default_factory=dict)  # status.json's code: version, commit, dirty (empty: not recorded)
    numerics: dict = field(default_factory=dict)  # status.json's numerics: torch, cpu_capability (empty: not recorded)
    started: float = 0.0  # when its last attempt started
    attempts: int = 1

    def option(self, key: str, default=None):
        """A setting of the run's recorded config (``encoder.self_attention``); ``default`` where it has
        none (a run made before the option existed) or it is null."""
        value = self.settings.get(key.replace(".", "/"))
        return default if value is None else value

    def label(self, k: int) -> str:
        return str(self.labels[k]) if 0 <= k < len(self.labels) else f"class {k}"

    def instances(self, family: str) -> pd.DataFrame | None:
        path = self.path / layout.ANALYSIS / family / layout.INSTANCES
        return pd.read_parquet(path) if path.is_file() else None

    def variant_except(self, *parts: str) -> str:
        """The run's label (``config['variant']``) without ``parts`` ("lam", "training": what a table shows in
        a column of its own)."""
        kept = {k: v for k, v in self.config.get("variant_parts", {}).items() if k not in parts}
        return ", ".join(kept.values()) if "variant_parts" in self.config else self.config.get("variant", "")

    @property
    def model_label(self) -> str:
        """``<encoder> + <attention> (<projection>) [<variant>]``: a model as a family's table names it."""
        c = self.config
        variant = f" [{c['variant']}]" if c.get("variant") else ""
        return f"{c['encoder']} + {c['attention']} ({c['projection']}){variant}"

    @property
    def name(self) -> str:
        c = self.config
        projection = c["projection"] + (f"(λ={c['lam']})" if c.get("lam") is not None else "")
        variant = self.variant_except("lam", "model_seed")  # both are in the name already
        variant = f" [{variant}]" if variant else ""
        seed = f"s{c['seed']}" + (f" model seed {c['model_seed']}" if c.get("model_seed") is not None else "")
        return f"{c['dataset']} {c['model']}-{c['encoder']}-{c['attention']}-{projection} {seed}{variant}"


@dataclass(frozen=True)
class CrossRunMeasure:
    """A number a paper computes over several runs, as a family's report exports it (its
    ``cross_run_measures()``: name → measure) for the scorecard to compare with the paper's:

    - ``points(runs)``: the runs that are its points (e.g. every λ of a sparsegen grid);
    - ``per_seed(points)``: one value per seed of those runs (the scorecard's mean ± seed std);
    - ``spans``: the setting keys (dataset, model, encoder, attention, projection) its points vary over, which a
      paper's row leaves to it."""

    description: str
    points: Callable[[list[Run]], list[Run]]
    per_seed: Callable[[list[Run]], list[float]]
    spans: tuple[str, ...] = ()


def _identity(cfg, status: dict) -> dict:
    """The run's config identity: recorded in its status, else computed from its config."""
    if status.get("identity"):
        return status["identity"]
    try:
        return state.identity(cfg)
    except Exception:  # a config that no longer resolves (an env var gone): its literal values
        container = OmegaConf.to_container(cfg, resolve=False)
        return tracking.flatten({k: v for k, v in container.items() if k not in state.NOT_RESULTS})


def _settings(cfg) -> dict:
    """The run's recorded config, flat, resolved where it still resolves (else its literal values)."""
    try:
        return tracking.flatten(OmegaConf.to_container(cfg, resolve=True))
    except Exception:
        return tracking.flatten(OmegaConf.to_container(cfg, resolve=False))


def _labels(cfg, status: dict) -> list:
    """The dataset's class names as the run recorded them (``status.json``'s ``labels``, else a recorded
    ``data.labels``); empty when it did not (the tables then say ``class k``)."""
    if status.get("labels"):
        return list(status["labels"])
    recorded = OmegaConf.select(cfg, "data.labels", default=None, throw_on_resolution_failure=False)
    return [str(v) for v in recorded] if recorded else []


def _config(cfg) -> dict:

    def pick(key):
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        return "?" if value is None else value

    out = {k: str(pick(f"{k}.name")) for k in ("dataset", "model", "encoder", "attention", "projection")}
    analysis = OmegaConf.select(cfg, "analysis", default=None) or {}
    # runs made before the analyses became a list hold one family's options, named by `name`
    out["analysis"] = str(analysis["name"]) if "name" in analysis else family_names(analysis)
    out["seed"] = pick("seed")
    out["lam"] = OmegaConf.select(cfg, "projection.lam", default=None, throw_on_resolution_failure=False)
    schedule = OmegaConf.select(cfg, "training.schedule", default="standard", throw_on_resolution_failure=False)
    weighted = OmegaConf.select(cfg, "training.instance_weighting", default=False, throw_on_resolution_failure=False)
    options = [] if schedule == "standard" else [str(schedule)]
    lam = OmegaConf.select(cfg, "training.lam", default=None, throw_on_resolution_failure=False)
    if options and lam is not None:  # a training variant with a λ of its own (conf/training/)
        options = [f"{schedule} λ={lam}"]
    options += ["instance_weighting"] if weighted else []
    tying = OmegaConf.select(cfg, "training.word_tying.weight", default=0, throw_on_resolution_failure=False)
    if tying:  # Tutek & Šnajder's word-level objective, on top of any schedule
        kind = OmegaConf.select(cfg, "training.word_tying.kind", default="predict", throw_on_resolution_failure=False)
        options.append(f"word tying ({kind}) λ={float(tying):g}")
    out["training"] = "+".join(options) or "standard"  # the training variant (conf/training)
    out["attention_source"] = OmegaConf.select(cfg, "attention.source", default=None, throw_on_resolution_failure=False)
    out["model_seed"] = OmegaConf.select(cfg, "model_seed", default=None, throw_on_resolution_failure=False)
    out["activation"] = OmegaConf.select(cfg, "encoder.activation", default=None, throw_on_resolution_failure=False)
    out["recipe"] = OmegaConf.select(cfg, "recipe.name", default=None, throw_on_resolution_failure=False)
    embeddings = OmegaConf.select(cfg, "model.embeddings.path", default=None, throw_on_resolution_failure=False)
    out["embeddings"] = Path(str(embeddings)).name if embeddings else "random"
    # a recipe's row of the paper's own accuracy for this model (recipe=serrano_smith), in percent
    out["paper_accuracy"] = OmegaConf.select(
        cfg, "recipe.row.paper_accuracy", default=None, throw_on_resolution_failure=False
    )
    out["sweep"] = OmegaConf.select(cfg, "sweep.name", default=None, throw_on_resolution_failure=False)
    # what builds a run on other data or another run (the scorecard's "not comparable")
    out["shuffle_labels"] = bool(
        OmegaConf.select(cfg, "dataset.shuffle_labels", default=False, throw_on_resolution_failure=False)
    )
    out["markers"] = OmegaConf.select(cfg, "dataset.inject.count", default=0, throw_on_resolution_failure=False) or 0
    out["explainer"] = OmegaConf.select(cfg, "explainer.target", default=None, throw_on_resolution_failure=False)
    roar = OmegaConf.select(cfg, "roar", default=None, throw_on_resolution_failure=False)
    if roar:  # data masked by another run's importance (conf/roar/): ROAR's method and k name the row
        out["roar"] = f"{roar.get('name')} {roar.get('method')} k={roar.get('fraction')}"
    return out


def _overrides(run_dir: Path) -> list[str]:
    """The run's command-line overrides (a sweep job's include its grid's), as Hydra recorded them; none when
    the record is missing or unreadable."""
    try:
        recorded = OmegaConf.load(layout.overrides_file(run_dir))
    except (OSError, ValueError, yaml.YAMLError):
        return []
    return [str(o) for o in recorded] if OmegaConf.is_list(recorded) else []


def _run_dirs(root: Path):
    if (root / layout.RECORD / layout.CONFIG).is_file():
        yield root
        return
    for child in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in SKIP_DIRS):
        yield from _run_dirs(child)


def collect(root: Path) -> tuple[list[Run], list[dict]]:
    """(every run found under ``root``, the sweep jobs with no run directory); a run whose files the report cannot
    read is ``unreadable``, its ``error`` naming the file and what is wrong (the module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"attn-study-report: {root} is not a directory; give a run, sweep or outputs directory")
    runs = [_read_run(run_dir) for run_dir in _run_dirs(root)]
    label_variants([r for r in runs if r.state == "complete"])
    missing = []
    for record_path in sorted(root.rglob(RECORD)):
        sweep_dir = record_path.parent
        try:
            jobs = read_json(record_path).get("jobs", {})
        except (OSError, ValueError) as err:
            missing.append(
                {
                    "sweep": str(sweep_dir),
                    "job": RECORD,
                    "state": "unreadable",
                    "overrides": f"{record_path} is unreadable ({type(err).__name__}); its jobs are not listed",
                }
            )
            continue
        for name, overrides in jobs.items():
            if not (sweep_dir / name / layout.RECORD / layout.CONFIG).is_file():
                missing.append({"sweep": str(sweep_dir), "job": name, "overrides": " ".join(overrides)})
    return runs, missing


#: the state of a run whose files the report cannot read
UNREADABLE = "unreadable"


def _read_run(run_dir: Path) -> Run:
    """One run directory as the report reads it; ``unreadable`` (with the file and what is wrong) when its config,
    status, summary or any file of its analyses that the report reads is not what attn_study writes."""
    status = state.read_status(run_dir)
    try:
        cfg = _load_config(run_dir)
    except ValueError as err:
        unknown = {k: "?" for k in (*MODEL_KEYS, "analysis")} | {"overrides": []}
        return Run(path=run_dir, state=UNREADABLE, error=str(err), config=unknown)
    complete = state.is_complete(run_dir, status)
    run = Run(
        path=run_dir,
        state="complete" if complete else status.get("state", "none"),
        error=status.get("error", ""),
        finished=status.get("finished", 0.0),
        config={**_config(cfg), "overrides": _overrides(run_dir)},
        labels=_labels(cfg, status),
        identity=_identity(cfg, status),
        settings=_settings(cfg),
        code=status.get("code") if isinstance(status.get("code"), dict) else {},
        numerics=status.get("numerics") if isinstance(status.get("numerics"), dict) else {},
        started=status.get("started", 0.0),
        attempts=int(status.get("attempt", 1) or 1),
    )
    if run.state == "running":
        run.error = "no final state: killed, lost or still running"
    if run.state == UNREADABLE:
        run.error = f"{run_dir / layout.STATUS} is unreadable"
    if complete:
        try:
            run.summary = _numbers(read_json(run_dir / layout.SUMMARY))
        except (OSError, ValueError) as err:
            run.state, run.error = UNREADABLE, f"{run_dir / layout.SUMMARY} is unreadable ({type(err).__name__})"
            return run
        problem = unreadable_file(run_dir)
        if problem:
            run.state, run.error = UNREADABLE, problem
    return run


def _load_config(run_dir: Path) -> DictConfig:
    """The run's recorded config; ValueError naming the file and what is wrong when it is not a YAML mapping."""
    path = layout.config_file(run_dir)
    try:
        cfg = OmegaConf.load(path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path} is unreadable (not YAML: {getattr(err, 'problem', None) or err}{where})") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is unreadable ({type(err).__name__}: {_first_line(err)})") from None
    if not isinstance(cfg, DictConfig):
        raise ValueError(f"{path} is unreadable (a YAML list, not a config's settings)")
    return cfg


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


#: what the report's readers need of each file of a family's folder: column → kind (:data:`_KINDS`); ``*``: every
#: other column; a column not listed and no ``*``: anything. ``uid`` may be absent from ``instances.parquet`` (runs
#: made before uids were recorded: the explorer names their rows by position)
_REQUIRED = {layout.TOKENS: ("uid", "tokens")}
_COLUMNS = {
    layout.INSTANCES: {"uid": "text", "index": "integer", "label": "integer", "prediction": "integer"},
    layout.TOKENS: {"uid": "text", "tokens": "texts", "query": "texts", "*": "numbers"},
}


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind)


def _is_scores(kind: pa.DataType) -> bool:
    """A method's scores: a list of numbers per instance (None where not computed: a column of nulls, or of lists
    of nulls, for a method computed for no instance)."""
    if pa.types.is_null(kind):
        return True
    return _is_list(kind) and any(
        test(kind.value_type) for test in (pa.types.is_floating, pa.types.is_integer, pa.types.is_null)
    )


#: a kind of column → (its test on the Parquet type, how a message names it)
_KINDS = {
    "text": (_is_text, "text"),
    "integer": (pa.types.is_integer, "integers"),
    "texts": (lambda kind: _is_list(kind) and _is_text(kind.value_type), "lists of text (a token each)"),
    "numbers": (_is_scores, "lists of numbers (a score per token)"),
}


def unreadable_file(run_dir: Path) -> str | None:
    """The first file of a complete run's analyses that the report reads but could not (each family's
    ``instances.parquet`` and ``tokens.parquet``: a Parquet file with the columns :data:`_COLUMNS` names, of their
    kinds; ``epochs.csv``: a CSV file with an ``epoch`` column), as ``<file> is unreadable (<what is wrong>)``; None
    when every one reads. Only a Parquet file's schema is read (its footer), not its rows."""
    for family in families.REGISTRY:
        folder = layout.family_dir(run_dir, family)
        for name, columns in _COLUMNS.items():
            path = folder / name
            if path.is_file():
                problem = _parquet_problem(path, _REQUIRED.get(name, ()), columns)
                if problem:
                    return f"{path} is unreadable ({problem})"
        epochs = folder / layout.EPOCHS_CSV
        if epochs.is_file():
            try:
                header = pd.read_csv(epochs, nrows=0).columns
            except (OSError, ValueError) as err:  # pandas' parser errors are ValueErrors
                return f"{epochs} is unreadable (not CSV: {_first_line(err)})"
            if "epoch" not in header:
                return f"{epochs} is unreadable (no epoch column)"
    return None


def _parquet_problem(path: Path, required, columns: dict[str, str]) -> str | None:
    """What is wrong with a Parquet file whose readers need the ``required`` columns and ``columns``' kinds, or None."""
    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError: truncated, or not Parquet
        return f"not a Parquet file: {_first_line(err)}"
    absent = [c for c in required if c not in schema.names]
    if absent:
        return f"no {', '.join(absent)} column"
    for field_ in schema:
        kind = columns.get(field_.name, columns.get("*"))
        if kind is not None and not _KINDS[kind][0](field_.type):
            return f"column {field_.name} holds {field_.type}, not {_KINDS[kind][1]}"
    return None


def _numbers(summary: dict) -> dict:
    """A run's summary for the tables: undefined (null) values as NaN, except those the run recorded as
    infinite (``undefined``: ``inf`` / ``-inf``), which are ±inf."""
    why = summary.get("undefined") if isinstance(summary.get("undefined"), dict) else {}
    infinite = {"inf": math.inf, "-inf": -math.inf}
    return {k: (infinite.get(str(why.get(k)), math.nan) if v is None else v) for k, v in summary.items()}


#: settings that are not the model's: the analyses' options, seeds (a column of their own), constructor paths,
#: the run's name and a recipe's notes; those labelled by name below (λ, the training variant, a model seed);
#: the checkpoint's selection metric (the accuracy table's "selected on"; a training variant implies its own)
NOT_VARIANTS = (
    "analysis/",
    "projection/lam",
    "training/",
    "recipe/differs",
    "run_name",
    "callbacks/model_checkpoint/",
    "roar/",
)


def _not_a_variant(key: str) -> bool:
    """Settings that never label a row: :data:`NOT_VARIANTS`, seeds, constructor paths, and where the data is (a
    dataset's ``path``, ``source.path``, ``…_dir``: the same data may live anywhere)."""
    last = key.rsplit("/", 1)[-1]
    where_data_is = key.startswith("dataset/") and last.endswith(("path", "dir"))
    return key.startswith(NOT_VARIANTS) or last.endswith("seed") or last == "_target_" or where_data_is


def _as_written(key: str) -> str:
    """A setting as the user names it on the command line: a group's choice (``recipe/name``) by the group
    (``recipe``, as in ``recipe=jain_wallace``), a file (``model/embeddings/path``) by what it holds
    (``model/embeddings``)."""
    parent, _, last = key.rpartition("/")
    return parent if parent and last in ("name", "path") else key


def _short(value) -> str:
    """A setting's value, short, as the command line writes it: a path by its last part, nothing set as ``null``."""
    text = "null" if value is None else str(value)
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text and not text.startswith("[") else text


def _short_names(keys) -> dict[str, str]:
    """``model/optimizer/lr`` → ``lr``: each key's shortest dotted suffix that no other key here ends with."""
    keys = sorted(keys)
    out = {}
    for key in keys:
        parts = key.split("/")
        for size in range(1, len(parts) + 1):
            suffix = "/".join(parts[-size:])
            if not any(other != key and (other == suffix or other.endswith("/" + suffix)) for other in keys):
                break
        out[key] = suffix.replace("/", ".")
    return out


def _named_parts(run: Run) -> dict[str, str]:
    """The model-defining settings every row names when set: sparsegen's λ, the training variant (with its
    λ), a model seed apart from the data's (``model_seed``)."""
    c, parts = run.config, {}
    if c.get("projection") == "sparsegen" and c.get("lam") is not None:
        parts["lam"] = f"λ={float(c['lam']):g}"
    if c.get("training", "standard") != "standard":
        parts["training"] = str(c["training"])
    if c.get("model_seed") is not None:
        parts["model_seed"] = f"model seed {c['model_seed']}"
    if c.get("roar"):
        parts["roar"] = str(c["roar"])
    return parts


def label_variants(runs: list[Run]) -> None:
    """``run.config['variant']`` (and its ``variant_parts``): :func:`_named_parts`, then every other model
    setting that differs between runs of the same dataset / model / encoder / attention / projection, where
    the run departs from the most common value (a setting a run lacks is the same as null)."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(tuple(str(run.config[k]) for k in MODEL_KEYS if k != "seed"), []).append(run)
    varying = set()
    for group in groups.values():
        for key in set().union(*(r.identity for r in group)):
            if not _not_a_variant(key) and len({repr(r.identity.get(key)) for r in group}) > 1:
                varying.add(key)
    # a recipe changes many settings at once: name the recipe, not each setting it implies
    recipes: dict[str, list[Run]] = {}
    for run in runs:
        recipes.setdefault(repr(run.identity.get("recipe/name")), []).append(run)
    if len(recipes) > 1:
        varying = {
            key
            for key in varying
            if key == "recipe/name"
            or key.startswith("recipe/") is False
            and any(len({repr(r.identity.get(key)) for r in group}) > 1 for group in recipes.values())
        }
    modal = {key: Counter(repr(r.identity.get(key)) for r in runs).most_common(1)[0][0] for key in varying}
    written = {key: _as_written(key) for key in varying}
    short = _short_names(set(written.values()))
    names = {key: short[written[key]] for key in varying}
    for run in runs:
        parts = _named_parts(run)
        parts.update(
            {
                key: f"{names[key]}={_short(run.identity.get(key))}"
                for key in sorted(varying)
                if repr(run.identity.get(key)) != modal[key]
            }
        )
        run.config["variant_parts"] = parts
        run.config["variant"] = ", ".join(parts.values())


def trial_reason(run: Run) -> str:
    """Why ``run`` is a trial rather than a result, in a few words (empty: it is a result): a debug run
    (``trainer=debug``, or a ``trainer.limit_<split>_batches`` that cuts a split to some batches or a fraction of
    it) or one on synthetic data (``dataset=synthetic…``)."""
    reasons = []
    cut = [
        f"trainer.limit_{split}_batches={value}"
        for split in ("train", "val", "test")
        if _cuts(value := run.settings.get(f"trainer/limit_{split}_batches"))
    ]
    if cut or "trainer=debug" in run.config.get("overrides", []):
        reasons.append("debug (" + (", ".join(cut) or "trainer=debug") + ")")
    if str(run.config.get("dataset")).startswith("synthetic"):
        reasons.append(f"synthetic data (dataset={run.config['dataset']})")
    return "; ".join(reasons)


def _cuts(limit) -> bool:
    """Whether a Lightning ``limit_*_batches`` leaves part of a split out: a number of batches (an integer), or a
    fraction under 1.0 (1.0, the default, is the whole split)."""
    if limit is None or isinstance(limit, bool):
        return False
    return isinstance(limit, int) or (isinstance(limit, float) and limit < 1.0)


def real_runs(runs: list[Run], include_all: bool = False) -> tuple[list[Run], list[tuple[Run, str]]]:
    """(the runs for the tables, each trial left out with why): beside at least one real run, the trials
    (:func:`trial_reason`) are left out; with none (a quick start, a smoke sweep) or ``include_all``, none is."""
    reasons = {id(run): trial_reason(run) for run in runs}
    if include_all or all(reasons.values()):
        return list(runs), []
    return [r for r in runs if not reasons[id(r)]], [(r, reasons[id(r)]) for r in runs if reasons[id(r)]]


def code_label(code: dict) -> str:
    """The code a run was made with, short: the commit's first 8 characters (``+ changes``: uncommitted changes
    to tracked files), else the package version; ``not recorded`` for a run made before runs recorded it."""
    if not code:
        return "not recorded"
    commit = str(code.get("commit") or "unknown")
    label = commit[:8] if commit != "unknown" else f"version {code.get('version', 'unknown')}"
    return label + (" + changes" if code.get("dirty") else "")


def numerics_label(numerics: dict) -> str:
    """What rounded a run's floating point, short (``AVX512, torch 2.13.0+cpu``); ``not recorded`` for a run made
    before runs recorded it."""
    if not numerics:
        return "not recorded"
    return f"{numerics.get('cpu_capability', 'unknown')}, torch {numerics.get('torch', 'unknown')}"


def code_note(runs: list[Run], what: str = "These runs") -> str:
    """One HTML line when ``runs`` come from more than one code version (each version with its number of runs),
    else empty."""
    versions = Counter(code_label(r.code) for r in runs)
    if len(versions) < 2:
        return ""
    listed = ", ".join(f"{html.escape(label)} ({n} run{'s' * (n > 1)})" for label, n in sorted(versions.items()))
    return f"<p class='note mixed'>{what} come from {len(versions)} code versions: {listed}.</p>"


def _config_key(run: Run) -> tuple:
    """What makes two runs the same experiment: their model keys and config identity."""
    return tuple(str(run.config.get(k)) for k in MODEL_KEYS), json.dumps(run.identity, sort_keys=True, default=str)


def latest_per_model(runs: list[Run]) -> tuple[list[Run], list[tuple[Run, Run]]]:
    """Complete runs, one per config identity — the most recently finished, whatever code made it —, and each
    older duplicate with the run that replaces it."""
    best: dict[tuple, Run] = {}
    replaced = []
    for run in sorted((r for r in runs if r.state == "complete"), key=lambda r: r.finished):
        if _config_key(run) in best:
            replaced.append(best[_config_key(run)])
        best[_config_key(run)] = run
    return list(best.values()), [(old, best[_config_key(old)]) for old in replaced]


def replaced_table(replaced: list[tuple[Run, Run]], root: Path) -> pd.DataFrame:
    """Each complete run left out because a later run of the same config replaces it: both runs, their code
    and why (the later one is kept; whether their code differs)."""
    rows = []
    for old, new in replaced:
        same = code_label(old.code) == code_label(new.code)
        rows.append(
            {
                "run left out": _relative(old.path, root),
                "its code": code_label(old.code),
                "replaced by": _relative(new.path, root),
                "code used": code_label(new.code),
                "why": "same config, finished later" + ("" if same else "; made by other code"),
            }
        )
    return pd.DataFrame(rows)


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path != root and path.is_relative_to(root) else path.name


def without_empty_variant(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's ``variant`` column only when some run has one."""
    if "variant" in frame and not frame["variant"].astype(str).str.len().any():
        return frame.drop(columns="variant")
    return frame


def status_table(
    runs: list[Run], missing: list[dict], root: Path, left_out: dict[Path, str] | None = None
) -> pd.DataFrame:
    """Every run found, with its state, settings, code and error; ``left out``: why a complete run is not in the
    tables (``left_out``: run directory → why), where one is."""
    left_out = left_out or {}
    rows = [
        {
            "run": str(r.path.relative_to(root)) if r.path != root else ".",
            "state": r.state,
            **{k: r.config[k] for k in MODEL_KEYS},
            "variant": r.config.get("variant", ""),
            "analysis": r.config["analysis"],
            "finished": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.finished)) if r.finished else "",
            "code": code_label(r.code),
            "numerics": numerics_label(r.numerics),
            "left out": left_out.get(r.path, ""),
            "error": r.error,
        }
        for r in runs
    ]
    rows += [
        {
            "run": str(Path(m["sweep"]).relative_to(root) / m["job"])
            if Path(m["sweep"]).is_relative_to(root)
            else m["job"],
            "state": m.get("state", "missing"),
            "error": m["overrides"] if m.get("state") else f"never started ({m['overrides']})",
        }
        for m in missing
    ]
    return pd.DataFrame(rows)
