"""The kind and range of every option, in one table (:data:`RANGES`), checked against the composed config before
any data is read (``config.check_config``): a boolean written ``'false'``, ``maybe`` or ``2``, a word that is not one
of its choices, a size of 0, a dropout of 1.5, a learning rate of 0, a seed beyond 2³² − 1, a NaN or a word where a
number goes is one line naming the option — never torch's message from inside a constructor, nor a run that trains
nothing and reports its numbers.

The kinds: :class:`Range` (a whole number or a number, with its bounds), :class:`Boolean`, :class:`Word` (one of a
list), :class:`Text`, :class:`PathTo` (a file or folder; one the run reads must exist), :class:`ListOf`,
:class:`Mapping` (a free-form table: sbatch options, a class map), :class:`Either` (one of two kinds).

An option's kind holds wherever the option appears (``encoder.hidden_size`` for every encoder that has one). The
table covers every setting of every group's files (``tests/test_ranges.py`` composes them all) and both entry points'
top-level options (:data:`ANALYZE`). Not here: the test families' options — a family is a folder of its own: each
option's kind is its constructor's annotation (:func:`annotated`, checked by ``job.components.check_settings``) and its
range the family's own check —, and ``trainer.max_epochs``, whose -1 depends on the callbacks
(``job.checks.check_options``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

CONFIG_FILE = Path(__file__).resolve().parent.parent / "conf" / "config.yaml"

#: what torch, numpy and Lightning accept as a seed (Lightning silently draws a random one beyond it)
SEED_MAX = 2**32 - 1


@dataclass(frozen=True)
class Range:
    """A whole number (``whole``: an int, not 1.0) or any finite number, ≥ ``low`` (> when ``above``) and ≤ ``high``
    (< when ``below``), or one of ``also``; null too when ``optional``. ``note`` says why, after the bound."""

    whole: bool = False
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False
    optional: bool = False
    also: tuple = ()
    note: str = ""

    def kind(self) -> str:
        """``a whole number >= 1``, ``a number in [0, 1)``, ``a number > 1``…"""
        noun = "a whole number" if self.whole else "a number"
        low, high = _shown(self.low), _shown(self.high)
        if self.low is not None and self.high is not None:
            bounds = f" in {'(' if self.above else '['}{low}, {high}{')' if self.below else ']'}"
        elif self.low is not None:
            bounds = f" {'>' if self.above else '>='} {low}"
        elif self.high is not None:
            bounds = f" {'<' if self.below else '<='} {high}"
        else:
            bounds = ""
        extra = "".join(f" or {v}" for v in self.also) + (" or null" if self.optional else "")
        return f"{noun}{bounds}{extra}"

    def problem(self, value) -> str | None:
        if (value is None and self.optional) or any(type(value) is type(v) and value == v for v in self.also):
            return None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (
            not number
            or (self.whole and not isinstance(value, int))
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            return f"must be {self.kind()}, not {value!r}"
        low = self.low is not None and (value <= self.low if self.above else value < self.low)
        high = self.high is not None and (value >= self.high if self.below else value > self.high)
        if low or high:
            return f"must be {self.kind()}" + (f" ({self.note})" if self.note else "")
        return None


@dataclass(frozen=True)
class Boolean:
    """``true`` or ``false`` — never a quoted ``'false'``, ``maybe`` or ``2`` (each of which Python reads as true)."""

    optional: bool = False

    def kind(self) -> str:
        return "true or false" + (" or null" if self.optional else "")

    def problem(self, value) -> str | None:
        if isinstance(value, bool) or (value is None and self.optional):
            return None
        return f"must be {self.kind()}, not {value!r}"


@dataclass(frozen=True)
class Word:
    """One of ``choices`` (or null when ``optional``)."""

    choices: tuple[str, ...]
    optional: bool = False
    note: str = ""

    def kind(self) -> str:
        return "one of " + ", ".join(self.choices) + (" or null" if self.optional else "")

    def problem(self, value) -> str | None:
        if (value is None and self.optional) or (isinstance(value, str) and value in self.choices):
            return None
        return f"choose {self.kind()}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Text:
    """Any text: a name, a W&B project, a constructor's path (``_target_``)."""

    optional: bool = False

    def kind(self) -> str:
        return "text" + (" or null" if self.optional else "")

    def problem(self, value) -> str | None:
        if isinstance(value, str) or (value is None and self.optional):
            return None
        return f"must be {self.kind()}, not {value!r}"


