"""A run's name and W&B tags: every setting the papers' grids vary — dataset, model, encoder, attention,
projection and their parameters, the training variant, the recipe, the seeds — so two experiments never
share a name. ``run_name`` (``${attn_study.run_name:}``) also names the run directory.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import ListConfig, OmegaConf


def _number(value) -> str:
    """``0.5`` → ``0.5``, ``1.0`` → ``1``, ``-2`` → ``-2``."""
    return f"{float(value):g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _source_name(source) -> str:
    """A run referred to by a setting (``/x/runs/base``, ``sibling:wiegreffe_pinter/base``) → ``base``."""
    return Path(str(source).split(":", 1)[-1]).name


def _parameters(cfg) -> dict[str, str]:
    """The groups' options that make another model under the same option name: a projection's parameter
    (``sparsegen_lam-0.5``, ``entmax_bisect_alpha1.5``), a pretrained encoder's checkpoint (``pretrained_bert-base``,
    ``pretrained_bert-base_frozen``), pre-loaded attention's source run (``preloaded_from_base``)."""
    out = {}
    projection = cfg.get("projection") or {}
    for param in ("lam", "alpha"):
        if projection.get(param) is not None:
            out["projection"] = f"{projection.get('name')}_{param}{_number(projection.get(param))}"
    encoder = cfg.get("encoder") or {}
    if encoder.get("path"):  # encoder=pretrained: its checkpoint's folder, and whether it was frozen
        frozen = "" if encoder.get("finetune", True) else "_frozen"
        out["encoder"] = f"{encoder.get('name')}_{_source_name(encoder.get('path'))}{frozen}"
    attention = cfg.get("attention") or {}
    if attention.get("source"):
        out["attention"] = f"{attention.get('name')}_from_{_source_name(attention.get('source'))}"
    return out


def variants(cfg) -> list[str]:
    """What else makes another experiment, as name parts: the training variant (``pretrain4``,
    ``instance_weighting``, ``adversary_lam0.01``, ``word_tying_predict0.1``), the recipe
    (``recipe_jain_wallace``), an explainer's black box (``explains_<run>``), randomised labels
    (``shuffled_labels``)."""
    parts = []
    training = cfg.get("training") or {}
    schedule = training.get("schedule")
    if schedule == "random_attention_pretraining":
        parts.append(f"pretrain{training.get('pretrain_epochs')}")
    elif schedule == "model_consistent_adversary":
        parts.append(f"adversary_lam{_number(training.get('lam'))}")
    elif schedule not in (None, "standard"):
        parts.append(str(schedule))
    if training.get("instance_weighting"):
        parts.append("instance_weighting")
    tying = training.get("word_tying") or {}
    if tying.get("weight"):
        parts.append(f"word_tying_{tying.get('kind')}{_number(tying.get('weight'))}")
    recipe = cfg.get("recipe") or {}
    if recipe.get("name"):
        parts.append(f"recipe_{recipe.get('name')}")
    target = (cfg.get("explainer") or {}).get("target")
    if target:
        parts.append(f"explains_{_source_name(target)}")
    roar = cfg.get("roar") or {}
    if roar.get("method") is not None:  # data masked by another run's importance (conf/roar/): roar_gradient0.2
        parts.append(f"{roar.get('name')}_{roar.get('method')}{_number(roar.get('fraction'))}")
    if (cfg.get("dataset") or {}).get("shuffle_labels"):  # Adebayo et al.'s randomised-label model
        parts.append("shuffled_labels")
    return parts


GROUPS = ("dataset", "model", "encoder", "attention", "projection")


def run_name(*, _root_) -> str:
    """``${attn_study.run_name:}``: ``<dataset>-<model>-<encoder>-<attention>-<projection>[-<variant>…]-s<seed>``,
    ``-m<model_seed>`` when one is set, the groups' parameters and the :func:`variants` spelled out
    (``sst-flat-lstm-additive-sparsegen_lam-0.5-recipe_jain_wallace-s13``)."""
    cfg, parameters = _root_, _parameters(_root_)
    base = [parameters.get(group) or str((cfg.get(group) or {}).get("name")) for group in GROUPS]
    seeds = [f"s{cfg.get('seed')}"] + ([f"m{cfg.get('model_seed')}"] if cfg.get("model_seed") is not None else [])
    return "-".join(base + variants(cfg) + seeds)


def run_tags(*, _root_) -> ListConfig:
    """``${attn_study.run_tags:}``: the W&B tags — the groups' options (dataset, model, encoder, attention,
    projection), their parameters and the :func:`variants`."""
    cfg = _root_
    names = [str((cfg.get(group) or {}).get("name")) for group in GROUPS]
    # a ListConfig, not a list: OmegaConf.resolve puts a container in place, and a list it refuses
    return ListConfig(names + list(_parameters(cfg).values()) + variants(cfg))


def register_resolvers() -> None:
    for name, function in (("attn_study.run_name", run_name), ("attn_study.run_tags", run_tags)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function)
