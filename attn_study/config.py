"""The composed config: the resolvers it uses, and its check before anything runs.

Resolvers are registered when ``attn_study`` is imported (Hydra's launcher workers do so when they
unpickle a job). :func:`check_config` is the schema of every setting that nothing instantiates —
the nodes with a ``_target_`` are checked by their constructors — so that a typo (``+model.optimizer.lrr``)
or a value of the wrong kind (``seed=abc``, ``every_n_epochs=1.5``) is one line naming the option, before
any data is read, instead of a silently ignored setting that still enters the run's identity; and it checks
every numeric option, of those nodes too, against its range (``attn_study/ranges.py``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attn_study import names, ranges
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


def analyze_dir(ckpt_path, time: str) -> str:
    """``attn-study-analyze``'s Hydra directory (its log): ``<run>/analyze/<time>`` inside the run it analyses
    when ``ckpt_path`` names a run that can be written to; else (a pretrained model, a wrong path — said in one line
    once it runs) ``outputs/analyze/<time>``."""
    if ckpt_path:
        import os

        from attn_study import layout

        run = layout.run_of(str(ckpt_path).strip("'\""))
        if layout.is_run(run) and os.access(run, os.W_OK):
            return str(run / layout.ANALYZE_LOGS / time)
    return f"outputs/analyze/{time}"


def register_resolvers() -> None:
    """``${attn_study.job_dir:${hydra.overrides.task}}`` (a sweep job's directory name),
    ``${attn_study.families:${analysis}}`` (the chosen analyses), ``${attn_study.analyze_dir:…}`` (where an
    ``attn-study-analyze`` logs: :func:`analyze_dir`) and ``${attn_study.options:train}`` (the groups' options and
    the settings, for ``--help``)."""
    if not OmegaConf.has_resolver("attn_study.job_dir"):
        OmegaConf.register_new_resolver(
            "attn_study.job_dir", lambda overrides: job_dir_name(list(overrides), job_keys())
        )
    if not OmegaConf.has_resolver("attn_study.families"):
        OmegaConf.register_new_resolver("attn_study.families", family_names)
    if not OmegaConf.has_resolver("attn_study.analyze_dir"):
        OmegaConf.register_new_resolver("attn_study.analyze_dir", analyze_dir)
    if not OmegaConf.has_resolver("attn_study.options"):  # --help's listing, generated from conf/
        OmegaConf.register_new_resolver("attn_study.options", _options_help)
    names.register_resolvers()  # ${attn_study.run_name:}, ${attn_study.run_tags:}


# -- the schema --------------------------------------------------------------------------------------


def boolean(value):
    return None if isinstance(value, bool) else f"must be true or false, not {value!r}"


def anything(_value):
    return None


def ranged(_value):
    """A numeric setting: its range is :data:`attn_study.ranges.RANGES`'s, checked there."""
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
        "seed": ranged,
        "model_seed": ranged,
        "threads": ranged,
        "force": boolean,
        "resume": boolean,
        "analysis_max_instances": ranged,
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
        "gradient_clip_val": ranged,
    },
    "model.optimizer": {
        "lr": ranged,
        "weight_decay": ranged,
        "attention_weight_decay": ranged,
        "amsgrad": boolean,
    },
    "model.embeddings": {"path": anything, "freeze": boolean, "missing": one_of(*MISSING)},
    "training": {
        "schedule": anything,
        "pretrain_epochs": ranged,
        "instance_weighting": boolean,
        "weight_clip": anything,
        "select_from_epoch": ranged,
        "base": anything,
        "lam": ranged,
        "word_tying": anything,
    },
    "training.word_tying": {"weight": ranged, "kind": anything},
    "dataset": {
        "name": anything,
        "path": anything,
        "source": anything,
        "preprocessing": anything,
        "inject": anything,
        "batch_size": ranged,
        "eval_batch_size": ranged,
        "bucket": boolean,
        "shuffle_labels": boolean,
        "num_workers": ranged,
        "rnn_hidden_size": ranged,
        "cnn_filters": ranged,
        "average_hidden_size": ranged,
        "average_activation": anything,
        "decoder_dim": ranged,
        "embedding_dim": ranged,
    },
    "dataset.preprocessing": {
        "min_count": ranged,
        "min_length": ranged,
        "max_length": ranged,
        "truncate": ranged,
        "sentences": boolean,
        "clean": anything,
        "digits": anything,
        "vocab_count": anything,
        "boundary_tokens": boolean,
        "drop_longest": boolean,
    },
    "dataset.inject": {"count": ranged, "tokens": anything, "positions": anything, "seed": ranged},
    "explainer": {"target": anything},
    "roar": {
        "name": anything,
        "recursive": boolean,
        "method": anything,
        "fraction": ranged,
        "source": anything,
        "token": anything,
        "label": anything,
        "gradient": anything,
        "rounding": anything,
        "step": ranged,
        "batch_size": ranged,
        "ig_steps": ranged,
        "chunk_size": ranged,
    },
    "paths": {"cache_dir": anything, "data": anything},
    "paths.data": {name: anything for name in OmegaConf.load(CONFIG_FILE).paths.data},  # one path per source
    "sweep": {"name": anything, "wait_min": ranged, "synthetic": anything},
    "cluster": {
        "partition": anything,
        "account": anything,
        "qos": anything,
        "time_min": ranged,
        "cpus": ranged,
        "mem_gb": ranged,
        "gpus": ranged,
        "array_parallelism": ranged,
        "max_requeue": ranged,
        "setup": anything,
        "additional_parameters": anything,
    },
}


def check_config(cfg: DictConfig) -> None:
    """Every setting outside :data:`OPEN` is one :data:`SCHEMA` knows, of the kind it must be, and every numeric
    option, in :data:`OPEN` nodes too, within its range (:data:`attn_study.ranges.RANGES`): a ``UserError`` of one
    line otherwise (with the nearest known name for a typo)."""
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
                    f"{option}: no such setting{nearest(name, allowed)}; "
                    f"{path or 'the top level'} has {sorted(allowed)}"
                )
            problem = allowed[name](value)
            if problem:
                raise UserError(f"{option}={value}: {problem}")
    outside = ranges.problems(container)
    if outside:
        raise UserError(outside[0])


def _at(container, path: str):
    node = container
    for part in [p for p in path.split(".") if p]:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def nearest(name: str, allowed) -> str:
    """`` (did you mean <the closest of allowed>?)`` for a typo, else ''."""
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