@dataclass(frozen=True)
class PathTo:
    """A file or folder, given as text (null when ``optional``). ``read``: the run reads it, so it must exist
    (checked before any data is read, by ``config.check_paths``: a path a job resolves relative to another run is
    not a plain path and is not ``read``)."""

    optional: bool = True
    read: bool = False
    what: str = "a file or folder"

    def kind(self) -> str:
        return f"the path of {self.what}" + (" or null" if self.optional else "")

    def problem(self, value) -> str | None:
        if (value is None and self.optional) or (isinstance(value, str) and value.strip()):
            return None
        return f"must be {self.kind()}, not {value!r}"


@dataclass(frozen=True)
class ListOf:
    """A list, each item of kind ``item`` (``nonempty``: at least one)."""

    item: object
    optional: bool = False
    nonempty: bool = False

    def kind(self) -> str:
        return f"a {'non-empty ' if self.nonempty else ''}list of ({self.item.kind()})" + (
            " or null" if self.optional else ""
        )

    def problem(self, value) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, (list, tuple)) or (self.nonempty and not value):
            return f"must be {self.kind()}, not {value!r}"
        for item in value:
            problem = self.item.problem(item)
            if problem is not None:
                return f"each item {problem.removeprefix('must be ')}" if problem.startswith("must be") else problem
        return None


@dataclass(frozen=True)
class Mapping:
    """A free-form table ``{key: value}`` (sbatch options; a source's class map): its entries are checked where
    they are used."""

    optional: bool = True

    def kind(self) -> str:
        return "a table {key: value}" + (" or null" if self.optional else "")

    def problem(self, value) -> str | None:
        if isinstance(value, dict) or (value is None and self.optional):
            return None
        return f"must be {self.kind()}, not {value!r}"


@dataclass(frozen=True)
class ClassWeights:
    """``model.class_weights``: null, ``pos_weight`` (Jain & Wallace's class-balanced binary loss), or one finite
    weight ≥ 0 per class, not all 0 (a negative weight trains the model away from a class; all 0, on nothing)."""

    def kind(self) -> str:
        return "null, pos_weight or a list of weights >= 0 (one per class, not all 0)"

    def problem(self, value) -> str | None:
        if value is None or value == "pos_weight":
            return None
        weights = number(0)
        if not isinstance(value, (list, tuple)) or not value or any(weights.problem(w) for w in value):
            return f"must be {self.kind()}, not {value!r}"
        if not any(value):
            return f"must be {self.kind()}: with every weight 0 the loss is 0 and nothing is trained"
        return None


@dataclass(frozen=True)
class Either:
    """One of two kinds (Lightning's ``limit_*_batches``: a count of batches, or a fraction of them)."""

    first: object
    second: object
    note: str = ""

    def kind(self) -> str:
        return f"{self.first.kind()} or {self.second.kind()}"

    def problem(self, value) -> str | None:
        if self.first.problem(value) is None or self.second.problem(value) is None:
            return None
        return f"must be {self.first.kind()} or {self.second.kind()}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Devices:
    """Lightning's ``devices``: how many (≥ 1; -1: all), ``auto``, or a list of device indices."""

    def kind(self) -> str:
        return "a whole number >= 1, -1 (every device), auto or a list of device indices"

    def problem(self, value) -> str | None:
        if isinstance(value, list) and value and all(whole(0).problem(v) is None for v in value):
            return None
        if whole(1, also=(-1, "auto")).problem(value) is None:
            return None
        return f"must be a whole number >= 1, -1 (every device), auto or a list of device indices, not {value!r}"


