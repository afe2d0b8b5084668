"""OmegaConf resolvers the configs use (registered when ``attn_study`` is imported, which Hydra's
launcher workers also do when they unpickle a job)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from attn_study.sweep.naming import job_dir_name


def family_names(analysis: DictConfig | dict | None) -> str:
    """``analysis`` node → ``jain_wallace+serrano_smith`` (``none`` when empty): the W&B job type."""
    names = list(analysis or {})
    return "+".join(names) if names else "none"


def register_resolvers() -> None:
    """``${attn_study.job_dir:${hydra.overrides.task}}`` (a sweep job's directory name) and
    ``${attn_study.families:${analysis}}`` (the chosen analyses)."""
    if not OmegaConf.has_resolver("attn_study.job_dir"):
        OmegaConf.register_new_resolver("attn_study.job_dir", lambda overrides: job_dir_name(list(overrides)))
    if not OmegaConf.has_resolver("attn_study.families"):
        OmegaConf.register_new_resolver("attn_study.families", family_names)
