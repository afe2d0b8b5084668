"""The range of every numeric option, in one table (:data:`RANGES`), checked against the composed config before
any data is read (``config.check_config``): a size of 0, a dropout of 1.5, a learning rate of 0, a seed beyond
2³² − 1, a NaN or a word where a number goes is one line naming the option — never torch's message from inside
a constructor, nor a run that trains nothing and reports its numbers.

An option's range holds wherever the option appears (``encoder.hidden_size`` for every encoder that has one).
Not here: the test families' options, which each family checks itself (``attn_study/families/<name>/``: a family
is a folder of its own), and ``trainer.max_epochs``, whose -1 depends on the callbacks (``preflight.check_options``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
class Either:
    """One of two ranges (Lightning's ``limit_*_batches``: a count of batches, or a fraction of them)."""

    first: Range
    second: Range
    note: str = ""

    def problem(self, value) -> str | None:
        if self.first.problem(value) is None or self.second.problem(value) is None:
            return None
        return f"must be {self.first.kind()} or {self.second.kind()}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Devices:
    """Lightning's ``devices``: how many (≥ 1; -1: all), ``auto``, or a list of device indices."""

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

#: option → its range; every numeric option of every group but the test families'
RANGES: dict[str, Range | Either | Devices] = {
    # the run
    "seed": SEED,
    "analysis_max_instances": whole(1, optional=True),
    "model_seed": whole(0, SEED_MAX, optional=True),
    "threads": whole(1, optional=True),
    # model=
    "model.gradient_clip_val": number(0, optional=True),
    "model.optimizer.lr": number(0, above=True, note="at 0 no weight changes: the model tested would be untrained"),
    "model.optimizer.weight_decay": number(0),
    "model.optimizer.attention_weight_decay": number(0),
    "model.network.embedding_dim": SIZE,
    "model.network.decoder_dim": whole(1, optional=True, note="null: half the encoder's output (J&W's code)"),
    "model.network.dropout": DROPOUT,
    "model.network.word_dropout": DROPOUT,
    "model.network.sentence_dropout": DROPOUT,
    "model.network.k": whole(1, note="the number of tokens the selector keeps"),
    "model.network.temperature": number(0, above=True),
    # encoder=, attention=, projection=
    "encoder.hidden_size": SIZE,
    "encoder.num_layers": SIZE,
    "encoder.filters": SIZE,
    "encoder.model_dim": SIZE,
    "encoder.num_heads": SIZE,
    "encoder.ff_dim": SIZE,
    "encoder.max_positions": SIZE,
    "encoder.dropout": DROPOUT,
    "encoder.conicity_weight": number(0),
    "attention.attention_dim": whole(1, optional=True),
    "projection.alpha": number(1, above=True, note="α = 1 is softmax: projection=softmax"),
    "projection.n_iter": SIZE,
    "projection.lam": number(high=1, below=True, note="sparsegen-lin's λ"),
    # training=
    "training.pretrain_epochs": whole(0),
    "training.select_from_epoch": whole(0),
    "training.lam": number(0),
    "training.word_tying.weight": number(0),
    # dataset=
    "dataset.batch_size": SIZE,
    "dataset.eval_batch_size": SIZE,
    "dataset.num_workers": whole(0),
    "dataset.rnn_hidden_size": SIZE,
    "dataset.cnn_filters": SIZE,
    "dataset.average_hidden_size": SIZE,
    "dataset.decoder_dim": whole(1, optional=True),
    "dataset.embedding_dim": SIZE,
    "dataset.preprocessing.min_count": SIZE,
    "dataset.preprocessing.min_length": SIZE,
    "dataset.preprocessing.max_length": whole(1, optional=True),
    "dataset.preprocessing.truncate": whole(1, optional=True),
    "dataset.inject.count": whole(0),  # 0: nothing injected
    "dataset.inject.seed": SEED,
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
    # trainer=, callbacks=
    "trainer.limit_train_batches": BATCHES,
    "trainer.limit_val_batches": BATCHES,
    "trainer.limit_test_batches": BATCHES,
    "trainer.devices": Devices(),
    "trainer.gradient_clip_val": number(0, optional=True),
    "trainer.max_steps": whole(1, also=(-1,), note="-1: as many as the epochs take"),
    "trainer.log_every_n_steps": SIZE,
    "trainer.num_sanity_val_steps": whole(0, also=(-1,)),
    "trainer.accumulate_grad_batches": SIZE,
    "callbacks.early_stopping.patience": whole(0),
    "callbacks.early_stopping.stopping_threshold": number(optional=True),
    # roar=, sweep=, cluster=
    "roar.fraction": number(0, 1),
    "roar.step": number(0, 1, above=True, optional=True),
    "roar.batch_size": SIZE,
    "roar.ig_steps": SIZE,
    "roar.chunk_size": SIZE,
    "sweep.wait_min": number(0),
    "sweep.synthetic.n_train": SIZE,
    "sweep.synthetic.n_dev": SIZE,
    "sweep.synthetic.n_test": SIZE,
    "sweep.synthetic.min_length": whole(6, note="room for three negated signal words"),
    "sweep.synthetic.max_length": SIZE,
    "sweep.synthetic.negation_prob": number(0, 1),
    "sweep.synthetic.decoy_negators": number(0),
    "cluster.time_min": SIZE,
    "cluster.cpus": SIZE,
    "cluster.mem_gb": number(0, above=True),
    "cluster.gpus": whole(0),
    "cluster.array_parallelism": SIZE,
    "cluster.max_requeue": whole(0),
}

#: numbers that are no option's value: a source's class map ({original class: label}); what others check
NOT_RANGED = ("analysis.", "hydra.", "recipe.", "dataset.source.classes.", "trainer.max_epochs")


def refusal(option: str, value, allowed) -> str | None:
    """``option=value: must be …`` when ``value`` is outside ``allowed``, else None: the one wording of every
    numeric option's refusal (the config's, a family's)."""
    problem = allowed.problem(value)
    return None if problem is None else f"{option}={value}: {problem}"


def require(option: str, value, error: type[Exception], allowed=None) -> None:
    """Raise ``error`` with :func:`refusal`'s line when ``value`` is outside ``allowed`` (by default the option's
    range in :data:`RANGES`): a constructor's own check, for Python users who bypass the config's, in its words."""
    line = refusal(option, value, RANGES[option] if allowed is None else allowed)
    if line is not None:
        raise error(line)


def problems(container: dict) -> list[str]:
    """``option=value: must be …`` for every option of ``container`` (a resolved config) outside its range."""
    found = []
    for option, allowed in RANGES.items():
        node = container
        for part in option.split("."):
            node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
        if node is _ABSENT:
            continue
        line = refusal(option, node, allowed)
        if line:
            found.append(line)
    return found


def unranged(container: dict, prefix: str = "") -> list[str]:
    """The numeric settings of ``container`` that :data:`RANGES` does not cover (what a new option must add)."""
    out = []
    for key, value in container.items():
        option = f"{prefix}{key}"
        if option.startswith(NOT_RANGED) or f"{option}.".startswith(NOT_RANGED):
            continue
        if isinstance(value, dict):
            out += unranged(value, f"{option}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and option not in RANGES:
            out.append(option)
    return out


_ABSENT = object()