def _shown(bound) -> str:
    """A bound as people write it: ``4294967295``, ``0``, ``0.5`` (not ``4.29497e+09``)."""
    if bound is None:
        return ""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def whole(low=None, high=None, **kwargs) -> Range:
    return Range(whole=True, low=low, high=high, **kwargs)


def number(low=None, high=None, **kwargs) -> Range:
    return Range(whole=False, low=low, high=high, **kwargs)


SIZE = whole(1)
SEED = whole(0, SEED_MAX)
DROPOUT = number(0, 1, below=True, note="the probability that a unit is dropped")
BATCHES = Either(
    whole(1, optional=True), number(0, 1, above=True), note="a count of batches, or the fraction of them; null: all"
)

BOOLEAN = Boolean()
TEXT = Text()
NAME = Text()  # a group option's own name (``encoder.name``): set by its file
TARGET = Text()  # a component's constructor (``_target_``): set by its file
PATH = PathTo()
RUN = PathTo(what="a run directory (or sibling:<experiment> in a sweep)")
#: the smallest learning rate accepted: below it no float32 weight changes (1e-320 is 0 in float32, 1e-40 a
#: denormal, and an Adam step of lr · m̂/√v̂ ≈ lr moves no weight of size ≥ 1e-23)
SMALLEST_LR = 1e-30

