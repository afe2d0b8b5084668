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
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attn_study import names, ranges
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
    ``${attn_study.families:${analysis}}`` (the chosen analyses), ``${attn_study.or:${dataset.cnn_filters},64}`` (a
    value a dataset suggests, or the component's default when it is null), ``${attn_study.analyze_dir:…}`` (where an
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
    if not OmegaConf.has_resolver("attn_study.or"):  # a dataset's suggestion, else the component's own default
        OmegaConf.register_new_resolver("attn_study.or", lambda value, default: default if value is None else value)
    if not OmegaConf.has_resolver("attn_study.options"):  # --help's listing, generated from conf/
        OmegaConf.register_new_resolver("attn_study.options", _options_help)
    names.register_resolvers()  # ${attn_study.run_name:}, ${attn_study.run_tags:}


# -- the schema --------------------------------------------------------------------------------------

#: nodes instantiated from a ``_target_`` (their constructors say which settings they take:
#: ``job.components.check_settings``) or free-form (a recipe's table, Hydra's own node): a setting they hold need not be
#: in :data:`attn_study.ranges.RANGES` to exist — but where it is, its kind and range hold there too
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
    "sweep.synthetic",
)


def check_config(cfg: DictConfig, table: dict | None = None) -> None:
    """Every setting outside :data:`OPEN` is one :data:`attn_study.ranges.RANGES` (or ``table``: an entry point's
    own, ``ranges.ANALYZE``) knows, and every setting it knows is of its kind and in its range — in :data:`OPEN`
    nodes too: a ``UserError`` of one line otherwise (with the nearest known name for a typo; naming the option the
    user wrote when the value came from another by interpolation)."""
    table = ranges.RANGES if table is None else table
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    unknown = _unknown_setting(container, table)
    if unknown:
        raise UserError(unknown)
    written = OmegaConf.to_container(cfg, resolve=False)
    outside = ranges.problems(container, written, table) or _missing_paths(container, written, table)
    if outside:
        raise UserError(outside[0])


def _missing_paths(container: dict, written: dict, table: dict) -> list[str]:
    """``option=path: no such file or folder`` for every path the run reads (``ranges.PathTo(read=True)``: the
    data, the vectors) that does not exist — said before any data is read, not after minutes of loading."""
    found = []
    for option, kind in table.items():
        value = ranges.at(container, option)
        if isinstance(kind, ranges.PathTo) and kind.read and isinstance(value, str) and value.strip():
            if not Path(value).expanduser().exists():
                where = ranges.source_option(option, value, container, written)
                found.append(f"{where}={value}: no such file or folder (relative paths start at {Path.cwd()})")
    return found


def _unknown_setting(node: dict, table: dict, path: str = "") -> str | None:
    """The first setting of ``node`` that ``table`` does not know, outside :data:`OPEN` and the free-form tables,
    as one line; None when there is none."""
    for name, value in node.items():
        option = f"{path}.{name}" if path else str(name)
        if option in OPEN or option.startswith(ranges.NOT_RANGED) or f"{option}.".startswith(ranges.NOT_RANGED):
            continue
        has_settings_below = any(k.startswith(f"{option}.") for k in table)
        if option not in table and not has_settings_below and not (table is not ranges.RANGES and option == "analysis"):
            below = f"{path}." if path else ""
            allowed = sorted({k[len(below) :].split(".")[0] for k in table if k.startswith(below)})
            return f"{option}: no such setting{nearest(str(name), allowed)}; {path or 'the top level'} has {allowed}"
        if isinstance(value, dict) and has_settings_below and not isinstance(table.get(option), ranges.Mapping):
            problem = _unknown_setting(value, table, option)
            if problem:
                return problem
    return None


def nearest(name: str, allowed) -> str:
    """`` (did you mean <the closest of allowed>?)`` for a typo, else ''."""
    close = difflib.get_close_matches(name, list(allowed), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


# -- two configs compared, for people ---------------------------------------------------------------

#: the groups whose choice is a list (conf/config.yaml: analysis=[jain_wallace,...], callbacks=[...])
LIST_GROUPS = ("analysis", "callbacks")
_ABSENT = object()


def config_differences(stored: dict, current: dict, limit: int | None = 4) -> list[str]:
    """How two config identities (flat ``a/b → value``, ``job.state.identity``) differ, as a person reads it:
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
