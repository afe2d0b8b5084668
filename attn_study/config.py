"""The composed config: the resolvers it uses, and its check before anything runs.

Resolvers are registered when ``attn_study`` is imported (Hydra's launcher workers do so when they
unpickle a job). :func:`check_config` is the schema of every setting that nothing instantiates —
the nodes with a ``_target_`` are checked by their constructors — so that a typo (``+model.optimizer.lrr``)
or a value of the wrong kind (``seed=abc``, ``every_n_epochs=1.5``) is one line naming the option, before
any data is read, instead of a silently ignored setting that still enters the run's identity.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attn_study import names
from attn_study.data.embeddings import MISSING
from attn_study.errors import UserError
from attn_study.sweep.naming import job_dir_name, job_keys


def family_names(analysis: DictConfig | dict | None) -> str:
    """``analysis`` node → ``jain_wallace+serrano_smith`` (``none`` when empty): the W&B job type."""
    names = list(analysis or {})
    return "+".join(names) if names else "none"


def _options_help(app: str) -> str:
    from attn_study.options import help_text

    return help_text(app)


def register_resolvers() -> None:
    """``${attn_study.job_dir:${hydra.overrides.task}}`` (a sweep job's directory name),
    ``${attn_study.families:${analysis}}`` (the chosen analyses) and ``${attn_study.options:train}`` (the
    groups' options and the settings, for ``--help``)."""
    if not OmegaConf.has_resolver("attn_study.job_dir"):
        OmegaConf.register_new_resolver(
            "attn_study.job_dir", lambda overrides: job_dir_name(list(overrides), job_keys())
        )
    if not OmegaConf.has_resolver("attn_study.families"):
        OmegaConf.register_new_resolver("attn_study.families", family_names)
    if not OmegaConf.has_resolver("attn_study.options"):  # --help's listing, generated from conf/
        OmegaConf.register_new_resolver("attn_study.options", _options_help)
    names.register_resolvers()  # ${attn_study.run_name:}, ${attn_study.run_tags:}


# -- the schema --------------------------------------------------------------------------------------


def integer(low: int | None = None, optional: bool = False) -> Callable:
    """A whole number (≥ ``low``); null too when ``optional``. ``True``/``1.5``/``"abc"`` are not."""

    def check(value):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                return f"must be a whole number{' or null' if optional else ''}, not {value!r}"
        if low is not None and value < low:
            return f"must be >= {low}"
        return None

    return check


def number(low: float | None = None, high: float | None = None, optional: bool = False) -> Callable:
    """A finite number in [low, high]; null too when ``optional``."""

    def check(value):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"must be a number{' or null' if optional else ''}, not {value!r}"
        if low is not None and value < low:
            return f"must be >= {low:g}"
        if high is not None and value > high:
            return f"must be <= {high:g}"
        return None

    return check


def boolean(value):
    return None if isinstance(value, bool) else f"must be true or false, not {value!r}"


def anything(_value):
    return None


def one_of(*choices) -> Callable:
    """One of ``choices``."""

    def check(value):
        return None if value in choices else f"choose one of {', '.join(map(str, choices))}"

    return check


CONFIG_FILE = Path(__file__).resolve().parent.parent / "conf" / "config.yaml"

#: nodes instantiated from a ``_target_`` (their constructors check their options) or free-form (a recipe's
#: table, Hydra's own node): not checked here
OPEN = (
    "encoder",
    "attention",
    "projection",
    "trainer",
    "logger",
    "callbacks",
    "analysis",
    "model.network",
    "dataset.source",
    "recipe",
    "hydra",
    "cluster.additional_parameters",
)

#: every other node: its settings and what each must be
SCHEMA: dict[str, dict[str, Callable]] = {
    "": {
        "seed": integer(0),
        "model_seed": integer(0, optional=True),
        "threads": integer(1, optional=True),
        "force": boolean,
        "resume": boolean,
        "run_name": anything,
        "analysis": anything,
        "callbacks": anything,
        "training": anything,
        "model": anything,
        "dataset": anything,
        "encoder": anything,
        "attention": anything,
        "projection": anything,
        "trainer": anything,
        "logger": anything,
        "recipe": anything,
        "explainer": anything,
        "roar": anything,
        "paths": anything,
        "sweep": anything,
        "cluster": anything,
    },
    "model": {
        "name": anything,
        "network": anything,
        "embeddings": anything,
        "optimizer": anything,
        "class_weights": anything,
        "gradient_clip_val": number(0, optional=True),
    },
    "model.optimizer": {
        "lr": number(0),
        "weight_decay": number(0),
        "attention_weight_decay": number(0),
        "amsgrad": boolean,
    },
    "model.embeddings": {"path": anything, "freeze": boolean, "missing": one_of(*MISSING)},
    "training": {
        "schedule": anything,
        "pretrain_epochs": integer(0),
        "instance_weighting": boolean,
        "weight_clip": anything,
        "select_from_epoch": integer(0),
        "base": anything,
        "lam": number(0),
        "word_tying": anything,
    },
    "training.word_tying": {"weight": number(0), "kind": anything},
    "dataset": {
        "name": anything,
        "path": anything,
        "source": anything,
        "preprocessing": anything,
        "inject": anything,
        "batch_size": integer(1),
        "eval_batch_size": integer(1),
        "bucket": boolean,
        "shuffle_labels": boolean,
        "num_workers": integer(0),
        "rnn_hidden_size": integer(1),
        "decoder_dim": integer(1),
        "embedding_dim": integer(1),
    },
    "dataset.preprocessing": {
        "min_count": integer(1),
        "min_length": integer(1),
        "max_length": integer(1, True),
        "truncate": integer(1, True),
        "sentences": boolean,
        "clean": anything,
        "digits": anything,
        "vocab_count": anything,
        "boundary_tokens": boolean,
        "drop_longest": boolean,
    },
    "dataset.inject": {"count": integer(0), "tokens": anything, "positions": anything, "seed": integer()},
    "explainer": {"target": anything},
    "roar": {
        "name": anything,
        "recursive": boolean,
        "method": anything,
        "fraction": number(0, 1),
        "source": anything,
        "token": anything,
        "batch_size": integer(1),
        "ig_steps": integer(1),
        "chunk_size": integer(1),
    },
    "paths": {"cache_dir": anything, "data": anything},
    "paths.data": {name: anything for name in OmegaConf.load(CONFIG_FILE).paths.data},  # one path per source
    "sweep": {"name": anything, "wait_min": number(0), "synthetic": anything},
    "cluster": {
        "partition": anything,
        "account": anything,
        "qos": anything,
        "time_min": integer(1),
        "cpus": integer(1),
        "mem_gb": number(0),
        "gpus": integer(0),
        "array_parallelism": integer(1),
        "max_requeue": integer(0),
        "setup": anything,
        "additional_parameters": anything,
    },
}


def check_config(cfg: DictConfig) -> None:
    """Every setting outside :data:`OPEN` is one :data:`SCHEMA` knows, of the kind it must be: a ``UserError``
    of one line otherwise (with the nearest known name for a typo)."""
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    for path, allowed in SCHEMA.items():
        node = _at(container, path)
        if not isinstance(node, dict):
            continue
        for name, value in node.items():
            option = f"{path}.{name}" if path else name
            if option in OPEN:
                continue
            if name not in allowed:
                raise UserError(
                    f"{option}: no such setting{_nearest(name, allowed)}; "
                    f"{path or 'the top level'} has {sorted(allowed)}"
                )
            problem = allowed[name](value)
            if problem:
                raise UserError(f"{option}={value}: {problem}")


def _at(container, path: str):
    node = container
    for part in [p for p in path.split(".") if p]:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _nearest(name: str, allowed) -> str:
    close = difflib.get_close_matches(name, list(allowed), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


# -- two configs compared, for people ---------------------------------------------------------------

#: the groups whose choice is a list (conf/config.yaml: analysis=[jain_wallace,...], callbacks=[...])
LIST_GROUPS = ("analysis", "callbacks")
_ABSENT = object()


def config_differences(stored: dict, current: dict, limit: int | None = 4) -> list[str]:
    """How two config identities (flat ``a/b → value``, ``sweep.state.identity``) differ, as a person reads it:
    the groups' choices first (``encoder: lstm → cnn``, ``analysis: [jain_wallace] → []``) standing for every
    setting of the option they choose, then the other settings (``model.optimizer.lr: 0.001 → 0.01``);
    constructor paths (``_target_``) and ``run_name`` (made of the choices) only when nothing else differs.
    At most ``limit`` items, then ``… N more``."""

    def value(flat, key):
        return flat.get(key, _ABSENT)

    def shown(v) -> str:
        if v is _ABSENT:
            return "<absent>"
        return v if isinstance(v, str) and v else repr(v)

    def members(flat, group) -> list[str]:
        return sorted({k.split("/")[1] for k in flat if k.startswith(f"{group}/") and k.count("/") >= 1})

    chosen, covered = [], []
    for key in sorted(set(stored) | set(current)):
        group, _, rest = key.partition("/")
        if rest == "name" and value(stored, key) != value(current, key):
            chosen.append(f"{group}: {shown(value(stored, key))} → {shown(value(current, key))}")
            covered.append(f"{group}/")
    for group in LIST_GROUPS:
        old, new = members(stored, group), members(current, group)
        if old != new:
            chosen.append(f"{group}: [{','.join(old)}] → [{','.join(new)}]")
            covered += [f"{group}/{m}/" for m in set(old) ^ set(new)] + [group]

    settings, internal = [], []
    for key in sorted(set(stored) | set(current), key=lambda k: (k.count("/"), k)):
        old, new = value(stored, key), value(current, key)
        if old == new or (None in (old, new) and _ABSENT in (old, new)):  # an added setting, off (null)
            continue
        if any(key.startswith(c) if c.endswith("/") else key == c for c in covered):
            continue
        line = f"{key.replace('/', '.')}: {shown(old)} → {shown(new)}"
        (internal if key.endswith("_target_") or key == "run_name" else settings).append(line)
    diffs = chosen + settings or internal
    if limit is None or len(diffs) <= limit:
        return diffs
    return diffs[:limit] + [f"… {len(diffs) - limit} more"]