#: option → its kind and range; every option of every group's files but the test families'
RANGES: dict[str, object] = {
    # the run (attn-study's top level)
    "seed": SEED,
    "analysis_max_instances": whole(1, optional=True),
    "model_seed": whole(0, SEED_MAX, optional=True),
    "threads": whole(1, optional=True),
    "force": BOOLEAN,
    "resume": BOOLEAN,
    "run_name": TEXT,
    # model=
    "model.name": NAME,
    "model.gradient_clip_val": number(0, optional=True),
    "model.class_weights": ClassWeights(),
    "model.optimizer.lr": number(
        SMALLEST_LR, note="below it no float32 weight changes, as at 0: the model tested would be untrained"
    ),
    "model.optimizer.weight_decay": number(0),
    "model.optimizer.attention_weight_decay": number(0),
    "model.optimizer.amsgrad": BOOLEAN,
    "model.embeddings.path": PathTo(read=True, what="a vectors file (.txt or .txt.gz)"),
    "model.embeddings.freeze": BOOLEAN,
    "model.embeddings.missing": Word(("normal", "zero")),
    "model.network._target_": TARGET,
    "model.network.embedding_dim": SIZE,
    "model.network.decoder_dim": whole(1, optional=True, note="null: half the encoder's output (J&W's code)"),
    "model.network.dropout": DROPOUT,
    "model.network.word_dropout": number(0, 1, below=True, optional=True, note="null: model.network.dropout"),
    "model.network.sentence_dropout": DROPOUT,
    "model.network.k": whole(1, note="the number of tokens the selector keeps"),
    "model.network.temperature": number(0, above=True),
    "model.network.separate_query_embeddings": BOOLEAN,
    # encoder=, attention=, projection=
    "encoder.name": NAME,
    "encoder._target_": TARGET,
    "encoder.hidden_size": SIZE,
    "encoder.num_layers": SIZE,
    "encoder.filters": SIZE,
    "encoder.kernel_sizes": ListOf(whole(1, note="odd widths keep the length"), nonempty=True),
    "encoder.activation": Word(("relu", "tanh", "gelu")),
    "encoder.cell": Word(("lstm", "gru")),
    "encoder.bidirectional": BOOLEAN,
    "encoder.orthogonal": BOOLEAN,
    "encoder.random_initial_state": BOOLEAN,
    "encoder.model_dim": SIZE,
    "encoder.num_heads": SIZE,
    "encoder.ff_dim": SIZE,
    "encoder.max_positions": SIZE,
    "encoder.dropout": DROPOUT,
    "encoder.conicity_weight": number(0),
    "encoder.self_attention": Word(
        ("softmax", "sparsemax", "entmax15", "pooling"), note="pooling: the model's own projection="
    ),
    "encoder.path": PathTo(read=True, what="a Hugging Face checkpoint's folder (encoder=pretrained)"),
    "encoder.finetune": BOOLEAN,
    "encoder.max_length": whole(3, optional=True, note="a special token, a piece and a special token"),
    "encoder.lr": number(SMALLEST_LR, note="below it no float32 weight changes: the encoder would stay as loaded"),
    "encoder.weight_decay": number(0),
    "encoder.warmup": number(0, 1, below=True, note="the share of the training steps the learning rate warms up"),
    "encoder.mixed_precision": BOOLEAN,
    "attention.name": NAME,
    "attention._target_": TARGET,
    "attention.attention_dim": whole(1, optional=True),
    "attention.source": RUN,
    "projection.name": NAME,
    "projection._target_": TARGET,
    "projection.alpha": number(
        1,
        1000,
        above=True,
        note="α = 1 is softmax (projection=softmax); from α ≈ 5 on the weights are one-hot already, and past 1000 "
        "the bisection's powers overflow float32",
    ),
    "projection.n_iter": SIZE,
    "projection.lam": number(high=1, below=True, note="sparsegen-lin's λ"),
    # training=
    "training.schedule": Word(("standard", "random_attention_pretraining", "model_consistent_adversary")),
    "training.pretrain_epochs": whole(0),
    "training.instance_weighting": BOOLEAN,
    "training.weight_clip": ListOf(number(0, above=True), nonempty=True),
    "training.select_from_epoch": whole(0),
    "training.base": RUN,
    "training.lam": number(0),
    "training.word_tying.weight": number(0),
    "training.word_tying.kind": Word(("predict", "l2")),
    # dataset=
    "dataset.name": NAME,
    "dataset.path": PathTo(read=True, what="the dataset's files (a folder or an archive); null: the download"),
    "dataset.batch_size": SIZE,
    "dataset.eval_batch_size": SIZE,
    "dataset.bucket": BOOLEAN,
    "dataset.shuffle_labels": BOOLEAN,
    "dataset.num_workers": whole(0),
    "dataset.rnn_hidden_size": whole(1, optional=True),
    "dataset.cnn_filters": whole(1, optional=True),
    "dataset.average_hidden_size": whole(1, optional=True),
    "dataset.average_activation": Word(("relu", "tanh", "gelu"), optional=True),
    "dataset.decoder_dim": whole(1, optional=True),
    "dataset.embedding_dim": whole(1, optional=True),
    "dataset.preprocessing.min_count": SIZE,
    "dataset.preprocessing.min_length": SIZE,
    "dataset.preprocessing.max_length": whole(1, optional=True),
    "dataset.preprocessing.truncate": whole(1, optional=True),
    "dataset.preprocessing.sentences": BOOLEAN,
    "dataset.preprocessing.clean": Word(("remove_non_word", "keras"), optional=True),
    "dataset.preprocessing.digits": Word(("qqq", "qqq_isdigit", "keep")),
    "dataset.preprocessing.lowercase": BOOLEAN,
    "dataset.preprocessing.nonword_runs": Word(("last_char",), optional=True),
    "dataset.preprocessing.vocab_count": Word(("total", "documents")),
    "dataset.preprocessing.vocab_texts": Word(("kept", "all")),
    "dataset.preprocessing.vocab_order": Word(("frequency", "alphabetical")),
    "dataset.preprocessing.boundary_tokens": BOOLEAN,
    "dataset.preprocessing.drop_longest": BOOLEAN,
    "dataset.preprocessing.drop_shortest": BOOLEAN,
    "dataset.inject.count": whole(0),  # 0: nothing injected
    "dataset.inject.tokens": ListOf(TEXT, nonempty=True),
    "dataset.inject.positions": Either(Word(("random", "start", "end")), ListOf(whole(0), nonempty=True)),
    "dataset.inject.seed": SEED,
    "dataset.source._target_": TARGET,
    "dataset.source.path": PathTo(read=True, what="the dataset's files (a folder or an archive); null: the download"),
    "dataset.source.cache_dir": PATH,
    "dataset.source.url": TEXT,
    "dataset.source.sha256": Text(optional=True),
    "dataset.source.n_train": whole(1, note="the number of training instances generated"),
    "dataset.source.n_dev": whole(1, note="the number of dev instances generated"),
    "dataset.source.n_test": whole(1, note="the number of test instances generated"),
    "dataset.source.min_length": whole(6, note="room for three negated signal words"),
    "dataset.source.max_length": SIZE,
    "dataset.source.negation_prob": number(0, 1),
    "dataset.source.decoy_negators": number(0),
    "dataset.source.seed": SEED,
    "dataset.source.split_seed": SEED,
    "dataset.source.dev_fraction": number(0, 1, above=True, below=True),
    "dataset.source.dev_size": SIZE,
    "dataset.source.max_train": whole(1, optional=True),
    "dataset.source.task": whole(1, 20, note="the bAbI task"),
    "dataset.source.variant": Word(("en", "en-10k")),
    "dataset.source.style": Word(("as_written", "jain_wallace")),
    "dataset.source.dev_split": Word(("stratified", "jain_wallace")),
    "dataset.source.classes": Either(Word(("answers", "words"), optional=True), Either(Mapping(), ListOf(whole(1)))),
    "dataset.source.class_tasks": ListOf(whole(1, 20), optional=True, nonempty=True),
    "dataset.source.split": Word(("standard", "bydate", "jain_wallace")),
    "dataset.source.fine_grained": BOOLEAN,
    "dataset.source.ratings": BOOLEAN,
    "dataset.source.categories": ListOf(TEXT, nonempty=True),
    "dataset.source.labels": ListOf(TEXT, nonempty=True),
    "dataset.source.label_names": ListOf(TEXT, nonempty=True),
    "dataset.source.dataset": TEXT,
    "dataset.source.obtain": TEXT,
    "dataset.source.text_column": TEXT,
    "dataset.source.label_column": TEXT,
    "dataset.source.split_column": TEXT,
    "dataset.source.text_columns": whole(1, optional=True),
    "dataset.source.fields": ListOf(TEXT, optional=True, nonempty=True),
    "dataset.source.escaped_newlines": Word(("space", "keep")),
    "dataset.source.strip": Word(("clean_post", "scikit_learn")),
    "dataset.source.html_breaks": Word(("space", "keep")),
    "explainer.target": RUN,
    # trainer=, callbacks=, logger=
    "trainer._target_": TARGET,
    "trainer.accelerator": Word(("auto", "cpu", "gpu", "cuda")),
    "trainer.deterministic": Either(BOOLEAN, Word(("warn",))),
    "trainer.enable_model_summary": BOOLEAN,
    "trainer.enable_progress_bar": BOOLEAN,
    "trainer.limit_train_batches": BATCHES,
    "trainer.limit_val_batches": BATCHES,
    "trainer.limit_test_batches": BATCHES,
    "trainer.devices": Devices(),
    "trainer.gradient_clip_val": number(0, optional=True),
    "trainer.max_steps": whole(1, also=(-1,), note="-1: as many as the epochs take"),
    "trainer.log_every_n_steps": SIZE,
    "trainer.num_sanity_val_steps": whole(0, also=(-1,)),
    "trainer.accumulate_grad_batches": SIZE,
    "callbacks.model_checkpoint._target_": TARGET,
    "callbacks.model_checkpoint.monitor": TEXT,
    "callbacks.model_checkpoint.mode": Word(("max", "min")),
    "callbacks.model_checkpoint.filename": TEXT,
    "callbacks.model_checkpoint.save_last": BOOLEAN,
    "callbacks.model_checkpoint.enable_version_counter": BOOLEAN,
    "callbacks.early_stopping._target_": TARGET,
    "callbacks.early_stopping.monitor": TEXT,
    "callbacks.early_stopping.mode": Word(("max", "min")),
    "callbacks.early_stopping.patience": whole(0),
    "callbacks.early_stopping.check_finite": BOOLEAN,
    "callbacks.early_stopping.stopping_threshold": number(optional=True),
    "logger.wandb._target_": TARGET,
    "logger.wandb.project": TEXT,
    "logger.wandb.mode": Word(("offline", "online", "disabled")),
    "logger.wandb.name": TEXT,
    "logger.wandb.group": Text(optional=True),
    "logger.wandb.job_type": TEXT,
    "logger.wandb.tags": ListOf(TEXT),
    "logger.csv._target_": TARGET,
    "logger.csv.name": TEXT,
    "logger.csv.version": TEXT,
    # roar=, sweep=, cluster=, paths
    "roar.name": NAME,
    "roar.recursive": BOOLEAN,
    "roar.method": TEXT,  # an importance method's name: attn_study.roar.job checks it against the methods
    "roar.fraction": number(0, 1),
    "roar.source": RUN,
    "roar.token": TEXT,
    "roar.label": Word(("predicted", "gold")),
    "roar.gradient": Word(("jain_wallace", "one_hot_norm")),
    "roar.rounding": Word(("half_up", "floor")),
    "roar.step": number(0, 1, above=True, optional=True),
    "roar.batch_size": SIZE,
    "roar.ig_steps": SIZE,
    "roar.chunk_size": SIZE,
    "sweep.name": TEXT,
    "sweep.wait_min": number(0),
    "sweep.synthetic": Mapping(),
    "sweep.synthetic.n_train": SIZE,
    "sweep.synthetic.n_dev": SIZE,
    "sweep.synthetic.n_test": SIZE,
    "sweep.synthetic.min_length": whole(6, note="room for three negated signal words"),
    "sweep.synthetic.max_length": SIZE,
    "sweep.synthetic.negation_prob": number(0, 1),
    "sweep.synthetic.decoy_negators": number(0),
    "cluster.partition": Text(optional=True),
    "cluster.account": Text(optional=True),
    "cluster.qos": Text(optional=True),
    "cluster.time_min": SIZE,
    "cluster.cpus": SIZE,
    "cluster.mem_gb": number(0, above=True),
    "cluster.gpus": whole(0),
    "cluster.array_parallelism": SIZE,
    "cluster.max_requeue": whole(0),
    "cluster.setup": ListOf(TEXT),
    "cluster.additional_parameters": Mapping(),
    "paths.cache_dir": PATH,
}
#: one path per source (conf/config.yaml's paths.data: the default of each dataset's dataset.path)
RANGES.update({f"paths.data.{name}": PATH for name in OmegaConf.load(CONFIG_FILE).paths.data})

#: attn-study-analyze's top-level options (conf/analyze.yaml); ``analysis`` is the families'
ANALYZE: dict[str, object] = {
    "ckpt_path": PathTo(optional=False, read=True, what="a run directory or a .ckpt inside one"),
    "device": Word(("auto", "cpu", "cuda")),
    "seed": whole(0, SEED_MAX, optional=True, note="null: the analysed run's seed"),
    "threads": whole(1, optional=True),
    "force": BOOLEAN,
    "use_loggers": BOOLEAN,
    "hf_model": PathTo(read=True, what="a Hugging Face checkpoint's folder"),
    "hf_data": ListOf(TEXT),
}

#: settings that are no option of a user's: a recipe's own table, Hydra's node, a source's class map's entries
NOT_RANGED = ("analysis.", "hydra.", "recipe.", "dataset.source.classes.", "trainer.max_epochs")


def refusal(option: str, value, allowed) -> str | None:
    """``option=value: must be …`` when ``value`` is outside ``allowed``, else None: the one wording of every
    option's refusal (the config's, a family's)."""
    problem = allowed.problem(value)
    return None if problem is None else f"{option}={_written(value)}: {problem}"


def _written(value) -> str:
    """A value as a user writes it on the command line: ``true``, ``null``, ``[1, -2]``, ``'false'`` for the text."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, str) and value.lower() in ("true", "false", "null", "none", "yes", "no"):
        return repr(value)  # the quoted text, not the boolean it looks like
    return str(value)


def require(option: str, value, error: type[Exception], allowed=None) -> None:
    """Raise ``error`` with :func:`refusal`'s line when ``value`` is outside ``allowed`` (by default the option's
    kind in :data:`RANGES`): a constructor's own check, for Python users who bypass the config's, in its words."""
    line = refusal(option, value, RANGES[option] if allowed is None else allowed)
    if line is not None:
        raise error(line)


def problems(container: dict, written: dict | None = None, table: dict | None = None) -> list[str]:
    """``option=value: must be …`` for every option of ``container`` (a resolved config) outside its kind and range
    in ``table`` (default :data:`RANGES`). With ``written`` (the same config unresolved), an option whose value
    came from another option by interpolation (``encoder.hidden_size: ${…dataset.average_hidden_size…}``) is named
    as the one the user wrote (:func:`source_option`)."""
    found = []
    for option, allowed in (RANGES if table is None else table).items():
        value = at(container, option)
        if value is _ABSENT:
            continue
        line = refusal(source_option(option, value, container, written), value, allowed)
        if line:
            found.append(line)
    return found


#: an interpolation's reference to another option: ``${a.b}``, ``${oc.select:a.b,default}``
_REFERENCE = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)[,}]")


def source_option(option: str, value, container: dict, written: dict | None) -> str:
    """The option the user set for ``option``: itself, or — when its unresolved value in ``written`` is an
    interpolation of exactly one other option holding the same ``value`` — that option (``dataset.cnn_filters``
    for ``encoder.filters``)."""
    if written is None:
        return option
    raw = at(written, option)
    if not isinstance(raw, str):
        return option
    sources = [ref for ref in _REFERENCE.findall(raw) if ref != option and at(container, ref) == value]
    return sources[0] if len(sources) == 1 else option


def at(container, option: str):
    """The value of ``option`` (``a.b.c``) in a nested dict, or a private marker when it is absent."""
    node = container
    for part in option.split("."):
        node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
    return node


def untyped(container: dict, prefix: str = "") -> list[str]:
    """The settings of ``container`` that :data:`RANGES` gives no kind (what a new option must add); a free-form
    table's entries (a :class:`Mapping`) are its own."""
    out = []
    for key, value in container.items():
        option = f"{prefix}{key}"
        if option.startswith(NOT_RANGED) or f"{option}.".startswith(NOT_RANGED):
            continue
        if isinstance(value, dict) and not isinstance(RANGES.get(option), (Mapping, Either)):
            out += untyped(value, f"{option}.")
        elif option not in RANGES and not isinstance(value, dict):
            out.append(option)
    return out


def annotated(annotation) -> object | None:
    """The kind a constructor's parameter annotation gives a test family's option (which has no entry in
    :data:`RANGES`): ``bool`` → :class:`Boolean`, ``str`` → :class:`Text`, ``list[…]``/``tuple[…]``/``Sequence[…]``
    of those → :class:`ListOf`, ``X | None`` → optional; None for anything else — a family's numbers are each
    checked, with their bounds, by the family itself (``analysis.checks.whole``, ``finite``, ``probability``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if optional and len(args) == 1:
        inner = annotated(args[0])
        return None if inner is None else dataclasses.replace(inner, optional=True)
    if origin in (list, tuple, collections.abc.Sequence) and args:
        item = annotated(args[0])
        return None if item is None else ListOf(item)
    return {bool: Boolean(), str: Text()}.get(annotation)


_ABSENT = object()
